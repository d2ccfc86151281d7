-- Stage 2 of a datasets load: the edges of the "citations" files ($files) that touch the corpus (the
-- corpus papers of stage 1 and those already in works). Result: temp table _ds_citations.
CREATE OR REPLACE TEMP TABLE _ds_citations AS
WITH corpus AS (
    SELECT corpusid FROM _ds_corpus
    UNION SELECT corpus_id FROM works WHERE paper_id IS NOT NULL AND corpus_id IS NOT NULL
)
SELECT * FROM s2ds_citations($files)
WHERE citingcorpusid IN (SELECT corpusid FROM corpus) OR citedcorpusid IN (SELECT corpusid FROM corpus);

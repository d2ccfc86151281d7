-- Stage 3 of a datasets load: the other papers of the staged edges, and new records of works already
-- held, from the "papers" files ($files). Result: temp table _ds_neighbours (s2ds_papers columns).
CREATE OR REPLACE TEMP TABLE _ds_neighbours AS
WITH want AS (
    SELECT citingcorpusid AS corpusid FROM _ds_citations
    UNION SELECT citedcorpusid FROM _ds_citations
    UNION SELECT corpus_id FROM works WHERE corpus_id IS NOT NULL
)
SELECT * FROM s2ds_papers($files)
WHERE corpusid IN (SELECT corpusid FROM want WHERE corpusid IS NOT NULL)
  AND corpusid NOT IN (SELECT corpusid FROM _ds_corpus WHERE corpusid IS NOT NULL)
  AND sha <> '';

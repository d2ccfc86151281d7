-- Stage 1 of a datasets load: the corpus papers in the "papers" files ($files), matched on any id S2
-- can resolve for them (view s2_paper_lookup: S2 paperId, arXiv id, CorpusId, DOI); every other line
-- is dropped while reading. Result: temp table _ds_corpus (s2ds_papers columns + paper_id).
CREATE OR REPLACE TEMP TABLE _ds_corpus AS
WITH k AS (
    SELECT paper_id,
           CASE WHEN pref = 1 THEN lower(lookup_id) END AS sha,
           CASE WHEN lookup_id ILIKE 'arXiv:%' THEN lower(substr(lookup_id, 7)) END AS arxiv,
           CASE WHEN lookup_id ILIKE 'DOI:%' THEN lower(substr(lookup_id, 5))
                WHEN pref = 4 THEN lower(lookup_id) END AS doi,
           CASE WHEN lookup_id ILIKE 'CorpusId:%' THEN TRY_CAST(substr(lookup_id, 10) AS BIGINT) END AS corpusid
    FROM s2_paper_lookup
),
p AS MATERIALIZED (
    SELECT * FROM s2ds_papers($files)
    WHERE corpusid IN (SELECT corpusid FROM k WHERE corpusid IS NOT NULL)
       OR lower(arxiv_id) IN (SELECT arxiv FROM k WHERE arxiv IS NOT NULL)
       OR lower(doi) IN (SELECT doi FROM k WHERE doi IS NOT NULL)
       OR sha IN (SELECT sha FROM k WHERE sha IS NOT NULL)
),
m AS (
    SELECT corpusid, min(paper_id) AS paper_id FROM (
        SELECT p.corpusid, k.paper_id FROM p JOIN k ON k.corpusid = p.corpusid
        UNION ALL SELECT p.corpusid, k.paper_id FROM p JOIN k ON k.arxiv = lower(p.arxiv_id)
        UNION ALL SELECT p.corpusid, k.paper_id FROM p JOIN k ON k.doi = lower(p.doi)
        UNION ALL SELECT p.corpusid, k.paper_id FROM p JOIN k ON k.sha = p.sha
    ) GROUP BY corpusid
)
SELECT p.*, m.paper_id FROM p JOIN m USING (corpusid)
WHERE p.sha <> '';

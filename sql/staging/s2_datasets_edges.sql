-- citations rows from the staged dataset edges: both ends mapped from corpus id to work id (the staged
-- papers, then the works already held). An edge with an end no papers line names is left out (counted
-- as unlinked). Parameter: $fetched_at (TIMESTAMPTZ).
WITH ids AS (
    SELECT corpusid, min(work_id) AS work_id FROM (
        SELECT corpusid, sha AS work_id FROM _ds_corpus
        UNION ALL SELECT corpusid, sha FROM _ds_neighbours
        UNION ALL SELECT corpus_id, work_id FROM works WHERE corpus_id IS NOT NULL
    ) GROUP BY corpusid
)
SELECT c.citationid AS citation_id, a.work_id AS citing_work_id, b.work_id AS cited_work_id,
       c.isinfluential AS is_influential, c.intents, 's2' AS source, $fetched_at::TIMESTAMPTZ AS fetched_at
FROM _ds_citations c
JOIN ids a ON a.corpusid = c.citingcorpusid
JOIN ids b ON b.corpusid = c.citedcorpusid;

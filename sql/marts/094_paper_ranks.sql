-- paper_ranks: one row per paper, the values the nightly graph run and enrich change for many papers at once
-- (kept out of the LanceDB `papers` rows, so that a night's new PageRank rewrites no vector; readers join it
-- by paper_id: pipeline.query.ranks).
--   citation_count  S2's count on papers, else the graph's (paper_metrics.citation_count), else NULL
--   pagerank, weight  the graph metrics of the paper's work (NULL before `paperkb graph` runs); several
--                   works map to one paper only through data errors: the best-ranked one is kept
CREATE OR REPLACE VIEW paper_ranks AS
WITH m AS (
    SELECT paper_id, pagerank, weight, citation_count
    FROM paper_metrics
    WHERE paper_id IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY paper_id ORDER BY pagerank DESC NULLS LAST) = 1
)
SELECT p.paper_id,
       CAST(coalesce(p.citation_count, m.citation_count) AS INTEGER) AS citation_count,
       CAST(m.pagerank AS DOUBLE) AS pagerank,
       CAST(m.weight AS DOUBLE) AS weight
FROM papers p
LEFT JOIN m USING (paper_id);

-- paper_meta: one row per paper for the LanceDB `papers` table (the embed step reads this view).
--   paper_id, external_id, source, title, abstract, year, categories, primary_category  from papers
--   authors         author names in byline order (empty list when none)
--   citation_count  S2's count on papers, else the graph's (paper_metrics.citation_count), else NULL
--   pagerank, weight  the graph metrics of the paper's work (NULL before `paperkb graph` runs); several
--                   works map to one paper only through data errors: the best-ranked one is kept
CREATE OR REPLACE VIEW paper_meta AS
WITH m AS (
    SELECT paper_id, pagerank, weight, citation_count
    FROM paper_metrics
    WHERE paper_id IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY paper_id ORDER BY pagerank DESC NULLS LAST) = 1
), a AS (
    SELECT paper_id, list(name ORDER BY position) AS authors
    FROM paper_authors
    GROUP BY paper_id
)
SELECT p.paper_id, p.external_id, p.source, p.title, p.abstract,
       coalesce(a.authors, CAST([] AS VARCHAR[])) AS authors,
       CAST(p.year AS INTEGER) AS year,
       coalesce(p.categories, CAST([] AS VARCHAR[])) AS categories,
       p.primary_category,
       CAST(coalesce(p.citation_count, m.citation_count) AS INTEGER) AS citation_count,
       CAST(m.pagerank AS DOUBLE) AS pagerank,
       CAST(m.weight AS DOUBLE) AS weight
FROM papers p
LEFT JOIN m USING (paper_id)
LEFT JOIN a USING (paper_id);

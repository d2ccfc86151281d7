-- paper_meta: one row per paper for the LanceDB `papers` table (the embed step reads this view).
--   paper_id, external_id, source, title, abstract, year, categories, primary_category  from papers
--   authors         author names in byline order (empty list when none)
-- Only what changes with the paper itself: the values a night's graph run or enrich moves for many papers
-- (citation counts, PageRank, weights) are in `paper_ranks`, so they never rewrite a paper's vector rows.
CREATE OR REPLACE VIEW paper_meta AS
WITH a AS (
    SELECT paper_id, list(name ORDER BY position) AS authors
    FROM paper_authors
    GROUP BY paper_id
)
SELECT p.paper_id, p.external_id, p.source, p.title, p.abstract,
       coalesce(a.authors, CAST([] AS VARCHAR[])) AS authors,
       CAST(p.year AS INTEGER) AS year,
       coalesce(p.categories, CAST([] AS VARCHAR[])) AS categories,
       p.primary_category
FROM papers p
LEFT JOIN a USING (paper_id);

-- most_central_papers: corpus papers by PageRank, most central first (one row per corpus paper).
--   centrality_rank  1 = highest PageRank among corpus papers (ties share a rank)
--   paper_id, title, year, source, external_id   from papers
--   pagerank, citation_count, in_degree, out_degree, weight   from paper_metrics (latest graph run)
-- e.g. SELECT centrality_rank, paper_id, title, year FROM most_central_papers WHERE source = 'cacm' LIMIT 20;
CREATE OR REPLACE VIEW most_central_papers AS
SELECT
    rank() OVER (ORDER BY m.pagerank DESC) AS centrality_rank,
    p.paper_id, p.title, p.year,
    m.pagerank, m.citation_count, m.in_degree, m.out_degree, m.weight,
    p.source, p.external_id
FROM paper_metrics m
JOIN papers p ON p.paper_id = m.paper_id
ORDER BY m.pagerank DESC, p.paper_id;

-- paper_metrics: citation-graph metrics of every work in the graph (grain: work_id), written by
-- `paperkb graph` (issue 5). The whole table is replaced by each graph run (run_id says which).
--   work_id         works.work_id (S2 paperId, or '<collection>:<docno>')
--   paper_id        papers.paper_id when the work is a corpus paper, else NULL
--   pagerank        PageRank over the citation graph (citing -> cited, damping = graph_damping,
--                   default 0.85); sums to 1 over all works of the run
--   citation_count  c used for the weight: the larger of works.citation_count (S2's global count)
--                   and the number of citing works in the local graph
--   in_degree       citing works in the local graph (citations table)
--   out_degree      cited works in the local graph (references we know)
--   weight          power-law survival weight w = 1 - cdf(c) = P(C >= c) under the run's fit
--                   (powerlaw_fits); w = 1 below xmin (and for c = 0), decreasing above it, in [0, 1]
--   run_id          run_log.run_id of the graph run
CREATE TABLE IF NOT EXISTS paper_metrics (
    work_id         VARCHAR PRIMARY KEY,
    paper_id        VARCHAR,
    pagerank        DOUBLE NOT NULL,
    citation_count  INTEGER NOT NULL,
    in_degree       INTEGER NOT NULL,
    out_degree      INTEGER NOT NULL,
    weight          DOUBLE NOT NULL,
    run_id          VARCHAR NOT NULL
);

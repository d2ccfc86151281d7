-- related_now: the `related` rows scored as related papers, the page and recommendations show them
-- (pipeline/query/ccbc_now.py): ccbc_weighted with the current graph's weights and in-degrees of the two works
-- (paper_metrics) and the pair's stored coupling term and shared citers, ranked by it. An entry without a coupling
-- term (computed before the column existed) or whose works paper_metrics lacks keeps its stored score. Readers also
-- add the entries of newer lists that name the paper (related_incoming); this view does not.
--   paper_id, related_work_id, related_paper_id, ccbc_naive, shared_references, shared_citers, cites, cited_by,
--   run_id, coupling                       as in related
--   rank                                   1 = most related by ccbc_weighted now (then naive, then work order)
--   ccbc_weighted                          the score with today's graph
--   ccbc_weighted_stored, rank_stored      as the list's run scored and ranked it
CREATE OR REPLACE VIEW related_now AS
WITH ma AS (
    SELECT paper_id, weight, in_degree FROM paper_metrics WHERE paper_id IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY paper_id ORDER BY pagerank DESC NULLS LAST) = 1
), scored AS (
    SELECT r.*,
           CASE WHEN r.coupling IS NULL OR ma.weight IS NULL OR mb.weight IS NULL THEN r.ccbc_weighted
                ELSE r.coupling + (ma.weight * CAST(r.cited_by AS INTEGER) + mb.weight * CAST(r.cites AS INTEGER)) / 6.0
                     + ma.weight * mb.weight / 3.0
                       * CASE WHEN ma.in_degree + mb.in_degree - r.shared_citers > 0
                              THEN r.shared_citers / (ma.in_degree + mb.in_degree - r.shared_citers) ELSE 0 END
           END AS score_now
    FROM related r
    LEFT JOIN ma ON ma.paper_id = r.paper_id
    LEFT JOIN paper_metrics mb ON mb.work_id = r.related_work_id
)
SELECT paper_id,
       CAST(row_number() OVER (PARTITION BY paper_id ORDER BY score_now DESC, ccbc_naive DESC, related_work_id) AS INTEGER) AS rank,
       related_work_id, related_paper_id, score_now AS ccbc_weighted, ccbc_naive, shared_references, shared_citers,
       cites, cited_by, run_id, coupling, ccbc_weighted AS ccbc_weighted_stored, rank AS rank_stored
FROM scored;

-- related_works: the `related` rows with what readers show of the related work (query/related.py, the
-- HTTP API's related-papers graph and recommendations read it).
--   paper_id, rank, related_work_id, related_paper_id, ccbc_weighted, ccbc_naive,
--   shared_references, shared_citers, cites, cited_by,
--   run_id, coupling                                         from related (ccbc_weighted as its run scored it: readers
--                                                            score it with today's graph, pipeline/query/ccbc_now.py)
--   work_title, work_year, work_citation_count               the related work (works)
CREATE OR REPLACE VIEW related_works AS
SELECT r.paper_id, r.rank, r.related_work_id, r.related_paper_id, r.ccbc_weighted, r.ccbc_naive,
       r.shared_references, r.shared_citers, r.cites, r.cited_by, r.run_id, r.coupling,
       w.title AS work_title, w.year AS work_year, w.citation_count AS work_citation_count
FROM related r
LEFT JOIN works w ON w.work_id = r.related_work_id;

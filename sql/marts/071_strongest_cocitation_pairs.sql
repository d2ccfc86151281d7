-- strongest_cocitation_pairs: pairs of works cited together (shared citers > 0), strongest first,
-- taken from `related` (each corpus paper's top-k). A pair of two corpus papers appears once.
--   paper_id, title                     the corpus paper
--   related_work_id, related_paper_id, related_title   the other work (title from papers or works)
--   shared_citers                       works citing both (co-citation count)
--   ccbc_weighted, ccbc_naive           as in `related`
-- e.g. SELECT * FROM strongest_cocitation_pairs LIMIT 20;
CREATE OR REPLACE VIEW strongest_cocitation_pairs AS
SELECT
    r.paper_id, p.title,
    r.related_work_id, r.related_paper_id,
    coalesce(rp.title, w.title) AS related_title,
    r.shared_citers, r.ccbc_weighted, r.ccbc_naive, r.run_id
FROM related r
JOIN papers p ON p.paper_id = r.paper_id
LEFT JOIN papers rp ON rp.paper_id = r.related_paper_id
LEFT JOIN works w ON w.work_id = r.related_work_id
WHERE r.shared_citers > 0
  AND (r.related_paper_id IS NULL OR r.paper_id < r.related_paper_id
       OR NOT EXISTS (SELECT 1 FROM related r2
                      WHERE r2.paper_id = r.related_paper_id AND r2.related_paper_id = r.paper_id))
ORDER BY r.shared_citers DESC, r.ccbc_weighted DESC, r.paper_id, r.related_work_id;

-- Copy Semantic Scholar ids and counts onto papers, for the papers whose enrichment is complete in
-- this run (their ids are in the registered relation s2_done(paper_id)). Only changed rows are
-- written, so a rerun updates nothing; returns their paper_id (the change log's keys). If S2 maps two
-- works to one paper, the latest fetch wins.
UPDATE papers AS p
SET s2_paper_id = w.work_id,
    citation_count = w.citation_count,
    influential_citation_count = w.influential_citation_count,
    reference_count = w.reference_count,
    publication_types = w.publication_types,
    publication_date = w.publication_date,
    venue = w.venue,
    open_access_pdf_url = w.open_access_pdf_url,
    s2_enriched_at = w.fetched_at
FROM (
    SELECT * FROM works
    WHERE detail = 'paper' AND paper_id IN (SELECT paper_id FROM s2_done)
    QUALIFY row_number() OVER (PARTITION BY paper_id ORDER BY fetched_at DESC, work_id) = 1
) AS w
WHERE w.paper_id = p.paper_id
  AND (p.s2_paper_id IS DISTINCT FROM w.work_id
       OR p.citation_count IS DISTINCT FROM w.citation_count
       OR p.influential_citation_count IS DISTINCT FROM w.influential_citation_count
       OR p.reference_count IS DISTINCT FROM w.reference_count
       OR p.publication_types IS DISTINCT FROM w.publication_types
       OR p.publication_date IS DISTINCT FROM w.publication_date
       OR p.venue IS DISTINCT FROM w.venue
       OR p.open_access_pdf_url IS DISTINCT FROM w.open_access_pdf_url
       OR p.s2_enriched_at IS DISTINCT FROM w.fetched_at)
RETURNING p.paper_id;

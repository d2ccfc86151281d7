-- s2_unresolved: ids Semantic Scholar did not know when we asked (issue 3). Enrich skips them until
-- they are older than s2_refresh_days, then asks again; a later success removes the row.
--   lookup_id   the id we sent: 'arXiv:2104.12255', a DOI, 'CorpusId:...', or an S2 paperId
--   paper_id    papers.paper_id it was asked for (NULL if unknown)
--   reason      'null_in_batch' (S2 answered null in /paper/batch) or 'not_found' (HTTP 404)
--   raw_path    the raw-zone answer that says so
--   checked_at  when that answer was fetched
CREATE TABLE IF NOT EXISTS s2_unresolved (
    lookup_id   VARCHAR PRIMARY KEY,
    paper_id    VARCHAR,
    reason      VARCHAR NOT NULL,
    raw_path    VARCHAR,
    checked_at  TIMESTAMPTZ
);

-- fulltext_docs: one row per paper whose PDF was processed by `paperkb fulltext` (grain: paper_id).
-- Also rows for PDFs that could not be used (status 'rejected'), so they are not fetched every night;
-- the reason is also in `rejects` (step 'fulltext'). Delete a row to have the paper tried again.
--   paper_id       the paper (papers.paper_id)
--   status         'ok' (text, chunks and figures extracted) or 'rejected'
--   reason         why rejected: http_404 / http_<status>, not_pdf, empty, truncated, encrypted, corrupt,
--                  no_text (no extractable text, e.g. a scan), too_large, no_pdf_url; NULL when ok
--   raw_path       the PDF in the raw zone, relative to warehouse/raw ('pdf/1706.03762.pdf', 'pdf/1706.03762v7.pdf'
--                  for a version fetched by its number)
--   raw_sha256     sha256 of those bytes
--   n_pages        pages in the PDF
--   n_chars        characters of body text (the text chunks.char_start/char_end point into)
--   n_chunks       rows in chunks; n_figures: rows in figures
--   abstract_text  the abstract as printed in the PDF, when found (kept out of the body chunks)
--   extracted_at   when the stored extraction last changed (an identical re-extraction keeps it)
--   pdf_version    the arXiv version of the PDF read (for a rejected newer version, that version: the chunks of the
--                  version before stay); NULL when the name did not say (a fetch without a known version, which arXiv
--                  answers with its latest, an imported PDF, a paper not from arXiv). A paper whose papers.latest_version is
--                  newer is fetched again (fulltext_pending)
CREATE TABLE IF NOT EXISTS fulltext_docs (
    paper_id       VARCHAR PRIMARY KEY,
    status         VARCHAR NOT NULL,
    reason         VARCHAR,
    raw_path       VARCHAR,
    raw_sha256     VARCHAR,
    n_pages        INTEGER,
    n_chars        BIGINT,
    n_chunks       INTEGER,
    n_figures      INTEGER,
    abstract_text  VARCHAR,
    extracted_at   TIMESTAMPTZ
);
ALTER TABLE fulltext_docs ADD COLUMN IF NOT EXISTS pdf_version INTEGER;

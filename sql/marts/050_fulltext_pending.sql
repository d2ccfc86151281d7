-- fulltext_pending: papers `paperkb fulltext` should read: those with a PDF source (arXiv, an S2
-- open-access URL, or a local PDF that `paperkb import-pdfs` put in the raw zone) and no
-- fulltext_docs row yet.
CREATE OR REPLACE VIEW fulltext_pending AS
SELECT p.paper_id
FROM papers p
LEFT JOIN fulltext_docs d USING (paper_id)
WHERE d.paper_id IS NULL
  AND (p.source IN ('arxiv', 'local') OR p.open_access_pdf_url IS NOT NULL);

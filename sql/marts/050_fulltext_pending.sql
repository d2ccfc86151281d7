-- fulltext_pending: papers `paperkb fulltext` should read: those with a PDF source (arXiv, an S2
-- open-access URL, or a local PDF that `paperkb import-pdfs` put in the raw zone) and no
-- fulltext_docs row yet, and arXiv papers revised since their PDF was read: papers.latest_version above the
-- version read (fulltext_docs.pdf_version), or, when that is not known (read before the column existed, or
-- fetched without a known version, which arXiv answers with its latest), a latest version dated after the
-- extraction of a PDF that was read (status 'ok').
CREATE OR REPLACE VIEW fulltext_pending AS
SELECT p.paper_id
FROM papers p
LEFT JOIN fulltext_docs d USING (paper_id)
WHERE (d.paper_id IS NULL
       AND (p.source IN ('arxiv', 'local') OR p.open_access_pdf_url IS NOT NULL))
   OR (p.source = 'arxiv' AND d.paper_id IS NOT NULL AND p.latest_version IS NOT NULL
       AND CASE WHEN d.pdf_version IS NOT NULL THEN p.latest_version > d.pdf_version
                ELSE d.status = 'ok' AND p.latest_version > 1 AND p.updated > CAST(d.extracted_at AS DATE) END);

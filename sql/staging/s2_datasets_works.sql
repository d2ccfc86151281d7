-- works rows from the staged dataset lines: corpus papers as detail 'paper' (like a /paper/batch
-- record), the other papers as detail 'edge', never over a work already held as 'paper'.
-- Parameters: $fetched_at (TIMESTAMPTZ, when the files were fetched), $raw_root (raw zone root + '/').
SELECT sha AS work_id, paper_id, corpusid AS corpus_id, arxiv_id, doi, title, year, publication_date,
       publication_types, venue, citation_count, influential_citation_count, reference_count,
       NULL::VARCHAR AS open_access_pdf_url, 'paper' AS detail, $fetched_at::TIMESTAMPTZ AS fetched_at,
       replace(filename, $raw_root, '') AS raw_path
FROM _ds_corpus
QUALIFY row_number() OVER (PARTITION BY sha ORDER BY filename DESC) = 1
UNION ALL
SELECT n.sha, p.paper_id, n.corpusid, n.arxiv_id, n.doi, n.title, n.year, n.publication_date,
       n.publication_types, n.venue, n.citation_count, n.influential_citation_count, n.reference_count,
       NULL::VARCHAR, 'edge', $fetched_at::TIMESTAMPTZ, replace(n.filename, $raw_root, '')
FROM _ds_neighbours n
LEFT JOIN (SELECT s2_paper_id, min(paper_id) AS paper_id FROM papers WHERE s2_paper_id IS NOT NULL GROUP BY ALL) p
       ON p.s2_paper_id = n.sha
WHERE n.sha NOT IN (SELECT work_id FROM works WHERE detail = 'paper')
  AND n.sha NOT IN (SELECT sha FROM _ds_corpus)
QUALIFY row_number() OVER (PARTITION BY n.sha ORDER BY n.filename DESC) = 1;

-- s2_paper_lookup: every id Semantic Scholar can resolve for each corpus paper (issue 3).
-- `paperkb enrich` asks S2 with the id of lowest pref; the others let it map answers back on replay.
--   paper_id   papers.paper_id
--   lookup_id  an id S2 accepts: the S2 paperId once known, 'arXiv:<id>' for arXiv papers, an
--              external_id that already carries an S2 prefix (CorpusId:, DOI:, ARXIV:, MAG:, ACL:,
--              PMID:, PMCID:, URL:), or the paper's DOI (S2 accepts bare DOIs)
--   pref       1 = S2 paperId, 2 = arXiv id, 3 = prefixed external id, 4 = DOI
CREATE OR REPLACE VIEW s2_paper_lookup AS
SELECT paper_id, s2_paper_id AS lookup_id, 1 AS pref FROM papers WHERE s2_paper_id IS NOT NULL
UNION ALL
SELECT paper_id, 'arXiv:' || external_id, 2 FROM papers WHERE source = 'arxiv'
UNION ALL
SELECT paper_id, external_id, 3 FROM papers
WHERE source <> 'arxiv' AND regexp_matches(external_id, '^(CorpusId|DOI|ARXIV|MAG|ACL|PMID|PMCID|URL):', 'i')
UNION ALL
SELECT paper_id, doi, 4 FROM papers WHERE doi IS NOT NULL AND doi <> '';

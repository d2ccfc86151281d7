-- works: every paper that appears in the citation graph, in the corpus or not (issue 3).
-- One row per Semantic Scholar paper (work_id = S2 paperId, a 40-hex string). Collections that bring
-- their own citation data use work_id = paper_id (e.g. 'cacm:1234').
--   work_id                     S2 paperId (or the collection paper_id)
--   paper_id                    papers.paper_id when this work is a corpus paper, else NULL
--   corpus_id                   S2 corpusId (the id S2's bulk datasets use)
--   arxiv_id, doi               external ids as S2 reports them (NULL when S2 has none)
--   title, year                 as S2 reports them
--   publication_date            S2 publicationDate (corpus papers only; neighbours come without it)
--   publication_types           S2 publicationTypes, e.g. ['JournalArticle', 'Review']
--   venue                       S2 venue ('' from S2 is stored as NULL)
--   citation_count              papers citing this one, according to S2 at fetched_at
--   influential_citation_count  S2's "highly influential" citations (corpus papers only)
--   reference_count             papers this one cites, according to S2
--   open_access_pdf_url         S2 openAccessPdf.url
--   detail                      'paper' = full record from /paper/batch (corpus papers);
--                               'edge'  = the short record that came along a references/citations edge;
--                               'pdf'   = written by `paperkb graph` from the PDFs' reference lists: a corpus
--                               paper S2 does not know (work_id = paper_id), or a work only a reference names
--                               (work_id 'arxiv:<id>', 'doi:<doi>' or 'ref:<hash>'; title and year as printed)
--   fetched_at                  when the S2 answer this row comes from was fetched (raw zone manifest)
--   raw_path                    the raw-zone file this row was parsed from
CREATE TABLE IF NOT EXISTS works (
    work_id                     VARCHAR PRIMARY KEY,
    paper_id                    VARCHAR,
    corpus_id                   BIGINT,
    arxiv_id                    VARCHAR,
    doi                         VARCHAR,
    title                       VARCHAR,
    year                        INTEGER,
    publication_date            DATE,
    publication_types           VARCHAR[],
    venue                       VARCHAR,
    citation_count              INTEGER,
    influential_citation_count  INTEGER,
    reference_count             INTEGER,
    open_access_pdf_url         VARCHAR,
    detail                      VARCHAR,
    fetched_at                  TIMESTAMPTZ,
    raw_path                    VARCHAR
);

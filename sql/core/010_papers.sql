-- papers: one row per paper (grain: paper_id). Owned by harvest (arXiv metadata); the S2 columns
-- at the end are filled by `paperkb enrich`; collections (`import-collection`) add their own rows, and
-- `import-pdfs` adds local PDFs (metadata read from the PDF itself).
--   paper_id            normalised id: arXiv id without version ('2104.12255', 'astro-ph/0601001'),
--                       or '<collection>:<docno>' for local collections ('cisi:12'), or
--                       'local:<sha256 prefix>' for an imported PDF without an arXiv id
--   source              'arxiv', the collection name, or 'local' (import-pdfs, no arXiv id)
--   external_id         the id as the source knows it (arXiv id without version, or docno as text)
--   title, abstract     whitespace-collapsed text exactly as arXiv gives it (LaTeX kept)
--   categories          all arXiv categories, primary first; primary_category = categories[1]
--   published           date of version 1; updated = date of the latest version; year = year(published)
--   doi                 first DOI given by the authors; dois = all of them
--   journal_ref, comments, license (URL), submitter (arXivRaw only), report_no, msc_class, acm_class
--   latest_version      highest version number seen (versions table has each version)
--   oai_datestamp       OAI datestamp of the record last harvested (when arXiv last changed its metadata)
--   metadata_source     where the current row came from: 'oai:arXivRaw', 'oai:arXiv', 'api', or 'pdf'
--                       (import-pdfs: title, abstract, stamp version/category from the PDF)
CREATE TABLE IF NOT EXISTS papers (
    paper_id                    VARCHAR PRIMARY KEY,
    source                      VARCHAR NOT NULL,
    external_id                 VARCHAR NOT NULL,
    title                       VARCHAR,
    abstract                    VARCHAR,
    categories                  VARCHAR[],
    primary_category            VARCHAR,
    published                   DATE,
    updated                     DATE,
    year                        INTEGER,
    doi                         VARCHAR,
    dois                        VARCHAR[],
    journal_ref                 VARCHAR,
    comments                    VARCHAR,
    license                     VARCHAR,
    submitter                   VARCHAR,
    report_no                   VARCHAR,
    msc_class                   VARCHAR,
    acm_class                   VARCHAR,
    latest_version              INTEGER,
    oai_datestamp               DATE,
    metadata_source             VARCHAR,
    -- Semantic Scholar enrichment (filled by `paperkb enrich`, NULL until then)
    s2_paper_id                 VARCHAR,
    citation_count              INTEGER,
    influential_citation_count  INTEGER,
    reference_count             INTEGER,
    publication_types           VARCHAR[],
    publication_date            DATE,
    venue                       VARCHAR,
    open_access_pdf_url         VARCHAR,
    s2_enriched_at              TIMESTAMPTZ
);

-- paper_references: the bibliography of each PDF, one row per entry (grain: one reference of one paper).
-- Written by `paperkb fulltext` (replaced as a set per paper when its PDF's extraction changes); the
-- entry text comes from the chunks whose role is 'references', split into entries and parsed into
-- fields by pipeline/sources/pdf/references.py. `reference_links` says what each entry was matched to.
--   reference_id   '<paper_id>#ref<ordinal>'
--   paper_id       the citing paper (papers.paper_id)
--   ordinal        0, 1, 2 ... in the order printed
--   page           1-based PDF page the entry starts on
--   raw            the entry as printed (lines joined, hyphenation repaired)
--   authors        author names as printed ('Ashish Vaswani', 'D. Bahdanau'); empty when none were found
--   title          the cited work's title; NULL when none was found
--   year           the year printed in the entry
--   venue          journal, conference or publisher ('NIPS', 'CoRR'); NULL when none
--   arxiv_id       arXiv id without version ('1409.0473', 'hep-th/9901001'), from 'arXiv:...' or 'abs/...'
--   doi            DOI, lower case, without 'https://doi.org/'
--   url            the first other URL printed in the entry
--   content_hash   sha256 of raw
CREATE TABLE IF NOT EXISTS paper_references (
    reference_id  VARCHAR PRIMARY KEY,
    paper_id      VARCHAR NOT NULL,
    ordinal       INTEGER NOT NULL,
    page          INTEGER,
    raw           VARCHAR NOT NULL,
    authors       VARCHAR[],
    title         VARCHAR,
    year          INTEGER,
    venue         VARCHAR,
    arxiv_id      VARCHAR,
    doi           VARCHAR,
    url           VARCHAR,
    content_hash  VARCHAR NOT NULL
);

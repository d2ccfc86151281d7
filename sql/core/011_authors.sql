-- authors: one row per author name as arXiv writes it (grain: author_id). arXiv has no author
-- identifiers, so author_id is a readable key derived from the name: accents stripped, lower case,
-- non-letters as '-' (e.g. 'Dirk Wübben' -> 'dirk-wubben'). Two people with the same name share a row;
-- S2 author ids (enrich) are the disambiguated ones.
--   name        the name as last seen (Unicode, LaTeX accents decoded)
--   keyname     family name when arXiv gives it separately (OAI metadataPrefix=arXiv), else NULL
--   forenames   given names when arXiv gives them separately, else NULL
CREATE TABLE IF NOT EXISTS authors (
    author_id   VARCHAR PRIMARY KEY,
    name        VARCHAR NOT NULL,
    keyname     VARCHAR,
    forenames   VARCHAR
);

-- chunks: passages of PDF body text, the unit of passage search (grain: one window of one paper).
-- Body text = the PDF's text in reading order without running headers/footers, page numbers, the
-- arXiv side stamp, figure legends (see `figures`) and the abstract (fulltext_docs.abstract_text),
-- paragraphs joined by a blank line. A chunk never crosses a section; consecutive chunks of a section
-- overlap by chunk_overlap_tokens tokens.
--   chunk_id      '<paper_id>#<ordinal>'
--   paper_id      the paper (papers.paper_id)
--   ordinal       0, 1, 2 ... in reading order
--   section       heading of the section the chunk belongs to ('3.2 Attention'); NULL for the front
--                 matter (title, authors) before the first heading
--   role          the part of the paper the chunk is from, as GROBID labels them: 'front' (title,
--                 authors, affiliations, e-mails), 'body', 'acknowledgements', 'references' (the
--                 bibliography: one record per entry in `references`), 'appendix'. Only body,
--                 acknowledgements and appendix chunks are search passages (the `passages` mart).
--   page_start, page_end   1-based PDF pages the chunk starts and ends on
--   char_start, char_end   offsets into the paper's body text: text = body[char_start:char_end]
--   text          the passage
--   n_tokens      tokens of the chunking tokenizer (the embedding model's), [CLS]/[SEP] included
--   content_hash  sha256 of text: embedding skips chunks whose hash it has already encoded
CREATE TABLE IF NOT EXISTS chunks (
    chunk_id      VARCHAR PRIMARY KEY,
    paper_id      VARCHAR NOT NULL,
    ordinal       INTEGER NOT NULL,
    section       VARCHAR,
    role          VARCHAR,
    page_start    INTEGER,
    page_end      INTEGER,
    char_start    BIGINT NOT NULL,
    char_end      BIGINT NOT NULL,
    text          VARCHAR NOT NULL,
    n_tokens      INTEGER,
    content_hash  VARCHAR NOT NULL
);

-- warehouses made before chunk roles: the column is added (NULL until the next fulltext run; read as 'body')
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS role VARCHAR;

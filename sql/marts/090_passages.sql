-- passages: every text the search indexes, one row per passage (embed step reads this view).
--   chunk_id    '<paper_id>#<ordinal>' for a body chunk, '<paper_id>#abs' for the abstract passage
--   paper_id    the paper it belongs to
--   kind        'body' (a chunk of the PDF's full text) or 'abstract' (title + abstract)
--   ordinal     chunk order within the paper; -1 for the abstract passage
--   section     section heading of a body chunk; 'abstract' for the abstract passage
--   role        the part of the paper: 'body', 'acknowledgements' or 'appendix' for a chunk (chunks of the
--               front matter and the references are never passages), 'abstract' for the abstract passage
--   page_start, page_end   PDF pages of a body chunk (NULL for the abstract passage)
--   title       the paper's title (documents encoded as [title, text] pairs use it)
--   body        the passage's own text (chunk text, or the abstract alone)
--   text        what is shown and indexed for BM25: chunk text, or "title. abstract"
-- Every paper with a title or an abstract has an abstract passage, so collections without PDFs
-- (CISI, Cranfield...) are searchable too.
CREATE OR REPLACE VIEW passages AS
SELECT c.chunk_id,
       c.paper_id,
       'body' AS kind,
       c.ordinal,
       c.section,
       coalesce(c.role, 'body') AS role,
       c.page_start,
       c.page_end,
       p.title,
       c.text AS body,
       c.text AS text
FROM chunks c
LEFT JOIN papers p ON p.paper_id = c.paper_id
WHERE coalesce(trim(c.text), '') <> ''
  AND coalesce(c.role, 'body') IN ('body', 'acknowledgements', 'appendix')  -- text.SEARCHABLE_ROLES
UNION ALL
SELECT p.paper_id || '#abs' AS chunk_id,
       p.paper_id,
       'abstract' AS kind,
       -1 AS ordinal,
       'abstract' AS section,
       'abstract' AS role,
       NULL AS page_start,
       NULL AS page_end,
       p.title,
       coalesce(trim(p.abstract), '') AS body,
       concat_ws('. ', nullif(trim(p.title), ''), nullif(trim(p.abstract), '')) AS text
FROM papers p
WHERE coalesce(trim(p.title), '') <> '' OR coalesce(trim(p.abstract), '') <> '';

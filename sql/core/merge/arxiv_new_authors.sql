-- arXiv harvest: add authors not seen before (staging -> core).
-- Input: `incoming_authors` (author_id, name, keyname, forenames), one row per author_id, registered by
-- pipeline.steps.harvest. An existing author row is never rewritten: the first spelling seen stays, so a rerun
-- over the same raw data changes nothing (paper_authors.name keeps each paper's own spelling).
INSERT INTO authors (author_id, name, keyname, forenames)
SELECT i.author_id, i.name, i.keyname, i.forenames
FROM incoming_authors i
WHERE NOT EXISTS (SELECT 1 FROM authors a WHERE a.author_id = i.author_id)
RETURNING author_id;

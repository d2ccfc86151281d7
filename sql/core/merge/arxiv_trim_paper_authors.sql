-- arXiv harvest: drop author positions a paper no longer has (its new version lists fewer authors).
-- Input: `incoming_author_counts` (paper_id, n_authors) for the papers being written in this batch.
-- Positions 1..n_authors are then upserted; on a rerun this deletes nothing.
DELETE FROM paper_authors
WHERE EXISTS (
    SELECT 1 FROM incoming_author_counts c
    WHERE c.paper_id = paper_authors.paper_id AND paper_authors.position > c.n_authors
)
RETURNING paper_id;

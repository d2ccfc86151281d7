-- work_authors: author list of each enriched work, in byline order (issue 3).
--   work_id    works.work_id
--   position   0-based byline position
--   author_id  s2_authors.author_id (NULL when S2 has the name but no author record)
--   name       the name as printed on this paper, per S2
CREATE TABLE IF NOT EXISTS work_authors (
    work_id    VARCHAR NOT NULL,
    position   INTEGER NOT NULL,
    author_id  VARCHAR,
    name       VARCHAR,
    PRIMARY KEY (work_id, position)
);

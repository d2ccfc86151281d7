-- paper_authors: the author list of each paper, in order (grain: paper_id, position; position 1 = first author).
--   author_id    -> authors.author_id
--   name         the name as printed on this paper
--   affiliation  affiliation(s) given on this paper ('; '-joined), when arXiv has them
CREATE TABLE IF NOT EXISTS paper_authors (
    paper_id     VARCHAR NOT NULL,
    position     INTEGER NOT NULL,
    author_id    VARCHAR NOT NULL,
    name         VARCHAR NOT NULL,
    affiliation  VARCHAR,
    PRIMARY KEY (paper_id, position)
);

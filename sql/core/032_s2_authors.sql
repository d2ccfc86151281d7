-- s2_authors: authors of corpus papers as Semantic Scholar knows them (issue 3).
--   author_id       S2 authorId
--   name            S2's display name
--   citation_count  citations to all the author's papers, per S2
--   paper_count     papers S2 attributes to the author
--   h_index         S2's h-index of the author
--   fetched_at      when the S2 answer was fetched
CREATE TABLE IF NOT EXISTS s2_authors (
    author_id       VARCHAR PRIMARY KEY,
    name            VARCHAR,
    citation_count  INTEGER,
    paper_count     INTEGER,
    h_index         INTEGER,
    fetched_at      TIMESTAMPTZ
);

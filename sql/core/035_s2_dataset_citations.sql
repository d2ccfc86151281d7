-- s2_dataset_citations: the S2 Datasets' citation id of each edge loaded from the datasets (issue 14),
-- so the delete files of a diff (which name citations by citationid only) can remove the edge.
--   citation_id     S2 citationid
--   citing_work_id  citations.citing_work_id
--   cited_work_id   citations.cited_work_id
CREATE TABLE IF NOT EXISTS s2_dataset_citations (
    citation_id     BIGINT PRIMARY KEY,
    citing_work_id  VARCHAR NOT NULL,
    cited_work_id   VARCHAR NOT NULL
);

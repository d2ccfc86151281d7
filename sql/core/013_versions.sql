-- versions: each arXiv version of a paper (grain: paper_id, version). Full history comes from OAI
-- metadataPrefix=arXivRaw; the arXiv API and metadataPrefix=arXiv only tell the latest version.
--   version       1 for v1, 2 for v2 ...
--   submitted_at  when that version was submitted (UTC)
--   size          size as arXiv reports it ('294kb'), NULL when unknown
--   source_type   arXiv source type flag (arXivRaw), NULL when unknown
CREATE TABLE IF NOT EXISTS versions (
    paper_id      VARCHAR NOT NULL,
    version       INTEGER NOT NULL,
    submitted_at  TIMESTAMPTZ,
    size          VARCHAR,
    source_type   VARCHAR,
    PRIMARY KEY (paper_id, version)
);

-- citations: directed edges of the citation graph, citing -> cited (issue 3; collections add theirs).
--   citing_work_id   works.work_id of the paper whose bibliography holds the reference
--   cited_work_id    works.work_id of the paper being cited
--   is_influential   S2's isInfluential flag (NULL when the source does not say)
--   intents          S2 citation intents: 'background', 'methodology', 'result' (NULL when not given)
--   source           where the edge comes from: 's2', 'pdf' (the citing paper's own reference list, matched by
--                    `paperkb graph`: see reference_links) or the collection name; an edge two sources give is
--                    stored once, under the source that wrote it first
--   fetched_at       when the answer holding the edge was fetched
-- An edge S2 cannot link to a known paper (paperId null in S2's answer) is not stored; enrich counts
-- those as unlinked.
CREATE TABLE IF NOT EXISTS citations (
    citing_work_id  VARCHAR NOT NULL,
    cited_work_id   VARCHAR NOT NULL,
    is_influential  BOOLEAN,
    intents         VARCHAR[],
    source          VARCHAR NOT NULL,
    fetched_at      TIMESTAMPTZ,
    PRIMARY KEY (citing_work_id, cited_work_id)
);

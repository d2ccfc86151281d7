-- related_incoming: the related lists of the papers a recent graph run computed because they were new or changed
-- (not the rolling slice), keyed by that run and by the corpus paper each row names, so a reader finds the lists
-- computed after a paper's own list that name it (pipeline/query/related.py). Weighted CCBC is symmetric: such a
-- row scores the pair for a later graph than the named paper's stored list, which gains the new paper (or its
-- newer score) without being rewritten (docs/graph.md). Each graph run appends its rows and drops those of runs no
-- newer than every stored list (nobody's list is older); a full refresh leaves it empty.
--   entry_key         run_id || '/' || related_paper_id: the key order is by run, then by the paper named
--   related_paper_id  the corpus paper the list names (papers.paper_id)
--   paper_id          the paper whose list it is (new or changed in that run)
--   work_id           works.work_id of that paper
--   ccbc_weighted, ccbc_naive, shared_references, shared_citers   of the pair, as in related
--   cites             the named paper cites the list's paper; cited_by: the list's paper cites it (related's, seen
--                     from the named paper)
--   run_id            the graph run that computed the list
--   coupling          the pair's bibliographic-coupling term, as in related
CREATE TABLE IF NOT EXISTS related_incoming (
    entry_key          VARCHAR NOT NULL,
    related_paper_id   VARCHAR NOT NULL,
    paper_id           VARCHAR NOT NULL,
    work_id            VARCHAR NOT NULL,
    ccbc_weighted      DOUBLE NOT NULL,
    ccbc_naive         DOUBLE NOT NULL,
    shared_references  INTEGER NOT NULL,
    shared_citers      INTEGER NOT NULL,
    cites              BOOLEAN NOT NULL,
    cited_by           BOOLEAN NOT NULL,
    run_id             VARCHAR NOT NULL,
    coupling           DOUBLE
);
ALTER TABLE related_incoming ADD COLUMN IF NOT EXISTS coupling DOUBLE;

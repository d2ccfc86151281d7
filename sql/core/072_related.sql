-- related: for every corpus paper, its top-k related works by weighted CCBC (RACP Eq. 3), with the
-- naive CCBC (RACP Eq. 1) of the same pair (grain: paper_id, rank). Each graph run replaces the lists of new and
-- changed papers and, in turn, of those computed longest ago, as many as the graph changed (docs/graph.md); a full
-- refresh replaces all. Only pairs that share a reference, a citer or a direct citation are candidates.
--   paper_id          the corpus paper (papers.paper_id)
--   rank              1 = most related (weighted CCBC desc, then naive desc, then work order)
--   related_work_id   works.work_id of the related work (a corpus paper or not)
--   related_paper_id  papers.paper_id of the related work when it is a corpus paper, else NULL
--   ccbc_weighted     Eq. 3: 1/6 w(A) I(B cites A) + 1/6 w(B) I(A cites B)
--                     + 1/3 sum_{shared refs} w / sum_{union of refs} w + 1/3 w(A) w(B) Jaccard(citers)
--   ccbc_naive        Eq. 1: 2/5 (1/2 I(A cites B or B cites A) + Jaccard(refs) + Jaccard(citers))
--   shared_references references both cite (bibliographic coupling strength)
--   shared_citers     works citing both (co-citation strength)
--   cites             the paper cites the related work;  cited_by: the related work cites the paper
--   run_id            run_log.run_id of the graph run that computed this paper's list
--   coupling          the bibliographic-coupling term of ccbc_weighted (1/3 sum_{shared refs} w / sum_{union} w) as
--                     that run computed it; readers add the other terms with the snapshot's current weights and
--                     in-degrees (paper_metrics), so a list computed some runs ago is ranked by today's graph
--                     (pipeline/query/ccbc_now.py). NULL for lists computed before the column existed.
CREATE TABLE IF NOT EXISTS related (
    paper_id           VARCHAR NOT NULL,
    rank               INTEGER NOT NULL,
    related_work_id    VARCHAR NOT NULL,
    related_paper_id   VARCHAR,
    ccbc_weighted      DOUBLE NOT NULL,
    ccbc_naive         DOUBLE NOT NULL,
    shared_references  INTEGER NOT NULL,
    shared_citers      INTEGER NOT NULL,
    cites              BOOLEAN NOT NULL,
    cited_by           BOOLEAN NOT NULL,
    run_id             VARCHAR NOT NULL,
    coupling           DOUBLE,
    PRIMARY KEY (paper_id, rank)
);
ALTER TABLE related ADD COLUMN IF NOT EXISTS coupling DOUBLE;

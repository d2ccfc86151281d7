-- A Datasets diff deleted these citation records (_ds_gone_edges, sql/staging/s2_datasets_delete_citations.sql):
-- drop them from the dataset's edge ledger and from the citation graph. Returns the citing work of each
-- graph edge deleted (the change log's keys, one row per edge).
DELETE FROM s2_dataset_citations WHERE citation_id IN (SELECT citation_id FROM _ds_gone_edges);
DELETE FROM citations c USING _ds_gone_edges g
WHERE c.citing_work_id = g.citing_work_id AND c.cited_work_id = g.cited_work_id
RETURNING c.citing_work_id;

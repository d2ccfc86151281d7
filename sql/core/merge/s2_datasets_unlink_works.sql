-- A Datasets diff deleted these papers (_ds_gone, sql/staging/s2_datasets_delete_papers.sql): drop every
-- edge that touches them, from the dataset's edge ledger and from the citation graph. Returns the citing
-- work of each graph edge deleted (the change log's keys, one row per edge); the works go next
-- (s2_datasets_delete_works.sql).
DELETE FROM s2_dataset_citations
WHERE citing_work_id IN (SELECT work_id FROM _ds_gone) OR cited_work_id IN (SELECT work_id FROM _ds_gone);
DELETE FROM citations
WHERE citing_work_id IN (SELECT work_id FROM _ds_gone) OR cited_work_id IN (SELECT work_id FROM _ds_gone)
RETURNING citing_work_id;

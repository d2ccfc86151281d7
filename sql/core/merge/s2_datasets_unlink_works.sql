-- A Datasets diff deleted these papers (_ds_gone, sql/staging/s2_datasets_delete_papers.sql): drop every
-- edge that touches them, from the dataset's edge ledger and from the citation graph. Returns the
-- number of graph edges deleted (the last statement's count); the works go next
-- (s2_datasets_delete_works.sql).
DELETE FROM s2_dataset_citations
WHERE citing_work_id IN (SELECT work_id FROM _ds_gone) OR cited_work_id IN (SELECT work_id FROM _ds_gone);
DELETE FROM citations
WHERE citing_work_id IN (SELECT work_id FROM _ds_gone) OR cited_work_id IN (SELECT work_id FROM _ds_gone);

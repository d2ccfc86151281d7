-- A diff's "citations" delete files ($files): the edges with those citation ids go.
CREATE OR REPLACE TEMP TABLE _ds_gone_edges AS
SELECT citing_work_id, cited_work_id, citation_id FROM s2_dataset_citations
WHERE citation_id IN (SELECT id FROM s2ds_deleted($files, 'citationid'));

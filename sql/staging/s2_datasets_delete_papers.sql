-- A diff's "papers" delete files ($files): the works with those corpus ids, and their edges, go.
CREATE OR REPLACE TEMP TABLE _ds_gone AS
SELECT work_id FROM works WHERE corpus_id IN (SELECT id FROM s2ds_deleted($files, 'corpusid'));

-- The works a Datasets diff deleted (_ds_gone), once their edges are gone. Returns their work_id.
DELETE FROM works WHERE work_id IN (SELECT work_id FROM _ds_gone) RETURNING work_id;

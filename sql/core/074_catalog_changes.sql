-- _catalog_changes: the keys each write changed in a table whose snapshot copy is published by its changes (every
-- published table with a text key but paper_metrics and powerlaw_fits; pipeline.catalog_changes.JOURNALED): a
-- publish then rewrites only the catalog partitions that hold those keys, instead of scanning the whole table
-- (pipeline/catalog_changes.py, pipeline/steps/catalog/). Written in the same transaction as the change by
-- Warehouse.upsert / delete_where_in and by each step's own SQL (RETURNING <key>). Operational: not in snapshots;
-- the last 20,000 entries are kept.
--   seq         increasing, one per change
--   table_name  the changed table
--   keys        NULL = every row changed; else [] and the keys are in _catalog_change_keys (entries logged by an
--               older paperkb held them here: moved there when the warehouse is next opened for writing)
--   changed_at  when the change was recorded
CREATE TABLE IF NOT EXISTS _catalog_changes (
    seq         BIGINT PRIMARY KEY,
    table_name  VARCHAR NOT NULL,
    keys        VARCHAR[],
    changed_at  TIMESTAMPTZ NOT NULL
);

-- _catalog_change_keys: the keys of each _catalog_changes entry, one row each. Operational, pruned with the entries.
-- (A list per entry made every read of one night's keys decode every entry's: 0.06 s a table at 1.5M logged keys,
-- growing night after night; here the rows of older entries are skipped by seq.)
--   seq  the _catalog_changes entry
--   key  a value of the table's first column whose rows were deleted, replaced or added
CREATE TABLE IF NOT EXISTS _catalog_change_keys (
    seq  BIGINT NOT NULL,
    key  VARCHAR NOT NULL
);
INSERT INTO _catalog_change_keys
    SELECT seq, unnest(keys) FROM _catalog_changes
    WHERE len(keys) > 0 AND seq NOT IN (SELECT seq FROM _catalog_change_keys) ORDER BY seq;
UPDATE _catalog_changes SET keys = [] WHERE len(keys) > 0;

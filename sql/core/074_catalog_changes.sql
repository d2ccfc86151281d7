-- _catalog_changes: the keys a step changed in a table whose snapshot copy is published by its changes (the graph
-- step's `related`): a publish then rewrites only the catalog partitions that hold those keys, instead of scanning
-- the whole table (pipeline/catalog_changes.py, pipeline/steps/catalog.py). Operational: not in snapshots.
--   seq         increasing, one per change
--   table_name  the changed table
--   keys        values of the table's first column (its key) whose rows were deleted, replaced or added; NULL = all
--   changed_at  when the change was recorded
CREATE TABLE IF NOT EXISTS _catalog_changes (
    seq         BIGINT PRIMARY KEY,
    table_name  VARCHAR NOT NULL,
    keys        VARCHAR[],
    changed_at  TIMESTAMPTZ NOT NULL
);

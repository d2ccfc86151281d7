-- _catalog_changes: the keys each write changed in a table whose snapshot copy is published by its changes (every
-- published table with a text key but paper_metrics and powerlaw_fits; pipeline.catalog_changes.JOURNALED): a
-- publish then rewrites only the catalog partitions that hold those keys, instead of scanning the whole table
-- (pipeline/catalog_changes.py, pipeline/steps/catalog.py). Written in the same transaction as the change by
-- Warehouse.upsert / delete_where_in and by each step's own SQL (RETURNING <key>). Operational: not in snapshots;
-- the last 20,000 entries are kept.
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

"""Write a snapshot's catalog as Parquet partitions, linking those the previous snapshot already holds.

Layout (inside a snapshot folder, see :mod:`pipeline.snapshots`)::

    catalog.duckdb                      views only: ``CREATE VIEW t AS SELECT * FROM read_parquet('catalog/t/*.parquet')``
                                        for each table, then the warehouse's own views (over those)
    catalog/<table>/<fingerprint>.parquet   one file per partition of the table

Partitions are content-defined, so that a night's new rows touch few of them: rows are ordered by the
table's first column (its key: ``paper_id``, ``chunk_id``, ``citing_work_id``...), and a new partition
starts at every key whose hash is a multiple of the table's partition size (:func:`part_rows`: about a
sixty-fourth of the table's distinct keys, a power of two from 128 to 65,536, kept from the previous snapshot
until the table has doubled or halved, see :func:`partition_size`; the boundaries depend on the keys alone, so
inserting or deleting rows moves no boundary elsewhere), and a run of keys between two such boundaries is cut every
twice that many keys from its start (:data:`MAX_PART_FACTOR`: no partition far larger than the others; inserting a
key moves only its own run's cuts), the table's last run every quarter of that size (:data:`TAIL_SPLIT`: new increasing
keys land there, and a night rewrites its last piece). Each
partition is named by a fingerprint of its content (the table's column names and types, its row count,
and the sum and xor of DuckDB's 64-bit ``hash`` of each row: order-independent, computed in one grouped
scan). A partition whose file the previous snapshot holds under the same name is hard-linked from it; the
others are written in one ``COPY ... PARTITION_BY``. Keys that arrive in increasing
order (arXiv ids, new chunks of new papers, new citations) land in the last partitions. The tables every graph run
rewrites whole (:data:`WHOLE`: ``paper_metrics``, whose PageRank values all move, and ``powerlaw_fits``) are one
file each, named by the same fingerprint of the whole table.

Finding which partitions changed would mean a scan of the table. A table whose every writer logs the keys it
changed (:data:`pipeline.catalog_changes.JOURNALED`: every published table with a text key except ``paper_metrics``
and ``powerlaw_fits``, which each graph run writes whole) is published by its changes instead
(:func:`_write_changed`): only the key ranges of the previous snapshot's partitions that hold a changed key are read
(whole runs; the last run from its last piece on when the changes only added keys there, :func:`_appended_tail`) and
numbered again, the other partitions are linked unread, and the result is the same files as a full scan. The
table is scanned as above when the log cannot say (no previous snapshot, its position pruned from the log, a write of
most of the table, other columns, a row count the log does not explain) or ``paperkb publish --full`` asks.

DuckDB resolves the views' relative paths against its ``file_search_path``: readers open the catalog with
:func:`pipeline.snapshots.open_catalog`, which sets it to the snapshot folder (the folder may be renamed or
moved: no absolute path is written).

Layout::

    partitions.py  the partition size, the keys numbered into partitions, a partition's fingerprint
    files.py       partition files linked from the previous snapshot or written; the rows it recorded
    changes.py     a table published by its changes: the key ranges that hold a changed key, the rest linked
    build.py       build_catalog: every table (write_table), the reordered copies, catalog.duckdb's views
"""

from pipeline.steps.catalog.build import (OPERATIONAL_TABLES, REORDERED, REORDERED_ROW_GROUP, WHOLE, build_catalog,
                                          published_tables, require_warehouse, view_sql, write_reordered, write_table)
from pipeline.steps.catalog.changes import _run_starts, changed_ranges
from pipeline.steps.catalog.files import FOLDER, RANGED_WRITES, file_rows, part_starts
from pipeline.steps.catalog.partitions import (KEYS, MAX_PART_FACTOR, MIN_PART_ROWS, PARTS_PER_TABLE,
                                               PARTS_PER_TABLE_OF, _natural, columns_digest, number_keys, part_rows,
                                               partition_fingerprints, partition_size, tail_piece)

__all__ = ["FOLDER", "KEYS", "MAX_PART_FACTOR", "MIN_PART_ROWS", "OPERATIONAL_TABLES", "PARTS_PER_TABLE",
           "PARTS_PER_TABLE_OF", "RANGED_WRITES", "REORDERED", "REORDERED_ROW_GROUP", "WHOLE", "_natural",
           "_run_starts", "build_catalog", "changed_ranges", "columns_digest", "file_rows", "number_keys",
           "part_rows", "part_starts", "partition_fingerprints", "partition_size", "published_tables",
           "require_warehouse", "tail_piece", "view_sql", "write_reordered", "write_table"]

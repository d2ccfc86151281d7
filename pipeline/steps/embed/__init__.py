"""Embed passages, papers and figure legends into the working LanceDB (``warehouse/lancedb``).

Flow (also the fan-out for Airflow mapped tasks)::

    plan_shards(settings, n)      -> [{"index": i, "count": n, "part": ...}, ...]
    embed_shard(settings, shard)  -> encodes the shard's texts whose hash is not cached yet and writes
                                     staging/embed/<model key>/<part>.parquet (no LanceDB writes); the texts are
                                     read a batch at a time and spilled to a temporary file, so a first embed
                                     holds a window of them, not the collection's
    merge_embeddings(settings)    -> moves staged vectors into the vector cache, then syncs the LanceDB
                                     tables chunks, papers, figures with the warehouse + indexes
    run_embed(settings)           -> all of it in one process

Incremental by content: a vector is cached under (model key, sha256 of exactly what the encoder
sees), so a rerun over unchanged data encodes nothing and a changed chunk re-encodes only itself.
LanceDB rows carry a ``row_hash``, the md5 of the warehouse row they were built from; the step compares those of
the papers the change log names since its last sync (:mod:`pipeline.steps.embed_changes`) and reads, encodes and
writes only rows whose hash changed (LanceDB ``merge_insert``; the ``papers`` rows hold only what is embedded or
shown with a paper, never a value the graph run or enrich moves for many papers, so a night rewrites only its new
and changed papers' rows), deletes rows of chunks/papers that left the warehouse (withdrawn, re-chunked) and inserts
new ones. Tables are stamped with the model (name, dimension, key) in their schema metadata; a
different model drops and rebuilds them, so a table never mixes vector spaces.

Crash safety. ``run_embed`` and ``merge_embeddings`` hold the warehouse writer lock
(``pipeline.writer_lock``), so one process at a time syncs LanceDB; ``embed_shard`` takes no lock (it
only reads DuckDB and writes its own staging parts). Encoded vectors are staged every
``embed_checkpoint_texts`` texts, so a killed embed resumes where it stopped. Every LanceDB write is one
atomic commit (a new table version), so a sync killed at any point leaves each table at its old or its
new version; before syncing, ``repair_table`` checks each table (opens, reads, one row per key) and
rebuilds a damaged one from the vector cache. Running ``embed`` again always converges.

Layout (one concern a module)::

    inputs.py    the marts read, the model inputs and their content hashes
    cache.py     the vector cache (vectors by content hash, one folder per model) and the model's facts
    shards.py    plan_shards, embed_shard: each shard's new texts read, spilled, encoded and staged
    encoding.py  texts longest first, checkpointed slices, the reader and writer threads
    compare.py   which rows the LanceDB tables lack (source hashes against the tables'), the sync's position
    rows.py      the LanceDB rows built from mart rows and vectors, the model stamped in a table's schema
    sync.py      sync_lancedb, sync_table: the changed rows merged, the removed ones deleted, or a table built whole
    repair.py    a table's health check, and its removal when damaged (rebuilt by the sync)
    indexes.py   BM25, B-tree and ANN indexes, and their nightly delta maintenance
    run.py       merge_embeddings and run_embed, the step's entry points, and its run_log row
"""

from pipeline.steps.embed.cache import VectorCache, _cache_key, model_facts
from pipeline.steps.embed.compare import db_of, mark_synced
from pipeline.steps.embed.encoding import (StagingWriter, encode_checkpointed, encode_in_length_order, length_order,
                                           prefetch)
from pipeline.steps.embed.indexes import ensure_indexes, index_deltas, index_state
from pipeline.steps.embed.inputs import (_open_read, figure_inputs, input_hash, passage_inputs, read_figures,
                                         read_paper_meta, read_passages)
from pipeline.steps.embed.repair import repair_table
from pipeline.steps.embed.rows import (build_chunks_table, build_figures_table, build_papers_table, table_model,
                                       table_names)
from pipeline.steps.embed.run import merge_embeddings, record_embed_run, run_embed
from pipeline.steps.embed.shards import SORT_WINDOW_CHECKPOINTS, _shard_blocks, _shard_work, embed_shard, plan_shards
from pipeline.steps.embed.sync import sync_lancedb, sync_table

__all__ = ["SORT_WINDOW_CHECKPOINTS", "StagingWriter", "VectorCache", "_cache_key", "_open_read", "_shard_blocks",
           "_shard_work", "build_chunks_table", "build_figures_table", "build_papers_table", "db_of", "embed_shard",
           "encode_checkpointed", "encode_in_length_order", "ensure_indexes", "figure_inputs", "index_deltas",
           "index_state", "input_hash", "length_order", "mark_synced", "merge_embeddings", "model_facts",
           "passage_inputs", "plan_shards", "prefetch", "read_figures", "read_paper_meta", "read_passages",
           "record_embed_run", "repair_table", "run_embed", "sync_lancedb", "sync_table", "table_model",
           "table_names"]

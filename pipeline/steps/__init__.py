"""The pipeline steps, in the order a nightly refresh runs them (refresh.STEP_ORDER):

harvest -> enrich (enrich_datasets for the S2 bulk path) -> fulltext -> graph -> embed -> publish

Each module holds one step: what it reads, what it writes, and the entry points the DAG and the CLI call. The big
ones are packages split by concern (embed, graph, harvest, and catalog: the publish's catalog writer), each
``__init__`` naming its modules and re-exporting the entry points."""

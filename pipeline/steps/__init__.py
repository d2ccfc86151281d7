"""The pipeline steps, in the order a nightly refresh runs them (refresh.STEP_ORDER):

harvest -> enrich (enrich_datasets for the S2 bulk path) -> fulltext -> graph -> embed -> publish

Each module holds one step: what it reads, what it writes, and the entry points the DAG and the CLI call."""

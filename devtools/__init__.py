"""The development harness, outside the runtime package (not in the wheel): a local server replaying the
recorded arXiv / Semantic Scholar answers (replay_server) and a local Airflow run of the nightly DAG (airflow_local)."""

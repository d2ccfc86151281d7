"""The development harness, outside the runtime package (not in the wheel): a local Airflow run of the nightly
DAG (airflow_local) and the old import path of the replay server for the recorded data (replay_server, now
``pipeline.replay_server``: ``paperkb replay-server``)."""

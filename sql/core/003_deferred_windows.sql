-- deferred_windows: harvest windows of Airflow runs that left their work to a later run of the DAG
-- already queued (a backfill: every day but the last defers). The next run that goes through
-- harvests its own window plus these (one OAI-PMH list per contiguous range) and deletes them.
--   from_date, until_date  the deferred OAI-PMH window, inclusive days
--   dag_run_id             the Airflow run that deferred it (the last one, if deferred twice)
--   deferred_at            when it was deferred
CREATE TABLE IF NOT EXISTS deferred_windows (
    from_date    DATE NOT NULL,
    until_date   DATE NOT NULL,
    dag_run_id   VARCHAR,
    deferred_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (from_date, until_date)
);

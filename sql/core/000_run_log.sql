-- Operational tables shared by every step.
-- run_log: one row per step run (status ok/failed, counts in/out/rejected as JSON).
CREATE TABLE IF NOT EXISTS run_log (
    run_id          VARCHAR PRIMARY KEY,
    step            VARCHAR NOT NULL,
    started_at      TIMESTAMPTZ NOT NULL,
    finished_at     TIMESTAMPTZ,
    status          VARCHAR NOT NULL,   -- ok | failed
    counts          JSON,
    message         VARCHAR,
    interval_start  VARCHAR,
    interval_end    VARCHAR
);

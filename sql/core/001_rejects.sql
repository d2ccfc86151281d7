-- rejects: every record or file that could not be used, with the raw file it came from and why.
CREATE TABLE IF NOT EXISTS rejects (
    reject_id   VARCHAR PRIMARY KEY,
    run_id      VARCHAR,
    step        VARCHAR NOT NULL,
    raw_path    VARCHAR,
    record_key  VARCHAR,
    reason      VARCHAR NOT NULL,
    detail      VARCHAR,
    created_at  TIMESTAMPTZ NOT NULL
);

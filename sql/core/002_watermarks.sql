-- watermarks: how far each source has been harvested; moves only when a step succeeds.
CREATE TABLE IF NOT EXISTS watermarks (
    source      VARCHAR PRIMARY KEY,
    value       VARCHAR NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    run_id      VARCHAR
);

-- harvest_checkpoints: progress of each OAI-PMH ListRecords list, saved after every page, so a killed
-- harvest resumes with the next page instead of starting over (grain: harvest_id = one list).
--   status            listing (pages still to fetch) | fetched (all pages in the raw zone, not merged yet)
--                     | merged (loaded into the tables) | restarted (arXiv refused the token; a new list began)
--   resumption_token  the token that asks for the next page ('' or NULL when the list is complete)
--   pages_done        pages fetched and stored so far; raw_dir holds page-00001.xml ... page-NNNNN.xml
--   response_date     responseDate of the first page: the next harvest's `from` once this one succeeds
--   complete_list_size  arXiv's estimate of the records in the list (from the first token)
CREATE TABLE IF NOT EXISTS harvest_checkpoints (
    harvest_id          VARCHAR PRIMARY KEY,
    oai_set             VARCHAR,
    metadata_prefix     VARCHAR NOT NULL,
    from_date           VARCHAR,
    until_date          VARCHAR,
    status              VARCHAR NOT NULL,
    resumption_token    VARCHAR,
    pages_done          INTEGER NOT NULL DEFAULT 0,
    records_seen        INTEGER NOT NULL DEFAULT 0,
    complete_list_size  INTEGER,
    response_date       VARCHAR,
    raw_dir             VARCHAR NOT NULL,
    run_id              VARCHAR,
    started_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL
);

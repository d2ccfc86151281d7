-- interests: what a user follows (grain: name). After each publish paperkb writes, for every interest,
-- the papers new in that snapshot that match it as feeds (Atom, JSON Feed, Markdown, HTML) into the
-- snapshot's feeds/ folder (pipeline/feeds/write.py). Written by `paperkb interests add|remove`.
--   name        the feed's name: letters, digits, '.', '_', '-' (it names the feed files and URLs)
--   kind        'query' (a saved search) or 'seeds' (papers like these)
--   query       the saved query text (kind 'query')
--   filters     the saved search filters as JSON: {year_from, year_to, categories, authors}
--   seeds       the seed papers' ids (kind 'seeds')
--   threshold   similarity a new paper needs to match; NULL = the feed_*_threshold setting
--   source      where the interest came from: 'cli', or the library file the seeds were matched from
--   unmatched   library entries that matched no paper when the interest was added (JSON list)
--   created_at  when it was added (or last replaced)
CREATE TABLE IF NOT EXISTS interests (
    name        VARCHAR PRIMARY KEY,
    kind        VARCHAR NOT NULL CHECK (kind IN ('query', 'seeds')),
    query       VARCHAR,
    filters     VARCHAR,
    seeds       VARCHAR[],
    threshold   DOUBLE,
    source      VARCHAR NOT NULL,
    unmatched   VARCHAR,
    created_at  TIMESTAMPTZ NOT NULL
);

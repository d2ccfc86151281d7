-- s2_pending(cutoff): the papers `paperkb enrich` should ask Semantic Scholar about, with the id to ask
-- for (the preferred one in s2_paper_lookup): never enriched, or enriched before `cutoff` (stale
-- counts), skipping ids S2 said it does not know since `cutoff`. Never-enriched first.
-- A table macro, as the cutoff is a parameter: SELECT * FROM s2_pending(TIMESTAMPTZ '...') LIMIT n.
CREATE OR REPLACE MACRO s2_pending(cutoff) AS TABLE
WITH best AS (
    SELECT paper_id, lookup_id
    FROM s2_paper_lookup
    QUALIFY row_number() OVER (PARTITION BY paper_id ORDER BY pref) = 1
)
SELECT b.paper_id, b.lookup_id
FROM best b
JOIN papers p USING (paper_id)
WHERE (p.s2_enriched_at IS NULL OR p.s2_enriched_at < cutoff)
  AND NOT EXISTS (SELECT 1 FROM s2_unresolved u WHERE u.lookup_id = b.lookup_id AND u.checked_at >= cutoff)
ORDER BY p.s2_enriched_at NULLS FIRST, b.paper_id;

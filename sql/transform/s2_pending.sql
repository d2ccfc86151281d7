-- Papers `paperkb enrich` should ask Semantic Scholar about: never enriched, or enriched before
-- $cutoff (stale counts), skipping ids S2 said it does not know since $cutoff. Never-enriched first.
-- Parameters: $cutoff (TIMESTAMPTZ), $limit (BIGINT, NULL = all).
WITH best AS (
    SELECT paper_id, lookup_id
    FROM s2_paper_lookup
    QUALIFY row_number() OVER (PARTITION BY paper_id ORDER BY pref) = 1
)
SELECT b.paper_id, b.lookup_id
FROM best b
JOIN papers p USING (paper_id)
WHERE (p.s2_enriched_at IS NULL OR p.s2_enriched_at < $cutoff)
  AND NOT EXISTS (SELECT 1 FROM s2_unresolved u WHERE u.lookup_id = b.lookup_id AND u.checked_at >= $cutoff)
ORDER BY p.s2_enriched_at NULLS FIRST, b.paper_id
LIMIT $limit;

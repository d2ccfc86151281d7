-- feed_deliveries: digests mailed by `paperkb feeds send` / the DAG's feeds task (grain: snapshot_id,
-- recipient), so a retried task never mails the same snapshot's digest twice. Operational: not copied
-- into snapshots.
--   snapshot_id  the snapshot whose feeds were mailed
--   recipient    one address of the feed_mail_to setting
--   feeds        feed names with new papers in that digest
--   papers       new papers listed over all those feeds
--   sent_at      when the SMTP server accepted the message
CREATE TABLE IF NOT EXISTS feed_deliveries (
    snapshot_id  VARCHAR NOT NULL,
    recipient    VARCHAR NOT NULL,
    feeds        VARCHAR[] NOT NULL,
    papers       INTEGER NOT NULL,
    sent_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (snapshot_id, recipient)
);

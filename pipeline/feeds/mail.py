"""Mail a snapshot's feeds as one digest (SMTP, standard library), at most once per snapshot and recipient.

The DAG's ``feeds`` task (after ``publish``) and ``paperkb feeds send`` call :func:`deliver`. Nothing is
sent when no SMTP server is configured (``feed_smtp_host``), when there are no recipients, or when no feed
of the snapshot lists a new paper. Each recipient that received a snapshot's digest is recorded in the
warehouse table ``feed_deliveries``, so a retried task does not mail it twice.
"""

from __future__ import annotations

import logging
import smtplib
from datetime import datetime, timezone
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from pipeline.feeds import write as feeds_mod
from pipeline import snapshots
from pipeline import writer_lock
from pipeline.errors import UserError
from pipeline.settings import Settings
from pipeline.warehouse import scalar

log = logging.getLogger(__name__)


def digest(snapshot_path: Path, index: dict, settings: Settings) -> EmailMessage | None:
    """The digest of the feeds that list papers (Markdown text + HTML alternative), or None when none does."""
    names = [n for n, f in index.get("feeds", {}).items()  # a feed whose digest failed is left out
             if f.get("items") and {"md", "html"} <= set(f.get("files", ("md", "html")))]
    if not names:
        return None
    folder = Path(snapshot_path) / feeds_mod.FEEDS_DIR
    papers = sum(index["feeds"][n]["items"] for n in names)
    msg = EmailMessage()
    msg["Subject"] = f"paperkb: {papers} new paper(s) in {len(names)} feed(s) (snapshot {index.get('snapshot_id')})"
    msg["From"] = settings.feed_mail_from
    msg.set_content("\n\n".join((folder / f"{n}.md").read_text(encoding="utf-8") for n in names))
    bodies = [(folder / f"{n}.html").read_text(encoding="utf-8") for n in names]
    inner = "\n<hr>\n".join(b.split("<body>", 1)[-1].rsplit("</body>", 1)[0] for b in bodies)
    msg.add_alternative(f'<!doctype html><html lang="en"><head><meta charset="utf-8"></head><body>{inner}</body></html>',
                        subtype="html")
    return msg


def _delivered(settings: Settings, snapshot_id: str) -> set[str]:
    import duckdb

    if not settings.db_path.is_file():
        return set()
    con = duckdb.connect(str(settings.db_path), read_only=True)
    try:
        if not scalar(con, "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'feed_deliveries'"):
            return set()
        return {r[0] for r in con.execute("SELECT recipient FROM feed_deliveries WHERE snapshot_id = ?", [snapshot_id]).fetchall()}
    finally:
        con.close()


def send(msg: EmailMessage, recipients: list[str], settings: Settings) -> None:
    host = settings.feed_smtp_host
    if not host:
        raise UserError("mail is not configured: set PAPERKB_FEED_SMTP_HOST")
    try:
        with smtplib.SMTP(host, settings.feed_smtp_port, timeout=30) as smtp:
            if settings.feed_smtp_starttls:
                smtp.starttls()
            if settings.feed_smtp_user:
                smtp.login(settings.feed_smtp_user, settings.feed_smtp_password or "")
            smtp.send_message(msg, to_addrs=recipients)
    except (OSError, smtplib.SMTPException) as exc:
        raise UserError(f"could not mail the feed digest through {host}:{settings.feed_smtp_port}: "
                        f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__} (settings PAPERKB_FEED_SMTP_*)") from exc


@writer_lock.writes("feeds")  # it reads, then records, the deliveries in the warehouse
def deliver(settings: Settings, snapshot_id: str | None = None) -> dict:
    """Mail the digest of ``snapshot_id`` (default CURRENT) to the recipients that have not had it yet.
    Returns ``{snapshot_id, feeds: {name: matched}, sent_to: [...], skipped: reason or None}``."""
    path = snapshots.resolve(settings.snapshots_dir, snapshot_id)
    index = feeds_mod.read_index(path)
    sid = index.get("snapshot_id") or path.name
    out: dict[str, Any] = {"snapshot_id": sid, "feeds": {n: f.get("matched", 0) for n, f in index.get("feeds", {}).items()},
           "sent_to": [], "skipped": None}
    msg = digest(path, index, settings)
    if msg is None:
        out["skipped"] = "no feed of this snapshot lists a new paper" if index else "no interests (see `paperkb interests add`)"
    elif not settings.feed_smtp_host:
        out["skipped"] = "mail is not configured (PAPERKB_FEED_SMTP_HOST)"
    elif not settings.feed_mail_to:
        out["skipped"] = "no recipients (PAPERKB_FEED_MAIL_TO)"
    if msg is None or out["skipped"]:
        log.info("feeds of snapshot %s not mailed: %s", sid, out["skipped"])
        return out
    done = _delivered(settings, sid)
    todo = [r for r in settings.feed_mail_to if r not in done]
    if not todo:
        out["skipped"] = "already mailed to every recipient"
        return out
    msg["To"] = ", ".join(todo)
    send(msg, todo, settings)
    _record(settings, sid, todo, [n for n, f in index["feeds"].items() if f.get("items")],
            sum(f.get("items", 0) for f in index["feeds"].values()))
    out["sent_to"] = todo
    log.info("mailed the feeds of snapshot %s to %s", sid, ", ".join(todo))
    return out


@writer_lock.writes("feeds")
def _record(settings: Settings, snapshot_id: str, recipients: list[str], names: list[str], papers: int) -> None:
    from pipeline.warehouse import Warehouse

    now = datetime.now(timezone.utc)
    with Warehouse(settings) as wh:
        wh.init()
        for r in recipients:
            wh.con.execute("INSERT OR REPLACE INTO feed_deliveries VALUES (?, ?, ?, ?, ?)", [snapshot_id, r, names, papers, now])

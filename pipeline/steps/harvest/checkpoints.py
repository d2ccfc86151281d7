"""The checkpoint of an OAI-PMH list being fetched (table ``harvest_checkpoints``): the request, the resumption token
and the pages stored so far, so that a killed harvest resumes with the next page."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from pipeline.settings import Settings
from pipeline.warehouse import Warehouse


@dataclass
class Checkpoint:
    harvest_id: str
    oai_set: str | None
    metadata_prefix: str
    from_date: str | None
    until_date: str | None
    status: str = "listing"
    resumption_token: str | None = None
    pages_done: int = 0
    records_seen: int = 0
    complete_list_size: int | None = None
    response_date: str | None = None
    raw_dir: str = ""
    run_id: str | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))

    def page_relpath(self, n: int) -> str:
        """Path under raw/arxiv/ of page n of this list."""
        return f"{self.raw_dir}/page-{n:05d}.xml"

    def save(self, wh: Warehouse) -> None:
        wh.con.execute(
            "INSERT OR REPLACE INTO harvest_checkpoints (harvest_id, oai_set, metadata_prefix, from_date, until_date, "
            "status, resumption_token, pages_done, records_seen, complete_list_size, response_date, raw_dir, run_id, "
            "started_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [self.harvest_id, self.oai_set, self.metadata_prefix, self.from_date, self.until_date, self.status,
             self.resumption_token, self.pages_done, self.records_seen, self.complete_list_size, self.response_date,
             self.raw_dir, self.run_id, self.started_at, datetime.now(timezone.utc)],
        )

    @classmethod
    def new(cls, settings: Settings, from_date: str | None, until_date: str | None, run_id: str) -> "Checkpoint":
        now = datetime.now(timezone.utc)
        hid = f"{now:%Y%m%dT%H%M%S%f}Z_{from_date or 'start'}_{until_date or 'open'}"
        return cls(harvest_id=hid, oai_set=settings.oai_set or None, metadata_prefix=settings.oai_metadata_prefix,
                   from_date=from_date, until_date=until_date, raw_dir=f"oai/{hid}", run_id=run_id, started_at=now)

    @classmethod
    def open_for(cls, wh: Warehouse, settings: Settings, from_date: str | None, until_date: str | None) -> "Checkpoint | None":
        """The unfinished list of an earlier run with the same request, if any."""
        row = wh.con.execute(
            "SELECT harvest_id, oai_set, metadata_prefix, from_date, until_date, status, resumption_token, pages_done, "
            "records_seen, complete_list_size, response_date, raw_dir, run_id, epoch_us(started_at) FROM harvest_checkpoints "
            "WHERE status IN ('listing', 'fetched') AND oai_set IS NOT DISTINCT FROM ? AND metadata_prefix = ? "
            "AND from_date IS NOT DISTINCT FROM ? AND until_date IS NOT DISTINCT FROM ? "
            "ORDER BY started_at DESC LIMIT 1",
            [settings.oai_set or None, settings.oai_metadata_prefix, from_date, until_date],
        ).fetchone()
        if not row:
            return None
        # TIMESTAMPTZ read as epoch microseconds (a plain UTC datetime, whatever the session time zone)
        return cls(*row[:-1], started_at=datetime.fromtimestamp(row[-1] / 1e6, tz=timezone.utc))  # type: ignore[misc]

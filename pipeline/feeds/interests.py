"""Interests: what a user follows, saved in the warehouse (table ``interests``).

An interest is either a named saved search (``kind='query'``: query text plus filters) or a named seed
set (``kind='seeds'``: paper ids, typed or matched from a reference-manager library). After each publish
:mod:`pipeline.feeds.write` lists, per interest, the papers new in that snapshot that match it.

    add_interest(settings, "attention", query="attention for machine translation", filters=Filters(categories=["cs.CL"]))
    add_interest(settings, "my-library", library=Path("library.bib"))  # seeds matched by DOI, arXiv id, title
    list_interests(settings); remove_interest(settings, "attention")

Interests live in the warehouse (the pipeline's writer lock applies: a running refresh makes ``add``
wait its turn or refuse, like every writer); ``publish`` copies the table into each snapshot's catalog,
so a snapshot records which interests its feeds were computed for.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from pipeline import catalog_changes, writer_lock
from pipeline.errors import UserError
from pipeline.query.filters import Filters
from pipeline.settings import Settings
from pipeline.warehouse import scalar

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # the whole name (re.fullmatch: no trailing newline)
# a feed's files are <name>.atom|.json|.md|.html beside the folder's index.json: 'index' would overwrite it
# (compared in lower case: on a case-insensitive file system 'Index.json' is the same file)
RESERVED = frozenset({"index"})
MAX_SEEDS = 200


@dataclass
class Interest:
    name: str
    kind: str  # 'query' | 'seeds'
    query: str | None = None
    filters: dict = field(default_factory=dict)
    seeds: list[str] = field(default_factory=list)
    threshold: float | None = None  # None: the feed_query_threshold / feed_seed_threshold setting
    source: str = "cli"
    unmatched: list[dict] = field(default_factory=list)  # library entries that matched nothing
    created_at: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        if self.kind == "query":
            f = Filters(**self.filters) if self.filters else Filters()
            extra = "".join(f"; {k} {v}" for k, v in f.to_dict().items() if v not in (None, []))
            return f"query {self.query!r}{extra}"
        src = f" from {Path(self.source).name}" if self.source != "cli" else ""
        return f"{len(self.seeds)} seed paper(s){src}: {', '.join(self.seeds[:5])}" + (", ..." if len(self.seeds) > 5 else "")


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise UserError(f"interest name {name!r}: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    if name.lower() in RESERVED:
        raise UserError(f"interest name {name!r} is reserved (the feeds folder's own {name.lower()}.json): choose another")
    return name


def _check_threshold(threshold: float | None) -> float | None:
    if threshold is None:
        return None
    if not -1.0 <= float(threshold) <= 1.0:
        raise UserError(f"--threshold is a cosine similarity between -1 and 1, got {threshold}")
    return float(threshold)


def from_row(row: dict) -> Interest:
    return Interest(name=row["name"], kind=row["kind"], query=row.get("query"),
                    filters=json.loads(row["filters"]) if row.get("filters") else {},
                    seeds=list(row.get("seeds") or []), threshold=row.get("threshold"), source=row.get("source") or "cli",
                    unmatched=json.loads(row["unmatched"]) if row.get("unmatched") else [],
                    created_at=str(row["created_at"]) if row.get("created_at") is not None else None)


def read_interests(con) -> list[Interest]:
    """Every interest in the catalog or warehouse on ``con``, by name (none when the table is absent)."""
    if not scalar(con, "SELECT count(*) FROM information_schema.tables WHERE table_name = 'interests'"):  # a table, or a view in a snapshot's catalog
        return []  # a snapshot published before interests existed
    cur = con.execute("SELECT * FROM interests ORDER BY name")
    cols = [d[0] for d in cur.description]
    return [from_row(dict(zip(cols, r))) for r in cur.fetchall()]


def list_interests(settings: Settings) -> list[Interest]:
    import duckdb

    if not settings.db_path.is_file():
        return []
    con = duckdb.connect(str(settings.db_path), read_only=True)
    try:
        return read_interests(con)
    finally:
        con.close()


def _resolve_seeds(con, ids: list[str]) -> tuple[list[str], list[str]]:
    """(paper ids found in the warehouse, ids not found): a paper id, an arXiv id in any spelling (version
    dropped), or an external id that names one paper."""
    from pipeline.sources.arxiv.ids import normalize_arxiv_id

    found, missing = [], []
    for raw in ids:
        pid = raw.strip()
        if not pid:
            continue
        try:
            arxiv = normalize_arxiv_id(pid)
        except ValueError:
            arxiv = pid
        rows = con.execute("SELECT DISTINCT paper_id FROM papers WHERE paper_id IN (?, ?) OR external_id = ?",
                           [pid, arxiv, pid]).fetchall()
        if len(rows) != 1:
            missing.append(pid)
        elif rows[0][0] not in found:
            found.append(rows[0][0])
    return found, missing


@writer_lock.writes("interests")
def add_interest(settings: Settings, name: str, *, query: str | None = None, filters: Filters | None = None,
                 seeds: list[str] | None = None, library: Path | None = None, library_format: str | None = None,
                 threshold: float | None = None, replace: bool = False) -> Interest:
    """Save an interest: exactly one of ``query``, ``seeds`` or ``library`` (a .bib/.ris/CSL-JSON file whose
    entries are matched to the warehouse's papers; unmatched entries are kept on the interest and reported)."""
    from pipeline.library.match import match_library
    from pipeline.query.search import validate_query
    from pipeline.warehouse import Warehouse

    check_name(name)
    given = [x for x in (query, seeds, library) if x]
    if len(given) != 1:
        raise UserError("give exactly one of --query, --seed or --from")
    threshold = _check_threshold(threshold)
    with Warehouse(settings) as wh:
        wh.init()
        exists = scalar(wh.con, "SELECT count(*) FROM interests WHERE name = ?", [name])
        if exists and not replace:
            raise UserError(f"interest {name!r} exists: remove it first or add it again with --replace")
        now = datetime.now(timezone.utc)
        if query:
            f = (filters or Filters()).validated()
            it = Interest(name=name, kind="query", query=validate_query(query, settings.query_max_chars),
                          filters=f.to_dict() if f.active else {}, threshold=threshold)
        else:
            if filters is not None and filters.active:
                raise UserError("filters (--year-from, --category, ...) apply to a query interest, not to seeds")
            if library:
                if not Path(library).is_file():
                    raise UserError(f"no library file at {library}")
                report = match_library(wh.con, Path(library), library_format)
                found, source = report.paper_ids, str(Path(library).resolve())
                unmatched = [{"index": u.entry.index, "key": u.entry.key, "title": u.entry.title, "reason": u.reason}
                             for u in report.unmatched]
                if not found:
                    raise UserError(f"no entry of {Path(library).name} matches a paper in the warehouse "
                                    f"({report.entries} entries, {len(unmatched)} unmatched)")
            else:
                found, missing = _resolve_seeds(wh.con, list(seeds or []))
                if missing:
                    raise UserError(f"no paper {missing[0]!r} in the warehouse" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
                source, unmatched = "cli", []
            if len(found) > MAX_SEEDS:
                raise UserError(f"{len(found)} seed papers; the limit is {MAX_SEEDS}")
            it = Interest(name=name, kind="seeds", seeds=found, threshold=threshold, source=source, unmatched=unmatched)
        it.created_at = now.isoformat()
        with wh.transaction():
            wh.con.execute("DELETE FROM interests WHERE name = ?", [name])
            catalog_changes.record(wh.con, "interests", [name])
            wh.con.execute(
                "INSERT INTO interests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [it.name, it.kind, it.query, json.dumps(it.filters) if it.filters else None, it.seeds or None,
                 it.threshold, it.source, json.dumps(it.unmatched) if it.unmatched else None, now])
    return it


@writer_lock.writes("interests")
def remove_interest(settings: Settings, name: str) -> None:
    from pipeline.warehouse import Warehouse

    # no check_name: an interest saved before the name rules (a reserved name) can still be removed
    if not settings.db_path.is_file():
        raise UserError(f"no interest {name!r}: there is no warehouse at {settings.db_path}")
    with Warehouse(settings) as wh:
        wh.init()
        if not scalar(wh.con, "SELECT count(*) FROM interests WHERE name = ?", [name]):
            raise UserError(f"no interest {name!r} (see `paperkb interests list`)")
        with wh.transaction():
            catalog_changes.returning(wh.con, "interests", "DELETE FROM interests WHERE name = ? RETURNING name", [name])

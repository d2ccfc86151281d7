"""Feeds: for every interest, the papers new in a snapshot that match it.

``publish`` calls :func:`write_feeds` on the snapshot it is building, before the manifest is written,
so the feeds are part of the immutable snapshot (checksummed like every file)::

    snapshots/<id>/feeds/index.json          {interest: {kind, threshold, items, ...}} + the previous snapshot
    snapshots/<id>/feeds/<name>.atom         Atom 1.0
    snapshots/<id>/feeds/<name>.json         JSON Feed 1.1
    snapshots/<id>/feeds/<name>.md|.html     a short digest

*New* means: a paper in this snapshot's catalog that the previous snapshot (the one CURRENT when this one
was published) did not hold. The first snapshot has no previous one: its feeds are empty baselines.

*Matches* (thresholds are cosine similarities of the snapshot's embedding model, documented in docs/feeds.md):

- a saved query: the new paper passes the interest's filters and the query's vector is at least the
  threshold (``feed_query_threshold``, default 0.50) from the paper's abstract or any of its passages
  (reference lists left out: cited titles say what a paper cites, not what it is about);
  the best passage is shown;
- a seed set: the paper's vector is at least the threshold (``feed_seed_threshold``, default 0.75) from a
  seed's, or it cites or is cited by a seed. The reason names the seed.

Items are ordered by similarity, best first, and at most ``feed_max_items`` are listed (the index records
how many matched).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import numpy as np

from pipeline.errors import UserError
from pipeline.feeds.feed import Feed, FeedItem
from pipeline.feeds.interests import Interest, read_interests
from pipeline.vectors import l2_normalise

log = logging.getLogger(__name__)

FEEDS_DIR = "feeds"
INDEX = "index.json"
# file suffix -> (format name, media type)
FORMATS = {
    "atom": (".atom", "application/atom+xml; charset=utf-8"),
    "json": (".json", "application/feed+json; charset=utf-8"),
    "md": (".md", "text/markdown; charset=utf-8"),
    "html": (".html", "text/html; charset=utf-8"),
}
_IN_BATCH = 500  # paper ids per LanceDB where-clause
_REFERENCES = re.compile(r"^\s*([0-9A-Z]{1,3}\.?\s+)?(references|bibliography|literature cited|works cited)\s*$", re.IGNORECASE)


# ---- new papers -------------------------------------------------------------------------------------
def new_paper_ids(con, previous: Path | None) -> list[str]:
    """Paper ids in the catalog on ``con`` that the ``previous`` snapshot folder's catalog does not hold (sorted).
    (Its catalog is opened on its own: its views' relative paths resolve inside its own folder.)"""
    if previous is None:
        return []
    from pipeline.snapshots import open_catalog

    prev = open_catalog(previous)
    try:
        before = prev.sql("SELECT DISTINCT paper_id FROM papers").to_arrow_table()
    finally:
        prev.close()
    con.register("_prev_papers", before)
    try:
        return [r[0] for r in con.execute(
            "SELECT paper_id FROM papers EXCEPT SELECT paper_id FROM _prev_papers ORDER BY 1").fetchall()]
    finally:
        con.unregister("_prev_papers")


# ---- matching -----------------------------------------------------------------------------------------
def paper_vectors(searcher, ids: list[str]) -> np.ndarray:
    """Unit paper vectors: the document vector, else the abstract vector (zero rows when neither)."""
    if not ids:
        return np.zeros((0, searcher.dim), dtype=np.float32)
    dv, av = searcher.paper_vectors(ids)
    return l2_normalise(np.where(np.linalg.norm(dv, axis=1, keepdims=True) > 0, dv, av))


def best_passages(searcher, qv: np.ndarray, ids: list[str]) -> dict[str, tuple[float, str, int | None]]:
    """paper id -> (cosine, text, page) of its passage nearest the unit query vector ``qv``."""
    from pipeline.query.filters import in_clause
    from pipeline.query.resident import vector_matrix

    out: dict[str, tuple[float, str, int | None]] = {}
    for i in range(0, len(ids), _IN_BATCH):
        where = in_clause("paper_id", ids[i:i + _IN_BATCH])
        n = searcher.chunks.count_rows(where)
        if not n:
            continue
        t = (searcher.chunks.search(qv.astype(np.float32), vector_column_name="vector").where(where, prefilter=True)
             .select(["paper_id", "section", "text", "page_start", "vector", "_distance"]).limit(n).to_arrow())
        sims = l2_normalise(vector_matrix(t["vector"], searcher.dim)) @ qv
        for pid, section, text, page, s in zip(t["paper_id"].to_pylist(), t["section"].to_pylist(), t["text"].to_pylist(),
                                               t["page_start"].to_pylist(), sims):
            if section and _REFERENCES.match(section):  # cited titles say what the paper cites, not what it is about
                continue
            if pid not in out or s > out[pid][0]:
                out[pid] = (float(s), text or "", page)
    return out


def match_query(searcher, interest: Interest, new_ids: list[str], threshold: float) -> list[tuple[str, float, str, dict]]:
    """(paper id, similarity, why, extra) for the new papers that match a saved query."""
    from pipeline.query.filters import Filters, mask

    f = Filters(**interest.filters).validated() if interest.filters else Filters()
    ids = [p for p in new_ids if p in searcher.paper_row]
    if f.active and ids:
        ok = mask(searcher.meta, f).to_pylist()
        ids = [p for p in ids if ok[searcher.paper_row[p]]]
    if not ids:
        return []
    qv = l2_normalise(searcher.encode([interest.query]))[0]
    abstract = dict(zip(ids, paper_vectors(searcher, ids) @ qv))
    passages = best_passages(searcher, qv, ids)
    out = []
    for pid in ids:
        a = float(abstract[pid])
        s, text, page = passages.get(pid, (-1.0, None, None))
        best = max(a, s)
        if best < threshold:
            continue
        if s >= a:
            why = f"passage{f' (p. {page})' if page else ''} at similarity {s:.2f} to the query"
            out.append((pid, best, why, {"passage": text, "page": page}))
        else:
            out.append((pid, best, f"abstract at similarity {a:.2f} to the query", {}))
    return out


def match_seeds(searcher, con, interest: Interest, new_ids: list[str], threshold: float) -> tuple[list[tuple[str, float, str, dict]], list[str]]:
    """(matches, notes) for a seed set: nearest seed by vector, or a direct citation either way."""
    from pipeline.query.recommend import shared_evidence

    seeds = [s for s in interest.seeds if s in searcher.paper_row]
    notes = []
    gone = [s for s in interest.seeds if s not in searcher.paper_row]
    if gone:
        notes.append(f"{len(gone)} seed paper(s) not in this snapshot: {', '.join(gone[:5])}")
    ids = [p for p in new_ids if p in searcher.paper_row and p not in set(seeds)]
    if not seeds or not ids:
        return [], notes
    sims = paper_vectors(searcher, ids) @ paper_vectors(searcher, seeds).T  # (new, seeds)
    evidence = shared_evidence(con, [(p, s) for p in ids for s in seeds])
    out = []
    for i, pid in enumerate(ids):
        j = int(np.argmax(sims[i]))
        best = float(sims[i, j])
        cites = [s for s in seeds if evidence.get((pid, s), {}).get("cites")]
        cited_by = [s for s in seeds if evidence.get((pid, s), {}).get("cited_by")]
        if best < threshold and not cites and not cited_by:
            continue
        reasons = []
        if best >= threshold:
            reasons.append(f"similar to seed {seeds[j]} ({best:.2f})")
        reasons += [f"cites seed {s}" for s in cites] + [f"cited by seed {s}" for s in cited_by]
        shared = sum(len(evidence.get((pid, s), {}).get("references", [])) for s in seeds)
        if shared:
            reasons.append(f"shares {shared} reference(s) with the seeds")
        seed = seeds[j] if best >= threshold else (cites + cited_by)[0]
        out.append((pid, best, "; ".join(reasons), {"seed": seed}))
    return out, notes


def build_feed(searcher, con, interest: Interest, new_ids: list[str], *, snapshot_id: str, created_at: str,
               previous: str | None, settings) -> Feed:
    """One interest's feed over ``new_ids`` of the snapshot opened by ``searcher`` (catalog on ``con``)."""
    from pipeline.exports import record_url
    from pipeline.query.records import bib_records

    threshold = interest.threshold if interest.threshold is not None else (
        settings.feed_query_threshold if interest.kind == "query" else settings.feed_seed_threshold)
    feed = Feed(name=interest.name, kind=interest.kind, description=interest.describe(), threshold=threshold,
                snapshot_id=snapshot_id, created_at=created_at, previous_snapshot_id=previous,
                new_papers=len(new_ids), matched=0)
    if previous is None:
        feed.notes.append("the first snapshot: nothing counts as new yet (feeds list papers new since the previous snapshot)")
        return feed
    if interest.kind == "query":
        matches = match_query(searcher, interest, new_ids, threshold)
    else:
        matches, notes = match_seeds(searcher, con, interest, new_ids, threshold)
        feed.notes.extend(notes)
    matches.sort(key=lambda m: (-m[1], m[0]))
    feed.matched = len(matches)
    kept = matches[: settings.feed_max_items]
    if len(matches) > len(kept):
        feed.notes.append(f"{len(matches)} papers matched; the {len(kept)} most similar are listed (feed_max_items)")
    recs = {r.id: r for r in bib_records(con, [m[0] for m in kept])} if kept else {}
    for pid, sim, why, extra in kept:
        r = recs.get(pid)
        feed.items.append(FeedItem(
            paper_id=pid, title=r.title if r else None, authors=list(r.authors) if r else [], year=r.year if r else None,
            published=r.published if r else None, url=record_url(r) if r else None, abstract=r.abstract if r else None,
            similarity=round(sim, 4), why=why, **extra))
    return feed


# ---- the snapshot's feeds/ folder -------------------------------------------------------------------
def _write_feed(out: Path, searcher, con, it: Interest, new_ids: list[str], manifest: dict, previous_id: str | None,
                settings) -> dict:
    """Compute and write one interest's feed files; its index entry. Nothing here raises: a feed that
    cannot be computed or written is recorded under ``failed`` (``{step or format: reason}``) and the
    publish goes on (the manifest's ``feeds_failed`` names it)."""
    from pipeline.feeds.formats import render
    from pipeline.feeds.interests import check_name

    failed: dict[str, str] = {}
    try:
        check_name(it.name)  # a name saved before the name rules: its files could overwrite another's
    except UserError as exc:
        return {"kind": it.kind, "description": "", "threshold": it.threshold, "matched": 0, "items": 0,
                "notes": [], "files": {}, "failed": {"name": str(exc)}}
    try:
        feed = build_feed(searcher, con, it, new_ids, snapshot_id=manifest["snapshot_id"],
                          created_at=manifest["created_at"], previous=previous_id, settings=settings)
    except Exception as exc:  # noqa: BLE001 - a feed never blocks a publish; a UserError (e.g. a saved query the current limits refuse) is a note
        if not isinstance(exc, UserError):
            failed["compute"] = f"{type(exc).__name__}: {exc}"
        try:
            description = it.describe()
        except Exception:  # noqa: BLE001
            description = it.kind
        feed = Feed(name=it.name, kind=it.kind, description=description, threshold=it.threshold or 0.0,
                    snapshot_id=manifest["snapshot_id"], created_at=manifest["created_at"],
                    previous_snapshot_id=previous_id, new_papers=len(new_ids), matched=0,
                    notes=[f"could not be computed: {exc}"])
    files: dict[str, str] = {}
    for fmt, (suffix, _) in FORMATS.items():
        path = out / f"{it.name}{suffix}"
        try:
            path.write_text(render(fmt, feed, settings), encoding="utf-8")
        except Exception as exc:  # noqa: BLE001 - the other formats, and the other feeds, are still written
            failed[fmt] = f"{type(exc).__name__}: {exc}"
            path.unlink(missing_ok=True)
        else:
            files[fmt] = path.name
    entry = {"kind": feed.kind, "description": feed.description, "threshold": feed.threshold, "matched": feed.matched,
             "items": len(feed.items), "notes": feed.notes, "files": files}
    if failed:
        entry["failed"] = failed
    return entry


def write_feeds(folder: Path, manifest: dict, previous: Path | None, settings) -> dict:
    """Compute every interest's feed for the snapshot being built in ``folder`` (catalog + lancedb +
    ``manifest`` not yet written) against the ``previous`` snapshot folder, and write them under
    ``folder/feeds``. Returns the index (``{}`` and nothing written when there are no interests)."""
    from pipeline.query.search import Searcher
    from pipeline.snapshots import CATALOG, open_catalog
    from pipeline.query.snapshot import Snapshot

    con = open_catalog(folder)
    try:
        interests = read_interests(con)
        if not interests:
            return {}
        prev_catalog = previous if previous is not None and (previous / CATALOG).is_file() else None
        new_ids = new_paper_ids(con, prev_catalog)
        previous_id = previous.name if previous is not None and prev_catalog is not None else None
        searcher = Searcher(Snapshot(path=folder, manifest=manifest), settings)
        out = folder / FEEDS_DIR
        out.mkdir()
        index = {"snapshot_id": manifest["snapshot_id"], "previous_snapshot_id": previous_id, "new_papers": len(new_ids),
                 "feeds": {}}
        try:
            for it in interests:
                entry = _write_feed(out, searcher, con, it, new_ids, manifest, previous_id, settings)
                index["feeds"][it.name] = entry
                if entry.get("failed"):
                    log.warning("feed %s failed: %s", it.name, "; ".join(f"{k}: {v}" for k, v in entry["failed"].items()))
                else:
                    log.info("feed %s: %d of %d new paper(s) match", it.name, entry["matched"], len(new_ids))
        finally:
            searcher.close()
        (out / INDEX).write_text(json.dumps(index, indent=1, ensure_ascii=False), encoding="utf-8")
        return index
    finally:
        con.close()


def read_index(snapshot_path: Path) -> dict:
    """The feeds index of a published snapshot (``{}`` when it has no feeds)."""
    p = Path(snapshot_path) / FEEDS_DIR / INDEX
    return json.loads(p.read_text(encoding="utf-8")) if p.is_file() else {}


def feed_file(snapshot_path: Path, name: str, fmt: str) -> Path:
    """The file of feed ``name`` in ``fmt`` (atom | json | md | html); UserError when there is none."""
    from pipeline.errors import UserError
    from pipeline.feeds.interests import check_name

    if fmt not in FORMATS:
        raise UserError(f"unknown feed format {fmt!r}: choose one of {', '.join(FORMATS)}")
    check_name(name)
    index = read_index(snapshot_path)
    if name not in index.get("feeds", {}):
        known = ", ".join(sorted(index.get("feeds", {}))) or "none"
        raise UserError(f"no feed {name!r} in snapshot {Path(snapshot_path).name} (feeds: {known})")
    entry = index["feeds"][name]
    if fmt not in entry.get("files", FORMATS):
        why = (entry.get("failed") or {}).get(fmt) or next(iter((entry.get("failed") or {}).values()), "not written")
        raise UserError(f"feed {name!r} has no {fmt} file in snapshot {Path(snapshot_path).name}: it failed ({why})")
    return Path(snapshot_path) / FEEDS_DIR / f"{name}{FORMATS[fmt][0]}"


def read_feed(snapshot_path: Path, name: str) -> dict:
    """Feed ``name`` of a published snapshot as its JSON Feed object."""
    return json.loads(feed_file(snapshot_path, name, "json").read_text(encoding="utf-8"))


def item_ids(feed_json: dict) -> list[str]:
    """The paper ids of a JSON Feed written by paperkb, in feed order."""
    return [it["_paperkb"]["paper_id"] for it in feed_json.get("items", [])]

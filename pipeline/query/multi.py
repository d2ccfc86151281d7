"""Several snapshots searched as one ranking (Kiwix's multi-book search).

A :class:`MultiSearcher` holds one :class:`~pipeline.query.search.Searcher` per index (each on its own
pinned snapshot), searches them side by side with the same arguments, makes their scores comparable
(:func:`normalise`), shows a paper that two indexes hold once (:func:`merge`: same paper id -- an arXiv id
or a collection's ``<name>:<docno>`` --, DOI or normalised title) and names each result's index.

Indexes embedded with the same query model share one query encoder: the query is encoded once.

Normalisations (``NORMALISATIONS``; chosen by measurement, BENCHMARKS.md "Several indexes, one ranking"):

- ``raw``: each index's final score as it is. The score is a weighted sum of cosines against one model's
  query vector (comparable across indexes of one model) and of per-query normalised lexical signals;
- ``minmax``: each index's scores of this query mapped to [0, 1] (its best paper gets 1);
- ``zscore``: each index's scores minus their mean, over their standard deviation;
- ``rrf``: reciprocal rank, 1 / (60 + rank) (the ranks alone; indexes interleave).
"""

from __future__ import annotations

import logging
import re
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Sequence

from pipeline.errors import UserError
from pipeline.query.filters import Filters
from pipeline.query.results import Result, SearchResponse

log = logging.getLogger(__name__)

NORMALISATIONS = ("raw", "minmax", "zscore", "rrf")
DEFAULT_NORMALISATION = "raw"
RRF_K = 60
_MIN_TITLE_KEY = 16  # shorter normalised titles ("Introduction", "Editorial") never identify a paper


# ---- pure pieces -------------------------------------------------------------------------------------
def normalise(scores: Sequence[float], method: str = DEFAULT_NORMALISATION) -> list[float]:
    """One index's scores of one query (best first) made comparable with other indexes' (see module doc)."""
    s = [float(x) for x in scores]
    if method == "raw" or not s:
        return s
    if method == "rrf":
        return [1.0 / (RRF_K + r) for r in range(1, len(s) + 1)]
    if method == "minmax":
        lo, hi = min(s), max(s)
        return [1.0 if hi == lo else (x - lo) / (hi - lo) for x in s]
    if method == "zscore":
        mean = sum(s) / len(s)
        sd = (sum((x - mean) ** 2 for x in s) / len(s)) ** 0.5
        return [0.0 if sd == 0 else (x - mean) / sd for x in s]
    raise UserError(f"unknown normalisation {method!r}: choose one of {', '.join(NORMALISATIONS)}")


def title_key(title: str | None) -> str:
    """Lower-case ASCII letters and digits of a title (accents folded); '' when too short to identify a paper."""
    if not title:
        return ""
    t = unicodedata.normalize("NFKD", title)
    t = re.sub(r"[^a-z0-9]", "", "".join(c for c in t if not unicodedata.combining(c)).lower())
    return t if len(t) >= _MIN_TITLE_KEY else ""


def paper_keys(paper_id: str, title: str | None = None, doi: str | None = None) -> set[str]:
    """What identifies a paper across indexes: its paper id (an arXiv id, ``local:<sha256>`` or
    ``<collection>:<docno>``), its DOI and its normalised title."""
    keys = {f"id:{paper_id}"}
    if doi and doi.strip():
        keys.add(f"doi:{doi.strip().lower()}")
    t = title_key(title)
    if t:
        keys.add(f"title:{t}")
    return keys


@dataclass
class IndexAnswer:
    """One index's answer to one query: its name, results (best first) and the DOIs of its papers."""

    index: str
    results: list[Result]
    dois: dict[str, str] | None = None


def merge(answers: Sequence[IndexAnswer], k: int, method: str = DEFAULT_NORMALISATION) -> list[Result]:
    """The ``k`` best results of all indexes by normalised score (ties: index order, then rank), each paper
    once: a result sharing a key (:func:`paper_keys`) with a better one of another index is dropped and
    that index is added to the kept one's ``also_in``. Results are copies with ``index``, ``score`` (the
    normalised one; unless ``raw``, the index's own is in ``signals['index_score']``) and ``rank`` set."""
    pooled: list[tuple[float, int, int, Result]] = []
    for i, a in enumerate(answers):
        for rank, (r, s) in enumerate(zip(a.results, normalise([r.score for r in a.results], method)), start=1):
            pooled.append((s, i, rank, r))
    pooled.sort(key=lambda x: (-x[0], x[1], x[2]))
    out: list[Result] = []
    owner: dict[str, tuple[int, Result]] = {}  # key -> (index position, kept result)
    for s, i, _, r in pooled:
        keys = paper_keys(r.paper_id, r.title, (answers[i].dois or {}).get(r.paper_id))
        dup = next((owner[key] for key in keys if key in owner and owner[key][0] != i), None)
        if dup is not None:
            kept = dup[1]
            if answers[i].index not in (kept.also_in or []) and answers[i].index != kept.index:
                kept.also_in = [*(kept.also_in or []), answers[i].index]
            continue
        if len(out) >= k:
            continue  # still walked: a lower duplicate names its index on a kept result
        signals = r.signals if method == "raw" else {**r.signals, "index_score": float(r.score)}
        kept = replace(r, index=answers[i].index, score=s, signals=signals, rank=len(out) + 1, also_in=None)
        out.append(kept)
        for key in keys:
            owner.setdefault(key, (i, kept))
    return out


def run_docid(r: Result, judged_index: str | None = None) -> str:
    """A result's document id in a TREC run: the external id (a collection's docno, an arXiv id), as qrels
    name documents; a result of an index other than ``judged_index`` (the qrels') gets ``<index>:`` before it,
    so that another collection's docno 12 is not judged as the qrels' docno 12."""
    doc = str(r.external_id or r.paper_id)
    return doc if r.index is None or r.index == judged_index else f"{r.index}:{doc}"


def index_names(specs: Sequence[tuple[str | None, str]]) -> list[str]:
    """Names for indexes given as (name or None, default name): given names kept, defaults made unique
    (``name``, ``name-2``, ...). UserError when two given names are the same."""
    given = [n for n, _ in specs if n]
    if len(set(given)) < len(given):
        raise UserError(f"two indexes are named {sorted(n for n in given if given.count(n) > 1)[0]!r}: name each once")
    taken = set(given)
    out = []
    for name, default in specs:
        if name:
            out.append(name)
            continue
        cand, n = default, 1
        while cand in taken:
            n += 1
            cand = f"{default}-{n}"
        taken.add(cand)
        out.append(cand)
    return out


def split_spec(spec: str) -> tuple[str | None, str]:
    """``NAME=WHERE`` -> (NAME, WHERE); a bare ``WHERE`` (a snapshot folder, a warehouse or an id) -> (None, WHERE)."""
    name, sep, where = spec.partition("=")
    if sep and name and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", name) and where:
        return name, where
    return None, spec


# ---- searching ---------------------------------------------------------------------------------------
def _model_key(searcher) -> tuple | None:
    m = searcher.snap.manifest.get("model") or {}
    if not (m.get("key") or m.get("query_model") or m.get("name")):
        return None
    return (m.get("key"), m.get("query_model") or m.get("name"), m.get("dim"), m.get("truncate_dim"))


def _dois(searcher) -> dict[str, str]:
    """paper_id -> DOI of one snapshot's papers (from its catalog; empty when it has none)."""
    try:
        con = searcher.snap.catalog()
    except UserError:
        return {}
    try:
        rows = con.execute("SELECT paper_id, lower(doi) FROM papers WHERE doi IS NOT NULL AND doi <> ''").fetchall()
    except Exception as exc:  # an older catalog without the column
        log.debug("no DOIs in snapshot %s: %s", searcher.snap.snapshot_id, exc)
        rows = []
    finally:
        con.close()
    return {p: d for p, d in rows}


class MultiSearcher:
    """Search several indexes (``names[i]`` -> ``searchers[i]``) as one: ``search`` takes the arguments of
    :meth:`Searcher.search` and answers the same :class:`SearchResponse`, each result naming its ``index``."""

    def __init__(self, searchers: Sequence[Any], names: Sequence[str], normalisation: str | None = None,
                 parallel: bool = True):
        if not searchers or len(searchers) != len(names):
            raise ValueError("one name per searcher, at least one")
        self.searchers = list(searchers)
        self.names = list(names)
        self.normalisation = normalisation or DEFAULT_NORMALISATION
        if self.normalisation not in NORMALISATIONS:
            raise UserError(f"unknown normalisation {self.normalisation!r}: choose one of {', '.join(NORMALISATIONS)}")
        self.parallel = parallel
        self._pool = ThreadPoolExecutor(max_workers=len(self.searchers), thread_name_prefix="paperkb-multi")
        self._doi_maps: list[dict[str, str] | None] = [None] * len(self.searchers)
        self._encode_s: float | None = None
        # one query encoder per query model: indexes embedded alike encode each query once
        leaders: dict[tuple, Any] = {}
        for s in self.searchers:
            key = _model_key(s)
            if key is None:
                continue
            if key in leaders:
                s.share_encoder(leaders[key])
            else:
                leaders[key] = s

    @property
    def snapshot_ids(self) -> list[str]:
        return [s.snap.snapshot_id for s in self.searchers]

    @property
    def snapshot_id(self) -> str:
        return "+".join(self.snapshot_ids)

    @property
    def settings(self):
        return self.searchers[0].settings

    def indexes(self) -> list[dict[str, str]]:
        return [{"index": n, "snapshot_id": s.snap.snapshot_id} for n, s in zip(self.names, self.searchers)]

    def _dois_of(self, i: int) -> dict[str, str]:
        if self._doi_maps[i] is None:
            self._doi_maps[i] = _dois(self.searchers[i])
        return self._doi_maps[i] or {}

    def warm(self, encoder: bool = False) -> MultiSearcher:
        """Each index's :meth:`Searcher.warm` (side by side) and its DOIs."""
        def one(i: int) -> None:
            self.searchers[i].warm(encoder=encoder)
            self._dois_of(i)

        list(self._map(one, range(len(self.searchers))))
        return self

    @property
    def timings(self) -> dict[str, float]:
        """Per index timings, the longest of each (what a side-by-side load or search waits for); ``encode``: the
        last search's query encoding (done once before the indexes search) and the sub-queries' after."""
        out: dict[str, float] = {}
        for s in self.searchers:
            for k, v in s.timings.items():
                out[k] = max(out.get(k, 0.0), v)
        if self._encode_s is not None:  # the last search's query, encoded once per query model before the indexes search
            out["encode"] = self._encode_s + out.get("encode", 0.0)
        return out

    @property
    def encoder_kind(self) -> str:
        return ", ".join(dict.fromkeys(s.encoder_kind for s in self.searchers if s.encoder_kind))

    def _map(self, fn, items):
        items = list(items)
        if self.parallel and len(items) > 1:
            return list(self._pool.map(fn, items))
        return [fn(x) for x in items]

    def search(self, query: str, k: int = 10, filters: Filters | None = None, fusion: str | None = None,
               expand: str | None = None, rerank: bool = False, title_boost: bool | None = None,
               config: str | None = None, weights: dict[str, float] | None = None) -> SearchResponse:
        """The merged ranking of ``query`` over every index (see the module doc); UserError on bad input."""
        import time

        t0 = time.perf_counter()
        kwargs: dict[str, Any] = dict(k=k, filters=filters, fusion=fusion, expand=expand, rerank=rerank,
                                      title_boost=title_boost, config=config, weights=weights)
        # the query once per query model, before the indexes search side by side (they find it cached)
        from pipeline.query.search import validate_query

        q = validate_query(query, getattr(self.settings, "query_max_chars", 1000))
        for s in self.searchers:
            if s.shares_encoder_with is None:
                s.warm(encoder=True)
        t1 = time.perf_counter()
        for s in self.searchers:
            if s.shares_encoder_with is None:
                s.encode([q])
        self._encode_s = time.perf_counter() - t1
        resps: list[SearchResponse] = self._map(lambda s: s.search(query, **kwargs), self.searchers)
        answers = [IndexAnswer(n, r.results, self._dois_of(i)) for i, (n, r) in enumerate(zip(self.names, resps))]
        first = resps[0]
        out = SearchResponse(query=first.query, queries=list(dict.fromkeys(x for r in resps for x in r.queries)),
                             results=merge(answers, k, self.normalisation),
                             notes=[f"{n}: {note}" for n, r in zip(self.names, resps) for note in r.notes],
                             config=first.config, fusion=first.fusion, expand=first.expand, rerank=first.rerank,
                             title_boost=first.title_boost, weights=first.weights, snapshot_id=self.snapshot_id,
                             indexes=[{**ix, "results": len(r.results), "took_ms": r.took_ms}
                                      for ix, r in zip(self.indexes(), resps)],
                             normalisation=self.normalisation)
        out.took_ms = round((time.perf_counter() - t0) * 1000, 2)
        return out

    def shutdown(self) -> None:
        """Stop this searcher's threads; the indexes' searchers stay open (their owner closes them)."""
        self._pool.shutdown(wait=False)

    def close(self) -> None:
        """Unpin every index's snapshot."""
        for s in self.searchers:
            s.close()
        self.shutdown()

    def __enter__(self) -> MultiSearcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def default_index_name(snap) -> str:
    """An index's name when none is given: its warehouse folder's name (``.../<name>/snapshots/<id>``),
    else the snapshot folder's parent's name, else the snapshot id."""
    p = snap.path
    if p.parent.name == "snapshots" and p.parent.parent.name:
        return p.parent.parent.name
    return p.parent.name or snap.snapshot_id


def open_multi(settings, specs: Sequence[str], *, who: str | None = None, one_shot: bool = False,
               normalisation: str | None = None) -> MultiSearcher:
    """A :class:`MultiSearcher` over ``specs`` (``[NAME=]WHERE``: WHERE a snapshot folder, a warehouse, or a
    snapshot id of ``settings``' warehouse), each snapshot opened and pinned; the ones opened are closed
    again when a later one fails."""
    from pathlib import Path

    from pipeline.query.search import Searcher
    from pipeline.query.snapshot import open_snapshot

    searchers: list[Any] = []
    given: list[tuple[str | None, str]] = []
    try:
        for spec in specs:
            name, where = split_spec(spec)
            p = Path(where).expanduser()
            snap = open_snapshot(p if p.is_dir() else settings, None if p.is_dir() else where, who=who)
            searchers.append(Searcher(snap, settings, one_shot=one_shot))
            given.append((name, default_index_name(snap)))
        defaults = [d for n, d in given if not n]
        if len(set(defaults)) < len(defaults):  # e.g. two snapshots of one warehouse: their ids tell them apart
            given = [(n, s.snap.snapshot_id if not n else d) for (n, d), s in zip(given, searchers)]
        names = index_names(given)
    except BaseException:
        for s in searchers:
            s.close()
        raise
    return MultiSearcher(searchers, names, normalisation=normalisation)

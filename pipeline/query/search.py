"""The Searcher: hybrid search over one snapshot, and paper look-ups.

The Searcher orchestrates; the work is in stages over arrays:
1. candidates (:mod:`pipeline.query.candidates`), per query -- the original and each expansion
   sub-query: BM25 full-text search (K_SPARSE) and vector search (K_DENSE) over ``chunks`` -- from the
   resident table when it is held in memory, else LanceDB, side by side -- fused by the chosen method
   (:mod:`pipeline.query.fusion`); all as arrays of rows of one candidate pool;
2. scoring (:mod:`pipeline.query.signals`): the candidates' signals with numpy from their vectors and
   the candidate papers' vectors (one ``take``), each the maximum across queries; RM3 feedback and the
   neighbours' mean; score = weighted sum (:mod:`configs`);
3. papers rank by their best passage; optional title boosts and cross-encoder rerank.

Public methods beside :meth:`Searcher.search` (:meth:`~Searcher.sparse`, :meth:`~Searcher.dense`,
:meth:`~Searcher.candidates`, :meth:`~Searcher.lexical_scores`, :meth:`~Searcher.paper_vectors`,
:meth:`~Searcher.encode`) are what related-paper search, recommendations and the server build on.
"""

from __future__ import annotations

import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property

import numpy as np
import pyarrow as pa

from pipeline.errors import CitedWork, MissingExtra, UnknownPaper, UserError
from pipeline.query import configs, fusion as fusion_mod, signals as sig
from pipeline.query import bm25_stats, id_forms, ranks
from pipeline.query.bm25 import CandidateBM25, ResidentIndex
from pipeline.query.candidates import Passages, Pool, Ranked
from pipeline.query.excerpt import excerpt, query_terms
from pipeline.query.expand import Expansion, LLMExpander, NoExpander, PRFExpander, RM3Feedback
from pipeline.query.filters import Filters, in_clause, mask
from pipeline.query.fts import FullText
from pipeline.query.fts import match as fts_match
from pipeline.query.resident import Budget, FigureVectors, FlatChunks, PaperVectors, scan, vector_matrix
from pipeline.query.results import Result, SearchResponse
from pipeline.query.snapshot import Snapshot
from pipeline.vectors import l2_normalise

log = logging.getLogger(__name__)

EXPANSIONS = ("off", "prf", "rm3", "llm", "auto")
_META_COLS = ("paper_id", "external_id", "source", "title", "authors", "year", "categories", "primary_category")
_CHUNK_COLS = ["chunk_id", "paper_id", "text", "section", "role", "page_start", "vector"]
_QUERY_CACHE = 4096  # query vectors remembered (oldest dropped first)
_PREFILTER_MAX_IDS = 2000  # larger allowed sets are filtered after retrieval (an IN list that long costs more than it saves)
# Up to this many chunks held in memory, one full-text call scores every matching chunk and serves both
# the BM25 candidates and the exact BM25 of the vector-only ones (CISI, 1.5k chunks: 4 ms, against 5 ms
# for a top-50 call plus 6 ms for a row-id-prefiltered one; since then from an in-memory index, see
# _resident_index). Returning every match grows with the table, so larger tables keep the top-k call and
# score the candidates' BM25 from their own text (_rm3).
_SCORE_ALL_MAX_ROWS = 20_000
# Collection statistics for BM25 over the candidates' own text (pipeline.query.bm25): every
# passage up to this many, else a fixed-seed uniform sample of this many (stored in the snapshot at publish;
# counted when the searcher loads a snapshot without them: 4.2 s at 1M chunks on the loaded benchmark machine).
_STATS_SAMPLE_ROWS = bm25_stats.SAMPLE_ROWS


def validate_query(query: str, max_chars: int = 1000) -> str:
    if not isinstance(query, str) or not query.strip():
        raise UserError("the query is empty")
    q = " ".join(query.split())
    if len(query) > max_chars:
        raise UserError(f"the query is {len(query)} characters long; the limit is {max_chars}")
    return q


class Searcher:
    """Search one opened snapshot. Models load lazily on the first search."""

    def __init__(self, snapshot: Snapshot, settings=None, *, one_shot: bool = False):
        """``one_shot``: this process answers a search or two and exits (the CLI): loading favours start-up over
        throughput (the query encoder opens ~40 ms sooner and encodes ~4 ms slower)."""
        self.one_shot = one_shot
        if settings is None:
            from pipeline.settings import Settings

            settings = Settings.load()
        self.snap = snapshot
        self.settings = settings
        self._qcache: dict[str, np.ndarray] = {}
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="paperkb-search")
        blas = getattr(settings, "query_blas_threads", None)
        if blas:
            from threadpoolctl import threadpool_limits

            # process-wide, like query_torch_threads: the per-query products here are a few hundred
            # rows; BLAS threads spin-waiting beside LanceDB's made them 3-10x slower (measured)
            threadpool_limits(limits=blas, user_api="blas")

    # ---- snapshot data, loaded once --------------------------------------------------------
    # ``chunks`` and ``papers`` are the LanceDB tables (vector and full-text searches; imports LanceDB);
    # whole-column reads, takes and counts go through ``_chunks`` / ``_papers`` (Lance itself, see
    # pipeline.query.tables), so a search that LanceDB need not answer never imports it.
    @cached_property
    def chunks(self):
        return self.snap.table("chunks")

    @cached_property
    def _chunks(self):
        return self.snap.dataset("chunks")

    @cached_property
    def fts(self) -> FullText:
        """BM25 queries on ``chunks`` (:mod:`pipeline.query.fts`)."""
        return FullText(str(self.snap.path / "lancedb"), "chunks", lambda: self.chunks)

    @cached_property
    def papers(self):
        return self.snap.table("papers")

    @cached_property
    def _papers(self):
        return self.snap.dataset("papers")

    @cached_property
    def meta(self) -> pa.Table:
        """Paper metadata without vectors, in table order (row i = offset i)."""
        names = set(self._papers.schema.names)
        t = scan(self._papers, [c for c in _META_COLS if c in names])
        for c, typ in (("external_id", pa.string()), ("title", pa.string()), ("authors", pa.list_(pa.string())),
                       ("year", pa.int32()), ("categories", pa.list_(pa.string())), ("primary_category", pa.string())):
            if c not in t.column_names:
                t = t.append_column(c, pa.nulls(t.num_rows, typ))
        # citation counts, PageRank, weights: from the catalog (pipeline.query.ranks); snapshots of schema 1
        # carry them in the LanceDB rows
        carried = [c for c in ranks.RANK_COLUMNS if c in names]
        if carried:
            extra = scan(self._papers, carried)
            aligned = {c: extra[c].cast(typ) if c in carried else pa.nulls(t.num_rows, typ)
                       for c, typ in ranks.RANK_COLUMNS.items()}
        else:
            aligned = ranks.align(t["paper_id"].to_pylist(), self._catalog_ranks())
        for c, col in aligned.items():
            t = t.append_column(c, col)
        return t

    def _catalog_ranks(self) -> pa.Table | None:
        if not self.snap.has_catalog():
            return None
        con = self.snap.catalog()
        try:
            return ranks.read(con)
        finally:
            con.close()

    @cached_property
    def _meta_lists(self) -> dict[str, list]:
        """The metadata columns a result shows, as Python lists by paper row (no Arrow slice per result)."""
        return {c: self.meta[c].to_pylist() for c in ("external_id", "title", "authors", "year")}

    @cached_property
    def paper_row(self) -> dict[str, int]:
        return {pid: i for i, pid in enumerate(self.meta["paper_id"].to_pylist())}

    @cached_property
    def _rowids(self) -> list[int]:
        return self.meta["_rowid"].to_pylist()

    @cached_property
    def _pagerank(self) -> np.ndarray:
        return np.nan_to_num(self.meta["pagerank"].to_numpy(zero_copy_only=False).astype(np.float64), nan=0.0)

    @cached_property
    def _figure_rows(self) -> dict[str, list[int]]:
        """paper_id -> row ids in the figures table (empty when there is no table)."""
        if not self.snap.has_dataset("figures"):
            return {}
        t = scan(self.snap.dataset("figures"), ["paper_id"])
        out: dict[str, list[int]] = {}
        for pid, rid in zip(t["paper_id"].to_pylist(), t["_rowid"].to_pylist()):
            out.setdefault(pid, []).append(rid)
        return out

    @cached_property
    def _chunk_cols(self) -> list[str]:
        """The passage columns a search reads: ``role`` only where the snapshot has it (made since chunk roles)."""
        names = set(self._chunks.schema.names)
        return [c for c in _CHUNK_COLS if c in names or c != "role"]

    @cached_property
    def dim(self) -> int:
        return int(self._chunks.schema.field("vector").type.list_size)

    @cached_property
    def _resident(self) -> tuple[PaperVectors | None, FigureVectors | None, FlatChunks | None]:
        """Vectors held in memory within ``query_resident_mb`` (:mod:`pipeline.query.resident`)."""
        t0 = time.perf_counter()
        budget = Budget(getattr(self.settings, "query_resident_mb", 0))
        # a one-shot search reads its candidates' paper and figure vectors alone (a few hundred rows): holding every
        # paper's took 2.4 s of a search's 6.5 at 100,000 papers (BENCHMARKS.md, "One-shot CLI search")
        papers = figures = None
        if not self.one_shot:
            papers = PaperVectors.load(self._papers, self.paper_row, self.dim, budget)
            if self.snap.has_dataset("figures"):
                figures = FigureVectors.load(self.snap.dataset("figures"), self.dim, budget)
        flat = FlatChunks.load(self._chunks, self._chunk_cols, self.dim, budget)
        log.info("snapshot %s: in memory: papers' vectors %s, figure vectors %s, chunk vectors %s (%.1f s)",
                 self.snap.snapshot_id, papers is not None, figures is not None, flat is not None, time.perf_counter() - t0)
        return papers, figures, flat

    @cached_property
    def _score_all(self) -> bool:
        flat = self._resident[2]
        return flat is not None and len(flat.rowids) <= _SCORE_ALL_MAX_ROWS

    def _all_scores(self, query, where: str | None = None,
                    allowed_rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(row ids, BM25) of every chunk matching ``query`` (text or a LanceDB FTS query), best first.
        ``allowed_rows``: ``where`` as a mask over the resident rows (the in-memory index then answers it)."""
        index = self._resident_index
        if index is not None and isinstance(query, str) and (where is None or allowed_rows is not None):
            # the same scores, from memory (a prefilter leaves the index's statistics as they are: so does the mask)
            return index.search(query, allowed_rows)
        flat = self._resident[2]
        every = len(flat.rowids) if flat is not None else self._chunks.count_rows()
        t = self.fts.query(fts_match(query) if isinstance(query, str) else query, ["_score"], every, where)
        return t["_rowid"].to_numpy(), t["_score"].to_numpy().astype(np.float64)

    @cached_property
    def _cand_bm25(self) -> CandidateBM25:
        """BM25 over candidate passages from their own text, with the table's statistics: those stored in the
        snapshot at publish, else counted now (:mod:`pipeline.query.bm25_stats`)."""
        t0 = time.perf_counter()
        path = self.snap.bm25_path
        counted = bm25_stats.read(path) if path is not None else None
        source = "stored"
        if counted is None:
            flat = self._resident[2]
            held = (flat.rowids, flat.lists["text"]) if flat is not None and len(flat.rowids) <= _STATS_SAMPLE_ROWS else None
            counted = bm25_stats.count(self._chunks, texts=held)
            source = "counted"
        scorer = counted.scorer()
        log.info("snapshot %s: BM25 statistics of %d of %d passages (%s, %.2f s)", self.snap.snapshot_id,
                 counted.stats.sampled, counted.stats.n_docs, source, time.perf_counter() - t0)
        return scorer

    @cached_property
    def _resident_index(self) -> ResidentIndex | None:
        """The BM25 inverted index of a small resident table (see :class:`pipeline.query.bm25.ResidentIndex`)."""
        flat = self._resident[2]
        if flat is None or not self._score_all or len(flat.rowids) > _STATS_SAMPLE_ROWS:
            return None
        return ResidentIndex(self._cand_bm25, flat.rowids)

    def warm(self, encoder: bool = False) -> Searcher:
        """Load what every search needs now (metadata, resident vectors, BM25 statistics; with ``encoder``, the
        query encoder too), not on the first query."""
        # the encoder loads on a helper thread meanwhile: ONNX Runtime builds its session without the GIL, so on
        # two cores the two loads overlap (a one-shot CLI search waits for the longer one, not for both)
        loading = self._pool.submit(getattr, self, "_encode") \
            if encoder and "_encode" not in self.__dict__ and self.shares_encoder_with is None else None
        try:
            if "warm" not in self.timings:
                t0 = time.perf_counter()
                _ = self.paper_row, self._meta_lists, self._resident, self._pagerank, self._cand_bm25, self._resident_index
                self.timings["warm"] = time.perf_counter() - t0
        finally:
            if loading is not None:
                loading.result()
        return self

    def close(self) -> None:
        """Unpin the snapshot (see :meth:`Snapshot.close`) and stop the helper threads."""
        self.snap.close()
        self._pool.shutdown(wait=False)

    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- encoder ------------------------------------------------------------------------------
    @cached_property
    def _encode(self):
        """Query encoder matching the snapshot's model: the snapshot's own export when it has one
        (:mod:`pipeline.embedding.query_encoder`: ONNX Runtime / OpenVINO, no torch), else
        sentence-transformers with the manifest's model (or the settings' model when that is not on this host)."""
        t0 = time.perf_counter()
        from pipeline.embedding.query_encoder import open_query_encoder

        threads = getattr(self.settings, "query_torch_threads", None)
        fast = open_query_encoder(self.snap.query_encoder_dir, threads=threads, one_shot=self.one_shot)
        if fast is not None:
            self.encoder_kind = f"{fast.descriptor.backend}-{fast.descriptor.precision} (the snapshot's export)"
            self.timings["encoder"] = time.perf_counter() - t0
            return fast
        from pipeline.embedding.query_encoder import ENCODERS_EXTRA, fallback_installed, why_not_usable

        if not fallback_installed():  # a base install (no torch): one line naming the extra, not an ImportError
            raise MissingExtra(why_not_usable(self.snap.query_encoder_dir), ENCODERS_EXTRA)
        from pathlib import Path

        from pipeline.embedding import encoders

        model = self.snap.manifest.get("model") or {}
        path = model.get("query_path") or model.get("path")
        if not (path and Path(path).exists()):  # published elsewhere: the settings' model, the snapshot's stamp
            spec = encoders.model_spec(self.settings)
            path = spec.query_model
            model = {"truncate_dim": spec.truncate_dim, "max_seq_length": spec.max_seq_length, **model}
        # on the backend and precision the snapshot's documents were embedded with (older snapshots: torch fp32)
        self.encoder_kind = "sentence-transformers"
        self._torch_encoder = True
        enc = encoders.snapshot_query_encoder(path, model, self.settings)
        self.timings["encoder"] = time.perf_counter() - t0
        return enc

    encoder_kind = ""        # what encodes the queries (set when the encoder loads)
    _torch_encoder = False   # sentence-transformers: torch threads and autocast apply
    shares_encoder_with: Searcher | None = None  # see share_encoder

    def share_encoder(self, leader: Searcher) -> None:
        """Encode queries with ``leader``'s encoder and query cache (a snapshot embedded with the same query
        model, searched beside it: :mod:`pipeline.query.multi`): one model loaded, each query encoded once."""
        self.shares_encoder_with = leader
        self.encoder_kind = f"shared with snapshot {leader.snap.snapshot_id}"

    @cached_property
    def timings(self) -> dict[str, float]:
        """Seconds spent loading (``warm``: metadata, vectors, BM25 statistics; ``encoder``) and, for the last
        search, encoding its queries (``encode``) and in all (``search``): what ``paperkb -v search`` prints."""
        return {}

    def encode(self, queries: list[str]) -> np.ndarray:
        """Query vectors, remembered per text (evaluation ablations and repeated queries skip the model)."""
        if self.shares_encoder_with is not None:
            return self.shares_encoder_with.encode(queries)
        missing = [q for q in dict.fromkeys(queries) if q not in self._qcache]
        if missing:
            encode = self._encode
            t0 = time.perf_counter()
            threads = getattr(self.settings, "query_torch_threads", None)
            if threads and self._torch_encoder:
                import torch

                if torch.get_num_threads() != threads:
                    # one short query gains nothing from intra-op parallelism, and on a shared CPU the
                    # extra threads cost 10x+ (measured): see the query_torch_threads setting
                    torch.set_num_threads(threads)
            with self._encoder_precision():
                vecs = np.atleast_2d(np.asarray(encode(missing), dtype=np.float32))
            for q, v in zip(missing, vecs):
                self._qcache[q] = v
            while len(self._qcache) > _QUERY_CACHE:
                self._qcache.pop(next(iter(self._qcache)))
            self.timings["encode"] = self.timings.get("encode", 0.0) + time.perf_counter() - t0
        return np.vstack([self._qcache[q] for q in queries])

    def _encoder_precision(self):
        """bfloat16 autocast for query encoding when ``query_bf16`` says so (a context manager)."""
        import contextlib

        if not self._torch_encoder:
            return contextlib.nullcontext()  # the snapshot's export runs at the precision it was made for
        from pipeline.embedding.encoders import bf16_wanted

        if not bf16_wanted(getattr(self.settings, "query_bf16", None)):
            return contextlib.nullcontext()
        if ((self.snap.manifest.get("model") or {}).get("backend") or "torch") != "torch":
            return contextlib.nullcontext()  # ONNX Runtime / OpenVINO: the precision is the snapshot's, not autocast's
        import torch

        return torch.autocast("cpu", dtype=torch.bfloat16)

    # ---- candidates ---------------------------------------------------------------------------
    def sparse(self, text: str, k: int, where: str | None = None, memo: dict | None = None) -> tuple[pa.Table, np.ndarray]:
        """BM25 candidates of ``text``: rows (chunk columns, ``_rowid``, ``_score``), best first, and their
        vectors; ``memo`` (one search's) keeps all-chunk scores for :meth:`lexical_scores`."""
        flat = self._resident[2]
        if flat is not None:  # scores from the index (or every match from memory), rows and vectors from memory
            pos, scores = self._sparse_positions(flat, text, k, where, memo)
            return flat.rows.take(pa.array(pos)).append_column("_score", pa.array(scores)), flat.vectors[pos]
        try:
            t = self.fts.query(fts_match(text), [*self._chunk_cols, "_score"], k, where)
            return t, self._vectors_of(t)
        except Exception as exc:  # e.g. a query made only of stopwords/punctuation: no lexical candidates
            log.debug("full-text search found nothing for %r: %s", text, exc)
            return pa.table({}), np.zeros((0, self.dim), dtype=np.float32)

    def dense(self, vec: np.ndarray, k: int, where: str | None = None,
              allowed: set[str] | None = None) -> tuple[pa.Table, np.ndarray]:
        """The ``k`` nearest chunks (allowed papers only): rows with ``_distance``, nearest first, and vectors."""
        flat = self._resident[2]
        if flat is not None:  # no ANN index: the same exact scan LanceDB would do, without its per-call cost
            return flat.search(vec, k, allowed)
        q = self.chunks.search(vec, vector_column_name="vector")
        if where:
            q = q.where(where, prefilter=True)
        t = q.select([*self._chunk_cols, "_distance"]).with_row_id(True).limit(k).to_arrow()
        return t, self._vectors_of(t)

    def _vectors_of(self, t: pa.Table) -> np.ndarray:
        if t.num_rows == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return vector_matrix(t["vector"], self.dim)

    def candidates(self, pool: Pool, text: str, vec: np.ndarray, where: str | None, fusion: str, k_sparse: int,
                   k_dense: int, allowed: set[str] | None = None, memo: dict | None = None) -> Ranked:
        """One query's candidates (stage 1): its sparse and dense lists, added to ``pool``, fused."""
        s = self.settings
        flat = self._resident[2]
        if flat is not None:  # both sides as positions in the resident table; a thread would cost more
            sp_pos, sp_scores = self._sparse_positions(flat, text, k_sparse, where, memo, allowed)
            de_pos, _ = flat.nearest(vec, k_dense, allowed)
            sp_rows, de_rows = pool.add_positions(flat, sp_pos), pool.add_positions(flat, de_pos)
            de_vecs = flat.vectors[de_pos]
        else:  # both sides are LanceDB searches: run them side by side
            fs = self._pool.submit(self.sparse, text, k_sparse, where)
            dense, de_vecs = self.dense(vec, k_dense, where, allowed)
            sparse, sp_vecs = fs.result()
            sp_rows, de_rows = pool.add_table(sparse, sp_vecs), pool.add_table(dense, de_vecs)
            sp_scores = sparse["_score"].to_numpy() if sparse.num_rows else np.zeros(0)
        de_scores = de_vecs @ np.asarray(vec, dtype=np.float32)
        rows, fused = fusion_mod.fuse(fusion, sp_rows, sp_scores, de_rows, de_scores, w_sparse=s.query_blend_sparse_weight,
                                      k_merge=s.query_k_merge, rrf_k=s.query_rrf_k)
        return Ranked.of(rows, fused, sp_rows, sp_scores)

    def _sparse_positions(self, flat: FlatChunks, text: str, k: int, where: str | None,
                          memo: dict | None, allowed: set[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """BM25 candidates as (positions in the resident table, raw BM25), best first."""
        try:
            if self._score_all:  # every match scored once (kept in memo for the exact BM25)
                mask = flat.allowed_mask(allowed) if where is not None and allowed is not None else None
                rids, scores = self._all_scores(text, where, mask)
                if memo is not None and where is None:
                    memo[text] = rids, scores
                top = np.lexsort((rids, -scores))[:k]  # best first; ties by row id, as LanceDB's top-k
                return flat.positions(rids[top]), scores[top]
            t = self.fts.query(fts_match(text), ["_score"], k, where)
            return flat.positions(t["_rowid"].to_numpy()), t["_score"].to_numpy().astype(np.float64)
        except Exception as exc:  # e.g. a query made only of stopwords/punctuation: no lexical candidates
            log.debug("full-text search found nothing for %r: %s", text, exc)
            return np.zeros(0, dtype=np.int64), np.zeros(0)

    # ---- filters ------------------------------------------------------------------------------
    def _allowed(self, f: Filters) -> tuple[set[str] | None, str | None]:
        if not f.active:
            return None, None
        m = mask(self.meta, f)
        allowed = set(self.meta["paper_id"].filter(m).to_pylist())
        where = in_clause("paper_id", sorted(allowed)) if 0 < len(allowed) <= _PREFILTER_MAX_IDS else None
        return allowed, where

    # ---- expansion ----------------------------------------------------------------------------
    def _expander(self, expand: str | None):
        s = self.settings
        llm_ok = bool(s.llm_base_url and s.llm_model)
        # Default: the LLM when one is configured, else the offline lexical RM3 feedback ("rm3"), which
        # beat no expansion on both CISI and Cranfield (BENCHMARKS.md). The sub-query PRF expander measured
        # lower nDCG@10 than no expansion on both, so it runs when asked for ("prf", or "auto" without an
        # LLM) and as the LLM's fallback.
        mode = expand or s.query_expand or ("llm" if llm_ok else "rm3")
        if mode == "auto":
            mode = "llm" if llm_ok else "prf"
        if mode not in EXPANSIONS:
            raise UserError(f"unknown expansion {mode!r}: choose one of {', '.join(EXPANSIONS)}")
        prf = PRFExpander(s.query_prf_docs, s.query_prf_terms)
        if mode == "off":
            return NoExpander(), []
        if mode == "prf":
            return prf, []
        if mode == "rm3":
            return RM3Feedback(getattr(s, "query_rm3_docs", 3), getattr(s, "query_rm3_terms", 30)), []
        if not (s.llm_base_url and s.llm_model):
            return prf, ["LLM expansion is not configured (set PAPERKB_LLM_BASE_URL and PAPERKB_LLM_MODEL); used the offline PRF expansion"]
        return LLMExpander(s, fallback=prf), []

    # ---- search -------------------------------------------------------------------------------
    def search(self, query: str, k: int = 10, filters: Filters | None = None, fusion: str | None = None,
               expand: str | None = None, rerank: bool = False, title_boost: bool | None = None,
               config: str | None = None, weights: dict[str, float] | None = None) -> SearchResponse:
        """Ranked papers for ``query`` (see the module doc); raises UserError on bad input. ``took_ms`` is the
        search alone: what the first search loads (snapshot data, the query encoder) is loaded before it starts
        (see :attr:`timings`)."""
        s = self.settings
        q = validate_query(query, s.query_max_chars)
        self.warm(encoder=True)
        self.timings["encode"] = 0.0
        t0 = time.perf_counter()
        if not isinstance(k, int) or k < 1 or k > 1000:
            raise UserError(f"k must be between 1 and 1000, got {k!r}")
        config = config or s.query_config
        fusion = fusion or s.query_fusion
        if fusion not in fusion_mod.FUSIONS:
            raise UserError(f"unknown fusion {fusion!r}: choose one of {', '.join(fusion_mod.FUSIONS)}")
        w = configs.weights_for(config, {**(s.query_weights or {}), **(weights or {})})
        title_boost = s.query_title_boost if title_boost is None else bool(title_boost)
        f = (filters or Filters()).validated()
        expander, notes = self._expander(expand)
        resp = SearchResponse(query=q, queries=[q], results=[], notes=notes, config=config, fusion=fusion,
                              expand=expander.name, rerank=bool(rerank), title_boost=title_boost, weights=w,
                              snapshot_id=self.snap.snapshot_id)
        named, title = self._query_names(q)
        if title:  # a pasted id (arXiv:1706.03762, an address, a DOI): that paper, then the papers its title finds
            resp.notes.append(f"the query names the paper {named}: it comes first, then the papers its title finds"
                              if named in self.paper_row else f"the query names {named}, a work outside this "
                              "snapshot's corpus (paperkb show tells what is known of it): the papers its title finds")
            q = title
            resp.queries = [q]

        allowed, where = self._allowed(f)
        if allowed is not None and not allowed:
            resp.notes.append("no paper matches the filters")
            resp.took_ms = round((time.perf_counter() - t0) * 1000, 2)
            self.timings["search"] = resp.took_ms / 1000
            return resp
        post_filter = allowed is not None and where is None
        grow = 4 if post_filter else 1
        k_sparse, k_dense = s.query_k_sparse * grow, s.query_k_dense * grow

        # stage 1, candidates: the original query's, then the expansion's sub-queries', in one pool
        qv0 = self.encode([q])[0]
        pool = Pool(self.dim)
        memo: dict = {}  # this search's all-chunk BM25 scores by query text (small tables, see _SCORE_ALL_MAX_ROWS)
        per_query = [self.candidates(pool, q, qv0, where, fusion, k_sparse, k_dense, allowed, memo)]
        vecs = [qv0]

        def feedback(_text: str, n: int):
            first = per_query[0]
            return [(pool.texts[r], f) for r, f in zip(first.rows[:n].tolist(), first.fused[:n].tolist())]

        exp: Expansion = expander.expand(q, feedback)
        resp.notes.extend(exp.notes)
        resp.expand = exp.method
        subs = [x for x in exp.queries if x and x.strip().lower() != q.lower()]
        if subs:
            sub_vecs = self.encode(subs)
            for text, v in zip(subs, sub_vecs):
                per_query.append(self.candidates(pool, text, v, where, fusion, k_sparse, k_dense, allowed))
                vecs.append(v)
        resp.queries = [q, *subs]

        # every query's fused candidates, once each, in the order first seen; of papers this snapshot has
        # (return_index: a plain np.unique asks numpy.ma whether the array is masked, importing it: 25 ms of a
        # one-shot search)
        rows = np.unique(np.concatenate([r.rows for r in per_query]), return_index=True)[0]
        only = allowed if post_filter else None  # the filters not applied by the searches themselves
        known = [pool.paper_ids[r] in self.paper_row and (only is None or pool.paper_ids[r] in only)
                 for r in rows.tolist()]
        rows = rows[np.asarray(known, dtype=bool)]
        if not len(rows):
            resp.took_ms = round((time.perf_counter() - t0) * 1000, 2)
            self.timings["search"] = resp.took_ms / 1000
            return resp
        cands = pool.take(rows)

        # stage 2, scoring (numpy): the signals of every candidate, each the best over the queries
        QV = np.vstack(vecs)
        cand_papers = sorted(set(cands.paper_ids), key=self.paper_row.__getitem__)
        local = {pid: i for i, pid in enumerate(cand_papers)}
        doc_v, abs_v = self.paper_vectors(cand_papers)
        fig_v, fig_p = self._figure_vectors(cand_papers, local)
        pr = self._pagerank[[self.paper_row[p] for p in cand_papers]]
        extra = {name: np.vstack([r.over(name, rows, len(pool)) for r in per_query]) for name in ("bm25", "fused")}
        cand_paper = np.array([local[p] for p in cands.paper_ids])
        S = sig.compute_signals(QV, cands.vectors, cand_paper, doc_v, abs_v, pr, fig_v, fig_p, per_query=extra)
        if isinstance(expander, RM3Feedback) and w.get("rm3"):
            self._rm3(q, expander, cands, S, w, resp, memo)
        S.setdefault("rm3", S["bm25"].copy())  # no feedback ran: the RM3 query is the original query
        # score regularisation (signals.neighbour_mean): neighbours' scores with every other signal weighed
        S["nbr"] = sig.neighbour_mean(cands.vectors, sig.score(S, {**w, "nbr": 0.0}), cand_paper,
                                      getattr(s, "query_nbr_k", 20))
        sims = QV @ l2_normalise(cands.vectors).T
        total = sig.score(S, w)
        order = sig.best_per_paper(cands.paper_ids, total)

        # optional stages on each paper's best passage
        # (passage, score, signals added by the optional stages); each result's full signals are read at the end
        best: list[tuple[int, float, dict]] = [(i, float(total[i]), {}) for i in order]
        if title_boost:
            best = self._title_boost(q, best, cands, f)
        if rerank:
            best = self._rerank(q, best, cands, resp)
        best.sort(key=lambda b: (cands.paper_ids[b[0]] != named, -b[1]))  # the paper a pasted id names first

        m = self._meta_lists
        terms = query_terms(resp.queries)
        for rank, (i, score_i, added) in enumerate(best[:k], start=1):
            pid = cands.paper_ids[i]
            row = self.paper_row[pid]
            resp.results.append(Result(
                paper_id=pid, external_id=m["external_id"][row], title=m["title"][row], authors=m["authors"][row] or [],
                year=m["year"][row], score=score_i, signals={**{n: float(S[n][i]) for n in S}, **added},
                passage=cands.texts[i], page=cands.pages[i], section=cands.sections[i], chunk_id=cands.chunk_ids[i],
                role=cands.roles[i] or ("abstract" if cands.chunk_ids[i].endswith("#abs") else "body"), rank=rank, query=resp.queries[int(np.argmax(sims[:, i]))],
                excerpt=excerpt(cands.texts[i], terms)))
        resp.took_ms = round((time.perf_counter() - t0) * 1000, 2)
        self.timings["search"] = resp.took_ms / 1000
        return resp

    def lexical_scores(self, query: str, rowids: np.ndarray, memo: dict | None = None) -> np.ndarray:
        """Raw BM25 of ``query`` for the passages with LanceDB row ids ``rowids``, on a table whose every
        chunk the first pass scored (``_score_all``): a look-up in this search's ``memo`` (else one scoring
        of every chunk). 0 where the passage does not match."""
        rowids = np.asarray(rowids, dtype=np.int64)
        try:
            hit = (memo or {}).get(query)
            rids, scores = hit if hit is not None else self._all_scores(query)
        except Exception as exc:  # e.g. only stopwords: nothing matches
            log.debug("full-text scoring failed for %r: %s", query, exc)
            return np.zeros(len(rowids))
        order = np.argsort(rids, kind="stable")
        rids, scores = np.asarray(rids)[order], np.asarray(scores, dtype=np.float64)[order]
        at = np.minimum(np.searchsorted(rids, rowids), max(len(rids) - 1, 0))
        found = (rids[at] == rowids) if len(rids) else np.zeros(len(rowids), dtype=bool)
        return np.where(found, scores[at] if len(rids) else 0.0, 0.0)

    def _rm3(self, q: str, fb: RM3Feedback, cands: Passages, S: dict[str, np.ndarray], w: dict[str, float],
             resp: SearchResponse, memo: dict | None = None) -> None:
        """Lexical RM3 feedback: sets the ``bm25`` of every candidate and the ``rm3`` signal.

        1. the first-pass ranking (``rm3 = bm25``); its top ``fb.fb_docs`` papers' best passages, weighted
           by exp(score), give the relevance model P(w|R) (:func:`pipeline.query.expand.feedback_terms`);
        2. ``rm3``: BM25 of the ``fb.fb_terms`` best new terms (each boosted by P(w|R) over the best) for
           every candidate, over its best; the weights interpolate it with ``bm25`` as RM3 does;
        3. meanwhile ``bm25`` becomes the original query's BM25 for every candidate (vector-only ones
           included, instead of 0), over its best.

        Both BM25s come from the candidates' own text and the table's statistics
        (:mod:`pipeline.query.bm25`), not from a second and third full-text query: on tables of up to
        ``_STATS_SAMPLE_ROWS`` passages they are the index's own scores; above, the statistics (N,
        mean length, document frequencies) are estimated from a fixed sample of that many passages.
        """
        if (cands.rowids < 0).any():
            return
        rowids, texts = cands.rowids, cands.texts
        first = sig.score({**S, "rm3": S["bm25"]}, w)
        top = sig.best_per_paper(cands.paper_ids, first)[: fb.fb_docs]
        terms = fb.terms(q, [(texts[i], math.exp(first[i])) for i in top])
        if terms:
            # BM25 of the feedback terms (each boosted by P(w|R) over the best), over the candidates' own
            # text with the table's statistics: what LanceDB's index answers for the same boolean query,
            # without walking 30 posting lists over the whole table (pipeline.query.bm25)
            best = max(p for _, p in terms) or 1.0
            e = self._cand_bm25.score([(t, p / best) for t, p in terms], rowids, texts)
        # the original query's BM25 for every candidate (vector-only ones included): on small tables the first
        # pass scored every chunk (a look-up); else from the candidates' text, as the feedback terms above
        ex = self.lexical_scores(q, rowids, memo) if self._score_all else self._cand_bm25.score([(q, 1.0)], rowids, texts)
        if ex.max() > 0:
            S["bm25"] = ex / ex.max()
        if not terms:
            resp.notes.append("RM3 feedback found no new terms")
            return
        S["rm3"] = e / e.max() if e.max() > 0 else e
        resp.notes.append(f"RM3 feedback terms (top {len(top)} passages): {', '.join(t for t, _ in terms[:10])}"
                          + (", ..." if len(terms) > 10 else ""))

    def paper_vectors(self, paper_ids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(document vectors, abstract vectors) of ``paper_ids`` (ids of this snapshot), rows in that order."""
        resident = self._resident[0]
        if resident is not None:
            return resident.get([self.paper_row[p] for p in paper_ids])
        t = self._papers.take_row_ids([self._rowids[self.paper_row[p]] for p in paper_ids], ["paper_id", "doc_vector", "abs_vector"])
        pos = {pid: i for i, pid in enumerate(t["paper_id"].to_pylist())}
        idx = [pos[p] for p in paper_ids]
        return vector_matrix(t["doc_vector"], self.dim)[idx], vector_matrix(t["abs_vector"], self.dim)[idx]

    def _figure_vectors(self, paper_ids: list[str], local: dict[str, int]):
        resident = self._resident[1]
        if resident is not None:
            return resident.get(paper_ids, local)
        offsets = [o for p in paper_ids for o in self._figure_rows.get(p, [])]
        if not offsets:
            return None, None
        t = self.snap.dataset("figures").take_row_ids(offsets, ["paper_id", "vector"])
        return vector_matrix(t["vector"], self.dim), np.array([local[p] for p in t["paper_id"].to_pylist()])

    def _title_boost(self, q: str, best: list, cands: Passages, f: Filters) -> list:
        from pipeline.query.titles import title_boost

        scale = self.settings.query_title_boost_scale
        wanted = {c.lower() for c in (f.categories or self.settings.categories or [])}
        out = []
        for i, score_i, signals_i in best:
            row = self.meta.slice(self.paper_row[cands.paper_ids[i]], 1).to_pylist()[0]
            primary = bool(row.get("primary_category")) and row["primary_category"].lower() in wanted
            b = title_boost(q, row.get("title") or "", cands.texts[i], primary=primary)
            out.append((i, score_i + scale * b.total, {**signals_i, "title": b.total}))
        return out

    def _rerank(self, q: str, best: list, cands: Passages, resp: SearchResponse) -> list:
        from pipeline.query.rerank import cross_scores, load_cross_encoder

        model, reason = load_cross_encoder(self.settings.query_rerank_model)
        if model is None:
            resp.rerank = False
            resp.notes.append(f"rerank off: {reason}")
            return best
        best = sorted(best, key=lambda b: -b[1])
        n = self.settings.query_rerank_top
        top, rest = best[:n], best[n:]
        texts = []
        for i, _, _ in top:
            title = self.meta.slice(self.paper_row[cands.paper_ids[i]], 1).to_pylist()[0].get("title") or ""
            texts.append(f"{title}. {cands.texts[i]}")
        logits = cross_scores(model, q, texts)
        ce = 1.0 / (1.0 + np.exp(-logits))
        # the cross-encoder orders the top n; they stay above the rest (score offset by the best of the rest)
        floor = max((b[1] for b in rest), default=0.0)
        out = [(i, floor + float(c), {**s_, "ce": float(c)}) for (i, _, s_), c in zip(top, ce)]
        resp.notes.append(f"reranked the top {len(top)} with {self.settings.query_rerank_model}")
        return out + rest

    # ---- papers -------------------------------------------------------------------------------
    def _require(self, paper_id: str) -> int:
        if not isinstance(paper_id, str) or not paper_id.strip():
            raise UserError("the paper id is empty")
        pid = paper_id.strip()
        if pid in self.paper_row:
            return self.paper_row[pid]
        # accept the external id (arXiv id / collection docno) when it is unambiguous
        ext = self._meta_lists["external_id"]
        hits = [i for i, e in enumerate(ext) if e == pid]
        if len(hits) == 1:
            return hits[0]
        hit = self._resolved(pid)  # arXiv:1706.03762, 1706.03762v5, an address, a DOI, a title
        if hit is not None and hit[0] == "paper" and hit[1] in self.paper_row:
            return self.paper_row[hit[1]]
        if hit is not None and hit[0] == "work":
            raise CitedWork(f"{pid!r} is a work the papers of snapshot {self.snap.snapshot_id} cite, not one of its "
                            f"papers: `paperkb show {hit[1]}` (or /api/works/{hit[1]}) tells what is known of it", hit[1])
        raise UnknownPaper(f"unknown paper id {pid!r} in snapshot {self.snap.snapshot_id}")

    def _query_names(self, q: str) -> tuple[str | None, str | None]:
        """(the paper or cited work, its title) a whole query names when it is an id as people paste it
        (``arXiv:1706.03762``, an arXiv, doi.org or Semantic Scholar address, a DOI, a corpus id such as ``cacm:1785``),
        else (None, None): a title or a bare number ("1785") is searched as text."""
        if not (id_forms.arxiv_id(q) or id_forms.doi(q) or id_forms.s2_paper(q) or (":" in q and q in self.paper_row)):
            return None, None
        if q in self.paper_row:
            return q, self._meta_lists["title"][self.paper_row[q]]
        hit = self._resolved(q, titles=True)
        return (hit[1], hit[2]) if hit else (None, None)

    def _resolved(self, typed: str, titles: bool = False) -> tuple[str, str, str | None] | None:
        """(kind, id, title when ``titles``) of what the catalog's resolver finds for ``typed``: 'paper' or 'work' (a
        cited work outside the corpus); None when it finds nothing."""
        if not self.snap.has_catalog():
            return None
        from pipeline.query.records import resolve_ids

        con = self.snap.catalog()
        try:
            (kind, found), = resolve_ids(con, [typed])
            title = None
            if titles:
                row = con.execute("SELECT title FROM papers WHERE paper_id = ?" if kind == "paper" else
                                  "SELECT title FROM works WHERE work_id = ?", [found]).fetchone()
                title = row[0] if row else None
            return kind, found, title
        except UnknownPaper:
            return None
        finally:
            con.close()

    def resolve_id(self, paper_id: str) -> str:
        return self.meta["paper_id"][self._require(paper_id)].as_py()

    def paper(self, paper_id: str) -> dict:
        """Metadata, abstract, figures and graph metrics of one paper (UnknownPaper if absent)."""
        row = self._require(paper_id)
        names = [n for n in self._papers.schema.names if n not in ("doc_vector", "abs_vector")]
        rec = self._papers.take_row_ids([self._rowids[row]], names).to_pylist()[0]
        pid = rec["paper_id"]
        figs = []
        if self._figure_rows.get(pid):
            ft = self.snap.dataset("figures")
            cols = [n for n in ft.schema.names if n != "vector"]
            figs = ft.take_row_ids(self._figure_rows[pid], cols).to_pylist()
            figs.sort(key=lambda r: (r.get("number") is None, r.get("number") or 0))
        metrics = {k: ranks.nan_to_none(self.meta[k][row].as_py()) for k in ranks.RANK_COLUMNS}
        rec.update(metrics)  # the LanceDB row no longer carries them (pipeline.query.ranks)
        return {"paper": rec, "abstract": rec.get("abstract"), "figures": figs, "metrics": metrics}

    def related(self, paper_id: str, k: int = 20):
        from pipeline.query.related import related_papers

        return related_papers(self, self.resolve_id(paper_id), k=k)

    def recommend(self, pos, neg=None, k: int = 20):
        """Papers like the positive seeds and unlike the negative ones, each with why (pipeline.query.recommend)."""
        from pipeline.query.recommend import recommend

        return recommend(self, pos, neg, k=k)

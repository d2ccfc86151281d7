"""Citation-graph math: CCBC Eq. 1 / Eq. 3 by hand, PageRank vs igraph, power-law fit and weights."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.steps.graph import adjacency, ccbc_scores, fit_powerlaw, iter_blocks, related_top_k, survival_weights
from pipeline.steps.pagerank import igraph_from_adjacency, pagerank


def _graph(edges, n):
    e = np.array(edges, dtype=np.int64).reshape(-1, 2)
    return adjacency(e[:, 0], e[:, 1], n)


def _score(edges, n, w, a, b):
    weighted, naive = ccbc_scores(_graph(edges, n), np.array(w, dtype=float), [a])
    return weighted[0, b], naive[0, b]


# -- CCBC on hand-made graphs (values computed by hand in the comments) ------------------------
def test_direct_citation_only():
    # 0 -> 1; nothing shared. naive = 2/5 * 1/2 = 0.2; weighted = 1/6 w(B) (A cites B) from 0's side,
    # and 1/6 w(A) (B cites A) from 1's side, with A the row paper.
    w = [0.5, 0.8]
    wt, nv = _score([(0, 1)], 2, w, 0, 1)
    assert nv == pytest.approx(0.2)
    assert wt == pytest.approx(0.8 / 6)
    wt, nv = _score([(0, 1)], 2, w, 1, 0)
    assert nv == pytest.approx(0.2)
    assert wt == pytest.approx(0.8 / 6)  # row 1 = A is cited by B = 0: 1/6 w(A) = 0.8/6


def test_shared_references_only_and_non_candidates():
    # 0 -> {2, 3}, 1 -> {2, 4}: 0 and 1 share reference 2 (w=0.5); refs union {2, 3, 4}.
    edges = [(0, 2), (0, 3), (1, 2), (1, 4)]
    w = [1.0, 1.0, 0.5, 1.0, 0.25]
    wt, nv = _score(edges, 5, w, 0, 1)
    assert nv == pytest.approx(0.4 * (1 / 3))
    assert wt == pytest.approx((0.5 / (0.5 + 1.0 + 0.25)) / 3)
    rel = related_top_k(_graph(edges, 5), np.array(w), np.array([0]), k=10)
    # 0 relates to 3 (direct, 1/6 * 1), 1 (shared ref, 0.0952), 2 (direct, 1/6 * 0.5); 4 shares nothing with 0
    assert rel.col.tolist() == [3, 1, 2]
    assert rel.rank.tolist() == [1, 2, 3]
    assert rel.weighted.tolist() == pytest.approx([1 / 6, (0.5 / 1.75) / 3, 0.5 / 6])
    assert rel.naive.tolist() == pytest.approx([0.2, 0.4 / 3, 0.2])
    assert rel.shared_refs.tolist() == [0, 1, 0]
    assert rel.cites.tolist() == [True, False, True] and not rel.cited_by.any()


def test_shared_citers_only_papers_without_references():
    # 2 -> {0, 1}, 3 -> 0, 4 -> 1: 0 and 1 have no references and share citer 2 of {2, 3, 4}.
    edges = [(2, 0), (2, 1), (3, 0), (4, 1)]
    w = [0.5, 0.4, 1.0, 1.0, 1.0]
    wt, nv = _score(edges, 5, w, 0, 1)
    assert nv == pytest.approx(0.4 / 3)
    assert wt == pytest.approx(0.5 * 0.4 * (1 / 3) / 3)
    rel = related_top_k(_graph(edges, 5), np.array(w), np.array([0, 1]), k=5)
    assert np.isfinite(rel.weighted).all() and np.isfinite(rel.naive).all()
    assert rel.shared_citers[(rel.row == 0) & (rel.col == 1)].tolist() == [1]


def test_highly_cited_shared_reference_weighs_little():
    # H=3 (w 0.01), R=4 (w 1), X=5, Y=6 (w 1). 0 -> {H, R}; 1 -> {H, X}; 2 -> {R, Y}.
    # naive: both pairs share 1 of 3 refs -> 0.4/3. weighted: w(H)/2.01/3 vs w(R)/2.01/3.
    edges = [(0, 3), (0, 4), (1, 3), (1, 5), (2, 4), (2, 6)]
    w = [1, 1, 1, 0.01, 1, 1, 1]
    wt01, nv01 = _score(edges, 7, w, 0, 1)
    wt02, nv02 = _score(edges, 7, w, 0, 2)
    assert nv01 == pytest.approx(0.4 / 3) and nv02 == pytest.approx(0.4 / 3)
    assert wt01 == pytest.approx(0.01 / 2.01 / 3)
    assert wt02 == pytest.approx(1 / 2.01 / 3)
    rel = related_top_k(_graph(edges, 7), np.array(w, dtype=float), np.array([0]), k=2)
    assert rel.col.tolist() == [4, 2]  # direct link to R (1/6) first, then 2 (0.1658); 1 falls out of the top 2


def test_all_terms_together():
    # 0 -> {1, 2}, 1 -> 2, 3 -> {0, 1}. Pair (0, 1): 0 cites 1; refs {1,2} vs {2}: share 2 of {1, 2};
    # citers {3} vs {0, 3}: share 3 of {0, 3}.
    edges = [(0, 1), (0, 2), (1, 2), (3, 0), (3, 1)]
    w = [0.5, 0.25, 0.8, 1.0]
    wt, nv = _score(edges, 4, w, 0, 1)
    assert nv == pytest.approx(0.4 * (0.5 + 1 / 2 + 1 / 2))
    assert wt == pytest.approx(0.25 / 6 + (0.8 / (0.25 + 0.8)) / 3 + 0.5 * 0.25 * (1 / 2) / 3)


def test_isolated_paper_and_self_are_never_related():
    edges = [(0, 1), (2, 1)]
    rel = related_top_k(_graph(edges, 4), np.ones(4), np.array([0, 3]), k=5)
    assert 3 not in rel.row.tolist()  # isolated: no candidates at all
    assert not np.any(rel.row == rel.col)
    assert set(rel.col[rel.row == 0].tolist()) == {1, 2}  # 1 direct, 2 shares reference 1


def test_scores_in_unit_interval_and_blocks_do_not_change_results():
    rng = np.random.default_rng(7)
    n = 300
    src = rng.integers(0, n, 3000)
    dst = (rng.pareto(1.2, 3000) * 5).astype(int) % n
    a = adjacency(src, dst, n)
    w = rng.uniform(0, 1, n)
    rows = np.arange(0, n, 3)
    one = related_top_k(a, w, rows, k=7, max_block_nnz=10**9)
    many = related_top_k(a, w, rows, k=7, max_block_nnz=1000)
    assert len(list(iter_blocks(np.full(len(rows), 600.0), 1000))) > 10
    for f in ("row", "rank", "col", "weighted", "naive", "shared_refs", "shared_citers"):
        assert np.array_equal(getattr(one, f), getattr(many, f)), f
    assert (one.weighted >= 0).all() and (one.weighted <= 1 + 1e-12).all()
    assert (one.naive >= 0).all() and (one.naive <= 1 + 1e-12).all()
    assert np.bincount(one.row).max() <= 7
    # ranks follow weighted CCBC within each row
    for r in np.unique(one.row):
        s = one.weighted[one.row == r]
        assert (np.diff(s) <= 1e-15).all()


# -- PageRank ---------------------------------------------------------------------------------
def test_pagerank_equals_igraph_reference_call():
    import igraph as ig

    rng = np.random.default_rng(3)
    n = 2000
    pairs = {(int(s), int(d)) for s, d in zip(rng.integers(0, n, 12000), rng.integers(0, n, 12000)) if s != d}
    edges = sorted(pairs)
    ref = ig.Graph(n=n, edges=edges, directed=True).pagerank(damping=0.85)
    e = np.array(edges)
    ours = pagerank(igraph_from_adjacency(adjacency(e[:, 0], e[:, 1], n)), 0.85)
    assert np.allclose(ours, ref, rtol=0, atol=1e-12)
    ours_d = pagerank(igraph_from_adjacency(adjacency(e[:, 0], e[:, 1], n)), 0.6)
    assert np.allclose(ours_d, ig.Graph(n=n, edges=edges, directed=True).pagerank(damping=0.6), atol=1e-12)


def _random_adjacency(n: int, m: int, seed: int):
    rng = np.random.default_rng(seed)
    return adjacency(rng.integers(0, n, m), rng.integers(0, n, m), n)


def test_pagerank_job_in_a_child_process_gives_the_same_vector(monkeypatch):
    """The child gets the CSR arrays through a pipe and builds the Graph in chunks; the vector equals the one this
    process computes from a Graph built from the whole edge list at once, up to PRPACK's own rounding (its OpenMP
    sums are unordered: two calls on one Graph differ in the last bits)."""
    import igraph as ig

    from pipeline.steps import pagerank as pr_mod

    a = _random_adjacency(30_000, 200_000, 5)
    coo = a.tocoo()
    ref = np.asarray(ig.Graph(n=a.shape[0], edges=list(zip(coo.row.tolist(), coo.col.tolist())), directed=True)
                     .pagerank(damping=0.85))
    monkeypatch.setattr(pr_mod, "_EDGE_CHUNK", 7_777)  # chunk boundaries inside rows
    here = pr_mod.PageRankJob(a, 0.85, min_edges=a.nnz + 1)
    assert here.in_process and np.allclose(here.result(), ref, rtol=1e-9, atol=0)
    child = pr_mod.PageRankJob(a, 0.85, min_edges=a.nnz)
    assert not child.in_process
    got = child.result()
    child.close()
    assert np.allclose(got, ref, rtol=1e-9, atol=0)
    assert child.info["process"] == "child" and child.info["build_s"] >= 0 and child.info["peak_rss_gib"] > 0
    assert pr_mod.PageRankJob(a, 0.85, min_edges=None).in_process


def test_pagerank_job_child_failure_is_reported_and_close_stops_it():
    from pipeline.steps.pagerank import PageRankJob

    a = _random_adjacency(1_000, 5_000, 6)
    bad = PageRankJob(a, 1.5, min_edges=0)  # igraph refuses a damping factor above 1
    with pytest.raises(RuntimeError, match="PageRank child process failed"):
        bad.result()
    running = PageRankJob(_random_adjacency(200_000, 2_000_000, 7), 0.85, min_edges=0)
    running.close()  # the caller failed before collecting the result
    assert running._proc is not None and running._proc.returncode is not None


# -- power law --------------------------------------------------------------------------------
def _pareto(alpha, xmin, n, seed):
    u = np.random.default_rng(seed).uniform(size=n)
    return xmin * (1 - u) ** (-1 / (alpha - 1))


@pytest.mark.parametrize("alpha", [2.2, 2.5, 2.8])
def test_powerlaw_fit_recovers_alpha(alpha):
    # 20,000 draws from a continuous power law with xmin 3: the MLE's standard error is ~0.01.
    fit, obj = fit_powerlaw(_pareto(alpha, 3.0, 20_000, seed=11), xmin=3.0)
    assert fit.status == "ok" and obj is not None
    assert abs(fit.alpha - alpha) < 0.05
    assert fit.sigma < 0.02 and fit.ks_d < 0.02 and fit.n_tail == 20_000
    assert fit.compared_to == "lognormal" and 0 <= fit.p_value <= 1


def test_powerlaw_xmin_search_finds_the_tail():
    # lognormal-ish body below 3, power law (alpha 2.5) from 3 on: the KS search must find xmin ~3
    rng = np.random.default_rng(2)
    body = rng.uniform(1.0, 3.0, 1500)
    fit, _ = fit_powerlaw(np.concatenate([body, _pareto(2.5, 3.0, 4000, seed=2)]))
    assert fit.status == "ok"
    assert 2.5 <= fit.xmin <= 4.5
    assert abs(fit.alpha - 2.5) < 0.1


def test_weights_are_survival_non_increasing_and_in_unit_interval():
    sample = np.floor(_pareto(2.5, 4.0, 20_000, seed=5))
    fit, obj = fit_powerlaw(sample)
    c = np.arange(0, 5000)
    w = survival_weights(c, obj)
    assert ((w >= 0) & (w <= 1)).all()
    assert (np.diff(w) <= 0).all()
    assert (w[c < fit.xmin] == 1).all() and w[0] == 1
    assert w[-1] < 0.01
    big = c >= fit.xmin  # continuous power-law survival (x/xmin)^(1 - alpha)
    assert w[big] == pytest.approx((c[big] / fit.xmin) ** (1 - fit.alpha), rel=1e-6)
    # shuffled input: weights follow the counts, not the order
    perm = np.random.default_rng(1).permutation(len(c))
    assert np.array_equal(survival_weights(c[perm], obj), w[perm])


def test_too_few_counts_means_no_fit_and_unit_weights():
    fit, obj = fit_powerlaw(np.array([0, 0, 1, 2, 3, 5]), min_n=50)
    assert fit.status == "too_few" and obj is None and fit.n_positive == 4
    assert survival_weights(np.array([0, 10, 1000]), obj).tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("hub_citers", [3, 20, 60])
def test_hub_shortcut_gives_the_exact_result(hub_citers):
    # power-law popularity: a few references are cited by hundreds of papers (hubs)
    rng = np.random.default_rng(4)
    n = 1500
    pop = rng.pareto(1.3, n) + 1
    dst = np.searchsorted(np.cumsum(pop), rng.uniform(0, pop.sum(), 15000))
    a = adjacency(rng.integers(0, n, 15000), np.minimum(dst, n - 1), n)
    indeg = np.asarray(a.sum(axis=0)).ravel()
    fit, obj = fit_powerlaw(indeg, min_n=20)
    w = survival_weights(indeg, obj)
    rows = np.arange(0, n, 2)
    exact = related_top_k(a, w, rows, k=10)
    fast = related_top_k(a, w, rows, k=10, hub_citers=hub_citers, max_block_nnz=20_000)
    assert (indeg > hub_citers).sum() > 0
    for f in ("row", "rank", "col", "shared_refs", "shared_citers", "cites", "cited_by"):
        assert np.array_equal(getattr(exact, f), getattr(fast, f)), f
    assert np.allclose(exact.weighted, fast.weighted, rtol=1e-12, atol=1e-15)
    assert np.allclose(exact.naive, fast.naive, rtol=1e-12, atol=1e-15)


def _library_fit(values: np.ndarray):
    import warnings

    import powerlaw

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return powerlaw.Fit(values, discrete=False, verbose=0)


def _cacm_citation_counts(shared_data) -> np.ndarray:
    """Times each CACM document is cited by another (its type-5 ``.X`` links): a real citation-count sample."""
    from pipeline.sources.local_corpus import cacm_citations, smart_paper
    from pipeline.sources.smart import iter_smart_records

    text = (shared_data / "collections" / "cacm" / "cacm.all").read_text(encoding="latin-1")
    edges, _ = cacm_citations([smart_paper(r) for r in iter_smart_records(text)])
    _, counts = np.unique([cited for _, cited in edges], return_counts=True)
    return counts.astype(np.float64)


@pytest.mark.parametrize("sample", ["cacm", "pareto", "zipf_ties", "lognormal_ties", "synthetic_graph"])
def test_fast_xmin_search_chooses_what_the_powerlaw_package_chooses(sample, shared_data):
    """ks_xmin replaces the package's O(n x distinct) KS search: same xmin, so the same fit and compare."""
    from pipeline.steps.graph import ks_xmin

    rng = np.random.default_rng(7)
    if sample == "cacm":
        values = _cacm_citation_counts(shared_data)
    elif sample == "pareto":
        values = rng.pareto(1.4, 4000) + 1.0
    elif sample == "zipf_ties":
        values = rng.zipf(2.2, 20_000).astype(np.float64)
    elif sample == "lognormal_ties":
        values = np.round(rng.lognormal(1.0, 1.2, 3000)) + 1.0
    else:  # in-degrees of the benchmark's synthetic citation graph (Pareto popularity)
        from bench.graph import synthetic_edges

        _, dst = synthetic_edges(50_000, 3_000, 400_000)
        values = np.bincount(dst).astype(np.float64)
        values = values[values >= 1]
    assert len(np.unique(values)) > 10
    lib = _library_fit(values)
    assert ks_xmin(values) == lib.xmin
    fast, obj = fit_powerlaw(values, min_n=10)
    assert fast.status == "ok" and fast.xmin == lib.xmin
    assert fast.alpha == pytest.approx(lib.power_law.alpha, rel=1e-12)
    assert fast.sigma == pytest.approx(lib.power_law.standard_err, rel=1e-12)
    assert fast.ks_d == pytest.approx(lib.power_law.D, rel=1e-9)
    r, p = lib.distribution_compare("power_law", "lognormal", normalized_ratio=True)
    assert fast.loglikelihood_ratio == pytest.approx(r, rel=1e-9) and fast.p_value == pytest.approx(p, rel=1e-9)


# -- CCBC engines: the compiled pass (numba) against the sparse product and brute force ----------
_FIELDS = ("row", "rank", "col", "weighted", "naive", "shared_refs", "shared_citers", "cites", "cited_by")


def _assert_identical(x, y):
    for f in _FIELDS:
        gx, gy = getattr(x, f), getattr(y, f)
        assert gx.dtype == gy.dtype and np.array_equal(gx, gy), f


def _test_graph(kind: str, seed: int):
    """(adjacency, weights, rows) of a random graph: 'pareto' (power-law popularity, hubs), 'ties' (unit
    weights and a regular structure, so many pairs score exactly the same), 'corpus' (the benchmark's shape:
    every edge touches a corpus; hubs among both references and corpus papers)."""
    rng = np.random.default_rng(seed)
    if kind == "pareto":
        n = 1200
        pop = rng.pareto(1.2, n) + 1
        dst = np.minimum(np.searchsorted(np.cumsum(pop), rng.uniform(0, pop.sum(), 14000)), n - 1)
        a = adjacency(rng.integers(0, n, 14000), dst, n)
        indeg = np.asarray(a.sum(axis=0)).ravel()
        _, obj = fit_powerlaw(indeg, min_n=20)
        return a, survival_weights(indeg, obj), np.arange(0, n, 2)
    if kind == "ties":
        n = 600
        src = np.repeat(np.arange(n), 4)
        dst = (src + rng.choice([1, 2, 3, 5, 8, 13], size=len(src))) % n
        return adjacency(src, dst, n), np.ones(n), np.arange(n)
    from bench.graph import synthetic_edges

    n, nc = 5000, 300
    src, dst = synthetic_edges(n, nc, 40_000, seed=seed)
    perm = rng.permutation(n)
    a = adjacency(perm[src], perm[dst], n)
    indeg = np.bincount(a.indices, minlength=n)
    _, obj = fit_powerlaw(indeg, min_n=20)
    return a, survival_weights(indeg, obj), np.sort(perm[:nc])


@pytest.mark.parametrize("kind,seed", [("pareto", 4), ("pareto", 5), ("ties", 1), ("corpus", 2), ("corpus", 3)])
@pytest.mark.parametrize("hub_citers", [None, 3, 25])
def test_numba_engine_is_identical_to_the_sparse_product(kind, seed, hub_citers):
    """Same rows, ranks, columns, bit-identical scores and counts, whatever the blocks and threads."""
    a, w, rows = _test_graph(kind, seed)
    ref = related_top_k(a, w, rows, k=7, hub_citers=hub_citers, max_block_nnz=30_000, engine="sparse")
    assert len(ref) > 0
    for threads, block in [(1, 30_000), (3, 30_000), (2, 10**9)]:
        new = related_top_k(a, w, rows, k=7, hub_citers=hub_citers, max_block_nnz=block, engine="numba",
                            threads=threads)
        _assert_identical(ref, new)


def test_numba_engine_handles_rows_that_need_the_full_recomputation():
    # one hub-only paper: 0 cites only the hub 1, cited by 200 others that cite nothing else useful; the hub
    # slack of row 0 beats every light score, so the row is recomputed with hubs enumerated
    n = 400
    edges = [(0, 1)] + [(i, 1) for i in range(2, 250)] + [(i, i + 1) for i in range(250, 399)]
    e = np.array(edges)
    a = adjacency(e[:, 0], e[:, 1], n)
    w = np.linspace(1.0, 0.2, n)
    rows = np.array([0, 2, 3, 300])
    ref = related_top_k(a, w, rows, k=5, hub_citers=50, engine="sparse")
    new = related_top_k(a, w, rows, k=5, hub_citers=50, engine="numba", threads=2)
    _assert_identical(ref, new)
    assert (ref.row == 0).sum() == 5  # row 0 found its hub-sharing neighbours


def test_numba_engine_on_empty_and_isolated_rows():
    a = _graph([(0, 1), (2, 1)], 5)
    for rows in (np.array([], dtype=np.int64), np.array([3, 4]), np.array([0, 3])):
        _assert_identical(related_top_k(a, np.ones(5), rows, k=3, engine="sparse"),
                          related_top_k(a, np.ones(5), rows, k=3, engine="numba"))


def _brute_top_k(a, w, rows, k):
    """Every pair scored from Python sets with Eq. 1 / Eq. 3 (shared w summed in increasing id, as the
    product does), ranked by weighted desc, naive desc, id: the definition, with no candidate shortcut."""
    n = a.shape[0]
    refs = [set(a.indices[a.indptr[i]:a.indptr[i + 1]].tolist()) for i in range(n)]
    citers: list[set[int]] = [set() for _ in range(n)]
    for i in range(n):
        for j in refs[i]:
            citers[j].add(i)
    wref = [sum(w[j] for j in sorted(refs[i])) for i in range(n)]
    out = []
    for r in rows:
        scored = []
        for b in range(n):
            if b == r:
                continue
            sr = sorted(refs[r] & refs[b])
            sc = len(citers[r] & citers[b])
            cites, cited_by = b in refs[r], r in refs[b]
            if not (sr or sc or cites or cited_by):
                continue
            sw = 0.0
            for j in sr:
                sw += w[j]
            wt = (sw / max(wref[r] + wref[b] - sw, 1e-300) / 3.0
                  + w[r] * w[b] * (sc / max(len(citers[r]) + len(citers[b]) - sc, 1e-300)) / 3.0
                  + (cites * w[b] + cited_by * w[r]) / 6.0)
            nv = 0.4 * (0.5 * (cites or cited_by)
                        + len(sr) / max(len(refs[r]) + len(refs[b]) - len(sr), 1e-300)
                        + sc / max(len(citers[r]) + len(citers[b]) - sc, 1e-300))
            scored.append((-wt, -nv, b, len(sr), sc, cites, cited_by))
        scored.sort()
        out += [(int(r), rank + 1, s[2], -s[0], -s[1], s[3], s[4], s[5], s[6]) for rank, s in enumerate(scored[:k])]
    return out


@pytest.mark.parametrize("kind,seed", [("pareto", 6), ("ties", 2), ("corpus", 4)])
def test_numba_engine_matches_brute_force(kind, seed):
    a, w, rows = _test_graph(kind, seed)
    rows = rows[:40]
    got = related_top_k(a, w, rows, k=6, engine="numba", threads=2)
    want = _brute_top_k(a, w, rows, 6)
    assert [(int(r), int(k), int(c)) for r, k, c in zip(got.row, got.rank, got.col)] == [t[:3] for t in want]
    assert got.weighted.tolist() == pytest.approx([t[3] for t in want], rel=1e-12, abs=1e-15)
    assert got.naive.tolist() == pytest.approx([t[4] for t in want], rel=1e-12, abs=1e-15)
    assert got.shared_refs.tolist() == [t[5] for t in want] and got.shared_citers.tolist() == [t[6] for t in want]
    assert got.cites.tolist() == [t[7] for t in want] and got.cited_by.tolist() == [t[8] for t in want]
    # with hubs: the same related works and counts (scores within rounding: hub shares are summed apart)
    hub = related_top_k(a, w, rows, k=6, engine="numba", hub_citers=5)
    assert hub.col.tolist() == got.col.tolist() and hub.shared_refs.tolist() == got.shared_refs.tolist()
    assert np.allclose(hub.weighted, got.weighted, rtol=1e-12, atol=1e-15)

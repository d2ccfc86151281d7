"""PageRank of the citation graph with igraph (PRPACK), in this process or in a child process beside CCBC.

python-igraph holds the GIL while it builds a Graph and while PRPACK runs, and neither step uses a second core:
at 6M works / 60M citations that is about 60 s to build and 70 s to rank on a 2-vCPU host, during which nothing
else in the process can run. ``PageRankJob`` therefore starts a child process (``python -m
pipeline.steps.pagerank``) that receives the adjacency (CSR arrays on its stdin), builds the same Graph with the
same edges in the same order, runs the same ``pagerank`` call and writes the vector back, while the caller goes on
with the power-law fit and CCBC. The result is the one the caller would have computed itself, up to PRPACK's own
run-to-run rounding (its OpenMP sums are unordered: two calls on one Graph differ in the last bits; tested).

Small graphs stay in the process (``min_edges``): starting an interpreter that imports NumPy and igraph costs about
half a second, more than ranking a graph of a few million edges.
"""

from __future__ import annotations

import itertools
import json
import logging
import resource
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # the child process needs NumPy and igraph only
    import scipy.sparse as sp

log = logging.getLogger(__name__)

_EDGE_CHUNK = 1 << 20  # edges converted to Python ints at a time while igraph reads them


def igraph_from_adjacency(a: sp.csr_matrix):
    """Directed igraph Graph with vertex i = row i of ``a``, edges in row-major order."""
    return igraph_from_csr(a.indptr, a.indices, a.shape[0])


def igraph_from_csr(indptr: np.ndarray, indices: np.ndarray, n: int):
    """Directed igraph Graph of the CSR structure (``indptr``, ``indices``) over ``n`` vertices.

    igraph reads the edges as (int, int) pairs from an iterator that converts a million of them at a time: a
    list of 60M tuples would hold ~6 GB of Python objects, and handing igraph the (m, 2) NumPy array is about
    2x slower (it walks the rows as Python sequences)."""
    import igraph as ig

    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))

    def pairs():
        for lo in range(0, len(rows), _EDGE_CHUNK):
            yield zip(rows[lo:lo + _EDGE_CHUNK].tolist(), indices[lo:lo + _EDGE_CHUNK].tolist())

    return ig.Graph(n=n, edges=itertools.chain.from_iterable(pairs()), directed=True)


def pagerank(g, damping: float = 0.85) -> np.ndarray:
    """PageRank of every vertex (igraph's PRPACK; dangling works spread their rank uniformly)."""
    return np.asarray(g.pagerank(damping=damping, directed=True), dtype=np.float64)


def _peak_rss_gib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)  # Linux: KiB


def pagerank_of_csr(indptr: np.ndarray, indices: np.ndarray, n: int,
                    damping: float) -> tuple[np.ndarray, dict[str, float]]:
    """Build the Graph and rank it here; returns the vector and the seconds of each step."""
    t0 = time.perf_counter()
    g = igraph_from_csr(indptr, indices, n)
    t1 = time.perf_counter()
    pr = pagerank(g, damping)
    return pr, {"build_s": round(t1 - t0, 2), "pagerank_s": round(time.perf_counter() - t1, 2)}


class PageRankJob:
    """PageRank of ``a``, started now and collected with ``result()``; ``close()`` stops a child still running.

    In the process when ``a`` has fewer than ``min_edges`` edges (or ``min_edges`` is None): ``result()`` does the
    work. Otherwise a child process does it while the caller continues."""

    def __init__(self, a: sp.csr_matrix, damping: float, min_edges: int | None):
        self.a, self.damping = a, damping
        self.in_process = min_edges is None or a.nnz < min_edges
        self.info: dict[str, Any] = {"process": "this" if self.in_process else "child"}
        self._proc: subprocess.Popen | None = None
        if not self.in_process:
            self._start()

    def _start(self) -> None:
        a = self.a
        indptr = np.ascontiguousarray(a.indptr, dtype=np.int64)
        indices = np.ascontiguousarray(a.indices, dtype=np.int32 if a.shape[0] < 2**31 else np.int64)
        header = {"n": a.shape[0], "m": int(a.nnz), "indices": indices.dtype.str, "damping": self.damping}
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # read after the child ends: a full pipe would stall it
        self._proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._stderr)
        log.info("graph: PageRank of %d citations in a child process (pid %d), beside CCBC", a.nnz, self._proc.pid)

        def feed(stdin: IO[bytes]) -> None:
            try:
                stdin.write(json.dumps(header).encode() + b"\n")
                stdin.write(indptr.data.cast("B"))
                stdin.write(indices.data.cast("B"))
                stdin.close()
            except BrokenPipeError:  # the child died: result() reports its stderr
                pass

        assert self._proc.stdin is not None
        self._feeder = threading.Thread(target=feed, args=(self._proc.stdin,), name="pagerank-feed", daemon=True)
        self._feeder.start()

    def result(self) -> np.ndarray:
        if self.in_process:
            pr, seconds = pagerank_of_csr(self.a.indptr, self.a.indices, self.a.shape[0], self.damping)
            self.info.update(seconds)
            return pr
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        pr = np.empty(self.a.shape[0], dtype=np.float64)
        got = _read_into(proc.stdout, pr.data.cast("B"))
        rc = proc.wait()
        self._feeder.join()
        self._stderr.seek(0)
        err = self._stderr.read().decode(errors="replace").strip()
        self._stderr.close()
        if rc != 0 or got != pr.nbytes:
            raise RuntimeError(f"PageRank child process failed (exit status {rc}): {err[-2000:] or 'no output'}")
        try:  # the child's last line: its timings (anything it printed before is a warning)
            self.info.update(json.loads(err.splitlines()[-1]))
        except (IndexError, ValueError):
            log.warning("graph: the PageRank child process reported no timings: %s", err[-500:] or "no output")
        return pr

    def close(self) -> None:
        """Stop the child if it is still running (the caller failed before collecting the result)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()


def _read_into(f: IO[bytes], buf: memoryview) -> int:
    got = 0
    while got < len(buf):
        n = f.readinto(buf[got:])  # type: ignore[attr-defined]
        if not n:
            break
        got += n
    return got


def main() -> int:
    """Child: header line + CSR arrays on stdin -> PageRank (float64) on stdout, timings as JSON on stderr."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    header = json.loads(stdin.readline())
    n, m = int(header["n"]), int(header["m"])
    indptr = np.empty(n + 1, dtype=np.int64)
    indices = np.empty(m, dtype=np.dtype(header["indices"]))
    for arr in (indptr, indices):
        if _read_into(stdin, arr.data.cast("B")) != arr.nbytes:
            print("pagerank: the parent closed its pipe before sending the whole graph", file=sys.stderr)
            return 1
    pr, seconds = pagerank_of_csr(indptr, indices, n, float(header["damping"]))
    stdout.write(pr.data.cast("B"))
    stdout.flush()
    print(json.dumps({**seconds, "peak_rss_gib": _peak_rss_gib()}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

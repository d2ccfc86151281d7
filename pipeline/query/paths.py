"""Citation paths between two papers: every shortest path, following citations either way.

The citation graph is the catalog's ``citations`` table (citing work -> cited work) over ``works``
(corpus papers and the works outside the corpus that S2 listed as their references or citers). A path
from A to B is a chain of works where each consecutive pair is linked by a citation in either
direction; each hop says which way (``cites``: the earlier one cites the later one, ``cited_by``).

Search: a bidirectional breadth-first search in DuckDB, one bound-parameter query per level and side
(the smaller frontier grows first), so a query touches only the edges around the two frontiers and
needs neither igraph (not in the base install) nor the whole edge list in memory. Every shortest path
up to ``max_length`` hops is listed (at most ``limit``, in a stable order); none when the papers are
further apart than that.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from pipeline.errors import UnknownPaper, UserError
from pipeline.query import by_cited
from pipeline.warehouse import scalar

MAX_LENGTH = 8
DEFAULT_MAX_LENGTH = 4
DEFAULT_LIMIT = 20
MAX_LIMIT = 200


@dataclass
class Hop:
    work_id: str
    paper_id: str | None
    title: str | None
    year: int | None
    link: str | None = None  # how this hop is linked to the previous one: 'cites' (previous cites this) or 'cited_by'


@dataclass
class PathResult:
    source: str
    target: str
    max_length: int
    length: int | None  # hops of the shortest paths; None when none within max_length
    paths: list[list[Hop]] = field(default_factory=list)
    truncated: bool = False  # more shortest paths exist than were listed
    snapshot_id: str | None = None

    def to_dict(self) -> dict:
        return {"source": self.source, "target": self.target, "max_length": self.max_length, "length": self.length,
                "count": len(self.paths), "truncated": self.truncated, "snapshot_id": self.snapshot_id,
                "paths": [[asdict(h) for h in p] for p in self.paths]}


def _work_of(con, paper_id: str) -> tuple[str, str]:
    """(work_id, paper_id) for a corpus paper id, its unambiguous external id, or a work id (or what people paste for
    them: :func:`pipeline.query.records.resolve_ids`)."""
    pid = (paper_id or "").strip() if isinstance(paper_id, str) else ""
    if not pid:
        raise UserError("the paper id is empty")
    row = con.execute("SELECT work_id, paper_id FROM works WHERE paper_id = ? ORDER BY work_id LIMIT 1", [pid]).fetchone()
    if row:
        return row[0], row[1]
    ext = con.execute("SELECT paper_id FROM papers WHERE external_id = ?", [pid]).fetchall()
    if len(ext) == 1:
        row = con.execute("SELECT work_id, paper_id FROM works WHERE paper_id = ? ORDER BY work_id LIMIT 1",
                          [ext[0][0]]).fetchone()
        if row:
            return row[0], row[1]
    row = con.execute("SELECT work_id, paper_id FROM works WHERE work_id = ?", [pid]).fetchone()
    if row:
        return row[0], row[1] or row[0]
    known = scalar(con, "SELECT count(*) FROM papers WHERE paper_id = ? OR external_id = ?", [pid, pid])
    if known:  # a corpus paper that is not in the citation graph: no path, but not an unknown id
        row = con.execute("SELECT paper_id FROM papers WHERE paper_id = ? OR external_id = ? LIMIT 1", [pid, pid]).fetchone()
        return "", row[0]
    from pipeline.query.records import resolve_ids

    try:  # what people paste for it: arXiv:1706.03762, 1706.03762v5, an address, a DOI, a title
        (_, named), = resolve_ids(con, [pid])
    except UnknownPaper:
        raise UnknownPaper(f"unknown paper id {pid!r}") from None
    return _work_of(con, named)


def _expand(con, frontier: list[str]) -> list[tuple[str, str, str]]:
    """(from, to, link) for every citation touching the frontier: link is 'cites' when ``from`` cites ``to``."""
    rows = by_cited.execute(con, """
        SELECT citing_work_id, cited_work_id, 'cites' FROM citations WHERE citing_work_id IN (SELECT unnest(?::VARCHAR[]))
        UNION ALL
        SELECT cited_work_id, citing_work_id, 'cited_by' FROM {cited_by} WHERE cited_work_id IN (SELECT unnest(?::VARCHAR[]))
    """, [frontier, frontier]).fetchall()
    return [(a, b, link) for a, b, link in rows if a != b]


def shortest_paths(con, source: str, target: str, max_length: int = DEFAULT_MAX_LENGTH,
                   limit: int = DEFAULT_LIMIT) -> PathResult:
    """Every shortest citation path (either direction) from ``source`` to ``target`` of at most
    ``max_length`` hops (at most ``limit`` of them). UnknownPaper for an id the catalog does not know."""
    if not isinstance(max_length, int) or not 1 <= max_length <= MAX_LENGTH:
        raise UserError(f"max length must be between 1 and {MAX_LENGTH}, got {max_length!r}")
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise UserError(f"limit must be between 1 and {MAX_LIMIT}, got {limit!r}")
    a_work, a_pid = _work_of(con, source)
    b_work, b_pid = _work_of(con, target)
    res = PathResult(source=a_pid, target=b_pid, max_length=max_length, length=None)
    if not a_work or not b_work:
        return res
    if a_work == b_work:
        res.length = 0
        res.paths = [_hops(con, [a_work], {})]
        return res

    # dist and predecessors per side; pred[side][node] = [(neighbour one step closer to that side's root, link)]
    dist = [{a_work: 0}, {b_work: 0}]
    pred: list[dict[str, list[tuple[str, str]]]] = [{a_work: []}, {b_work: []}]
    frontier = [[a_work], [b_work]]
    depth = [0, 0]
    meet: set[str] = set()
    while depth[0] + depth[1] < max_length and frontier[0] and frontier[1]:
        side = 0 if len(frontier[0]) <= len(frontier[1]) else 1
        new: list[str] = []
        for frm, to, link in _expand(con, frontier[side]):
            d = depth[side] + 1
            if to not in dist[side]:
                dist[side][to] = d
                pred[side][to] = []
                new.append(to)
            if dist[side][to] == d and (frm, link) not in pred[side][to]:
                pred[side][to].append((frm, link))
        depth[side] += 1
        frontier[side] = sorted(set(new))
        meet = set(dist[0]) & set(dist[1])
        if meet:
            break
    if not meet:
        return res
    length = min(dist[0][m] + dist[1][m] for m in meet)
    res.length = length

    def to_root(side: int, node: str) -> list[list[tuple[str, str | None]]]:
        """Chains node -> root of ``side`` as [(node, link from the next node towards the root)]."""
        if not pred[side][node]:
            return [[(node, None)]]
        out = []
        for p, link in sorted(pred[side][node]):
            for chain in to_root(side, p):
                out.append([(node, link)] + chain)
                if len(out) > MAX_LIMIT:
                    return out
        return out

    seen: set[tuple[str, ...]] = set()
    found: list[tuple[list[str], dict]] = []
    for m in sorted(x for x in meet if dist[0][x] + dist[1][x] == length):
        for left in to_root(0, m):  # m .. A, link = how chain[i+1] relates to chain[i] as seen from A's side
            for right in to_root(1, m):  # m .. B
                nodes = [n for n, _ in reversed(left)] + [n for n, _ in right[1:]]
                key = tuple(nodes)
                if key in seen:
                    continue
                seen.add(key)
                links: dict[int, str | None] = {}
                # A's side: a node's pred link says how the previous node relates to it ('cites': previous cites it)
                rev = list(reversed(left))
                for i in range(1, len(rev)):
                    links[i] = rev[i][1]
                # from B's side: pred of right[j] is right[j+1] with link as seen from right[j+1]:
                # 'cites' means right[j+1] cites right[j], i.e. on the A->B walk node right[j] cites right[j+1]
                for j in range(len(right) - 1):
                    links[len(rev) + j] = "cites" if right[j][1] == "cited_by" else "cited_by"
                found.append((nodes, links))
    found.sort(key=lambda x: x[0])
    res.truncated = len(found) > limit
    res.paths = [_hops(con, nodes, links) for nodes, links in found[:limit]]
    return res


def _hops(con, nodes: list[str], links: dict[int, str]) -> list[Hop]:
    rows = con.execute("""
        SELECT w.work_id, w.paper_id, COALESCE(p.title, w.title), COALESCE(p.year, w.year)
        FROM works w LEFT JOIN papers p ON p.paper_id = w.paper_id WHERE w.work_id IN (SELECT unnest(?::VARCHAR[]))
    """, [nodes]).fetchall()
    info = {r[0]: r for r in rows}
    return [Hop(work_id=n, paper_id=info.get(n, (n, None))[1], title=info.get(n, (n, None, None))[2],
                year=info.get(n, (n, None, None, None))[3], link=links.get(i)) for i, n in enumerate(nodes)]

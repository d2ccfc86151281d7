"""The thin query module: read a published snapshot and search it (imports nothing from the crawlers or Airflow).

    from pipeline.query import open_snapshot, Searcher, Filters
    snap = open_snapshot(settings)                 # CURRENT, or open_snapshot(settings, "20260101T000000Z")
    s = Searcher(snap, settings)
    resp = s.search("citation analysis", k=10, filters=Filters(year_from=2020))
    for r in resp.results: print(r.rank, r.paper_id, r.score, r.signals)
"""

from pipeline.errors import UnknownPaper, UserError
from pipeline.query.filters import Filters
from pipeline.query.results import Related, Result, SearchResponse
from pipeline.query.search import Searcher
from pipeline.query.snapshot import Snapshot, open_snapshot

__all__ = ["open_snapshot", "Snapshot", "Searcher", "Filters", "Result", "Related", "SearchResponse", "UserError", "UnknownPaper"]

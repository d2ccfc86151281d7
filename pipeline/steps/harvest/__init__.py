"""The arXiv harvest step: OAI-PMH -> raw zone -> staging Parquet -> DuckDB.

``run_harvest`` (``paperkb harvest``) fetches the ``ListRecords`` list from the watermark (or
``--from``/``--until``), page by page. Each page is stored in the raw zone and then the resumption
token is checkpointed (table ``harvest_checkpoints``), so a killed harvest resumes with the next
page. When the list is complete its pages are parsed from the raw zone into staging Parquet parts
(``harvest_batch_records`` records each) and merged part by part into ``papers``, ``authors``,
``paper_authors`` and ``versions``, with a commit and a DuckDB checkpoint after about every
``harvest_commit_records`` records (default 10,000), so memory stays flat however big the run is.
A part holds every row of its papers, so a paper's row, versions and authors always land in the
same commit. The rejects, the new watermark and the checkpoint's ``merged`` status land only in the
last commit: a run killed in between leaves whole earlier batches and an unmoved watermark, and the
rerun (which resumes the fetched list) skips those batches as unchanged.
``harvest_commit_records=0`` merges the whole run in one transaction instead (a killed run leaves
the tables exactly as they were, but DuckDB holds the whole run in memory).

``run_lookup`` (``paperkb lookup ID...``) fetches given ids through the arXiv API and merges them
the same way. ``run_harvest(replay=True)`` re-parses every arXiv response in the raw zone (OAI
pages and API feeds, in the order they were fetched) without the network.

Idempotent: rows identical to the stored ones are not rewritten, so a rerun over the same raw
data reports 0 papers written.

Layout::

    load.py         raw responses -> staging Parquet parts -> merged part by part (batched commits); the connection
    checkpoints.py  the checkpoint of the OAI-PMH list being fetched
    run.py          run_harvest, run_lookup and the one line they print
"""

from pipeline.steps.harvest.checkpoints import Checkpoint
from pipeline.steps.harvest.load import LoadStats, build_tables
from pipeline.steps.harvest.run import RAW_SOURCE, WATERMARK_SOURCE, run_harvest, run_lookup, summary_line

__all__ = ["Checkpoint", "LoadStats", "RAW_SOURCE", "WATERMARK_SOURCE", "build_tables", "run_harvest", "run_lookup",
           "summary_line"]

"""The steps: ``run_harvest`` (the OAI-PMH list from the watermark, or a replay of the raw zone) and ``run_lookup``
(given ids through the arXiv API), and the one line each prints."""

from __future__ import annotations

import logging
from datetime import date, datetime, timezone
from hashlib import sha1
from typing import Any, Iterable

from pipeline import progress
from pipeline.dates import parse_day
from pipeline.errors import StepFailed, UserError
from pipeline.raw import RawEntry, RawZone
from pipeline.settings import Settings
from pipeline.sources.arxiv.ids import parse_arxiv_id
from pipeline.sources.arxiv.records import ApiErrorFeed, MalformedResponse
from pipeline.steps.harvest.checkpoints import Checkpoint
from pipeline.steps.harvest.load import _Loader, _open
from pipeline.warehouse import RunLog, Warehouse
from pipeline.writer_lock import writes

log = logging.getLogger(__name__)


WATERMARK_SOURCE = "arxiv_oai"
RAW_SOURCE = "arxiv"
# OAI error codes the user can fix by changing a setting or an argument
_USER_FIXABLE = {"badArgument", "cannotDisseminateFormat", "noSetHierarchy"}


def summary_line(s: dict[str, Any]) -> str:
    """The one line the CLI prints (and run_log.message keeps)."""
    parts = [f"{s['step']}{' (replay)' if s.get('mode') == 'replay' else ''}:"]
    if s["step"] == "lookup":
        parts.append(f"{s.get('requested', 0)} ids asked, {s.get('found', 0)} found")
        if s.get("missing"):
            parts.append(f"missing {', '.join(s['missing'][:10])}{' ...' if len(s['missing']) > 10 else ''}")
    else:
        parts.append(f"{s.get('pages', 0)} pages")
    parts.append(f"{s.get('records_in', 0)} records in")
    parts.append(f"{s.get('papers_written', 0)} papers written ({s.get('papers_new', 0)} new, "
                 f"{s.get('papers_updated', 0)} updated)")
    if s.get("skipped_category"):
        parts.append(f"{s['skipped_category']} outside {','.join(s.get('categories', []))}")
    parts.append(f"{s.get('rejected', 0)} rejected")
    if s.get("oai_error"):
        parts.append(f"arXiv said {s['oai_error']}")
    if s.get("step") == "harvest" and s.get("mode") != "replay":
        parts.append(f"watermark {s.get('watermark') or 'unset'}"
                     + ("" if s.get("watermark_moved") else " (not moved)"))
    return ", ".join(parts).replace(":,", ":")


def _count_into(run: RunLog, summary: dict[str, Any]) -> None:
    for k in ("pages", "records_in", "papers_written", "papers_new", "papers_updated", "authors_new",
              "versions_written", "skipped_category", "rejected"):
        run.count(k, int(summary.get(k) or 0))


@writes("harvest")
def run_harvest(settings: Settings, from_date: str | date | None = None, until_date: str | date | None = None,
                replay: bool = False) -> dict[str, Any]:
    """Harvest arXiv metadata into the warehouse (see module doc). Returns a JSON-able summary."""
    from_day, until_day = parse_day(from_date, "--from"), parse_day(until_date, "--until")
    first = from_day.isoformat() if from_day else None
    last = until_day.isoformat() if until_day else None
    if first and last and last < first:
        raise UserError(f"--until {last} is before --from {first}")
    with _open(settings) as wh:
        if replay:
            return _replay(settings, wh)
        return _harvest(settings, wh, first, last)


def _replay(settings: Settings, wh: Warehouse) -> dict[str, Any]:
    raw = RawZone(settings.raw_dir)
    entries = [e for e in raw.entries(RAW_SOURCE)
               if e.path.startswith(f"{RAW_SOURCE}/oai/") or e.path.startswith(f"{RAW_SOURCE}/api/")]
    with wh.run("harvest") as run:
        loader = _Loader(settings, run, settings.categories)
        with progress.task("harvest: re-parsing the raw arXiv responses", total=len(entries), unit="files") as bar:
            pending: list[str] = []  # consecutive OAI pages, parsed together (in parallel if configured)
            for e in entries:
                if e.path.startswith(f"{RAW_SOURCE}/oai/"):
                    pending.append(e.path)
                    continue
                loader.add_oai_pages(raw, pending)
                bar.advance(len(pending))
                pending = []
                loader.add_api_feed(raw, e.path)
                bar.advance()
            loader.add_oai_pages(raw, pending)
            bar.advance(len(pending))
            loader.flush()
            bar.stage("harvest: loading the warehouse")
            with wh.transaction():
                loader.merge(wh)
        loader.cleanup()
        summary = {"step": "harvest", "mode": "replay", "run_id": run.run_id, "categories": list(settings.categories),
                   "raw_files": len(entries), **loader.summary()}
        _count_into(run, summary)
        run.message = summary_line(summary)
    log.info(summary["run_id"] + ": " + run.message)
    return summary


def _harvest(settings: Settings, wh: Warehouse, from_arg: str | None, until_date: str | None) -> dict[str, Any]:
    from pipeline.sources.arxiv.client import ArxivClient, ArxivUnavailable, HttpStatusError

    old_watermark = wh.get_watermark(WATERMARK_SOURCE)
    from_date = from_arg or old_watermark
    raw = RawZone(settings.raw_dir)
    with wh.run("harvest", interval=(from_date, until_date)) as run:
        cp = Checkpoint.open_for(wh, settings, from_date, until_date)
        resumed = cp is not None
        if cp is None:
            cp = Checkpoint.new(settings, from_date, until_date, run.run_id)
            cp.save(wh)
        else:
            log.info("resuming harvest %s after page %d (%s)", cp.harvest_id, cp.pages_done, cp.status)
        oai_error: str | None = None
        restarts = 0
        list_truncated = False
        client = ArxivClient(settings, raw)
        try:
            with progress.task(f"harvest: arXiv {settings.oai_set or 'all'} from {from_date or 'the start'}",
                               unit="records") as bar:
                bar.update(completed=cp.records_seen, total=cp.complete_list_size)
                while cp.status == "listing":
                    n = cp.pages_done + 1
                    if cp.resumption_token:
                        params: dict[str, Any] = {"verb": "ListRecords", "resumptionToken": cp.resumption_token}
                    else:
                        params = {"verb": "ListRecords", "metadataPrefix": cp.metadata_prefix}
                        if cp.oai_set:
                            params["set"] = cp.oai_set
                        if cp.from_date:
                            params["from"] = cp.from_date
                        if cp.until_date:
                            params["until"] = cp.until_date
                    try:
                        _entry, page = client.oai_page(params, cp.page_relpath(n))
                    except MalformedResponse as exc:
                        # stored in the raw zone; without its token the list cannot go on. The pages
                        # before it are loaded, this one is rejected, the watermark stays.
                        log.warning("page %d of the list is not well-formed after retries (%s)", n, exc)
                        cp.pages_done, cp.status, list_truncated = n, "fetched", True
                        cp.save(wh)
                        break
                    except ArxivUnavailable as exc:
                        raise StepFailed(f"{exc}. {cp.pages_done} pages are stored; run again to resume.") from exc
                    except HttpStatusError as exc:
                        raise UserError(f"arXiv OAI-PMH at {settings.arxiv_oai_url} answered {exc}: "
                                        "check PAPERKB_ARXIV_OAI_URL") from exc
                    if page.error_code == "badResumptionToken" and cp.resumption_token:
                        restarts += 1
                        if restarts > settings.oai_max_restarts:
                            raise StepFailed(f"arXiv refused the resumption token {restarts} times; "
                                             f"stopped (pages kept in raw/arxiv/{cp.raw_dir})")
                        log.warning("arXiv refused resumption token %r; restarting the list from %s",
                                    cp.resumption_token, from_date or "the start")
                        cp.status = "restarted"
                        cp.save(wh)
                        cp = Checkpoint.new(settings, from_date, until_date, run.run_id)
                        cp.save(wh)
                        continue
                    if page.error_code == "noRecordsMatch":
                        oai_error = page.error_code  # an empty list: a successful, empty harvest
                        cp.pages_done, cp.status, cp.resumption_token = n, "fetched", None
                        if n == 1:
                            cp.response_date = page.response_date
                        cp.save(wh)
                        break
                    if page.error_code:
                        msg = f"arXiv OAI-PMH error {page.error_code}: {page.error_message}"
                        if page.error_code in _USER_FIXABLE:
                            raise UserError(msg + " (check --from/--until and the oai_set / oai_metadata_prefix settings)")
                        raise StepFailed(msg)
                    cp.pages_done = n
                    cp.records_seen += len(page.records) + len(page.rejects) + page.deleted
                    if n == 1:
                        cp.response_date = page.response_date
                    if page.complete_list_size is not None:
                        cp.complete_list_size = page.complete_list_size
                    cp.resumption_token = page.resumption_token or None
                    if not cp.resumption_token:
                        cp.status = "fetched"
                    cp.save(wh)
                    bar.update(completed=cp.records_seen, total=cp.complete_list_size)
        finally:
            client.close()

        # ---- parse the list's pages from the raw zone and merge them (batched commits, see _Loader.merge) ----
        loader = _Loader(settings, run, settings.categories)
        with progress.task(f"harvest: parsing {cp.pages_done} page(s)") as bar:
            loader.add_oai_pages(raw, [f"{RAW_SOURCE}/{cp.page_relpath(n)}" for n in range(1, cp.pages_done + 1)])
            new_watermark = None
            move = loader.stats.rejected_pages == 0 and not list_truncated
            if move:
                candidate = until_date or (cp.response_date or "")[:10] or None
                if candidate:
                    new_watermark = max(candidate, old_watermark) if old_watermark else candidate
            bar.stage("harvest: loading the warehouse")
            with wh.transaction():
                loader.merge(wh)
                if new_watermark and new_watermark != old_watermark:
                    wh.set_watermark(WATERMARK_SOURCE, new_watermark, run_id=run.run_id)
                cp.status = "merged"
                cp.save(wh)
        loader.cleanup()
        summary = {
            "step": "harvest", "mode": "network", "run_id": run.run_id, "harvest_id": cp.harvest_id,
            "from": from_date, "until": until_date, "resumed": resumed, "restarts": restarts, "oai_error": oai_error,
            "categories": list(settings.categories), **loader.summary(),
            "watermark": new_watermark or old_watermark, "watermark_moved": bool(new_watermark and new_watermark != old_watermark),
        }
        _count_into(run, summary)
        run.message = summary_line(summary)
    log.info(summary["run_id"] + ": " + run.message)
    return summary


@writes("lookup")
def run_lookup(settings: Settings, ids: Iterable[str]) -> dict[str, Any]:
    """Fetch the given arXiv ids through the arXiv API (Atom, ``id_list``) and merge them.

    Every category is kept (the ids were asked for explicitly). Ids arXiv does not know are
    reported as ``missing``; an id arXiv calls malformed raises ``UserError``."""
    from pipeline.sources.arxiv.client import ArxivClient, ArxivUnavailable, HttpStatusError

    asked = [i.strip() for i in ids if i and i.strip()]
    if not asked:
        raise UserError("give at least one arXiv id, e.g. paperkb lookup 2104.12255 astro-ph/0601001")
    raw = RawZone(settings.raw_dir)
    with _open(settings) as wh, wh.run("lookup") as run:
        fetched: list[RawEntry] = []
        with ArxivClient(settings, raw) as client:
            size = settings.arxiv_api_batch
            for start in range(0, len(asked), size):
                chunk = asked[start:start + size]
                now = datetime.now(timezone.utc)
                relpath = f"api/{now:%Y%m%d}/{now:%H%M%S%f}-{sha1(','.join(chunk).encode()).hexdigest()[:10]}.xml"
                try:
                    entry, _feed = client.api_id_list(chunk, relpath)
                except ApiErrorFeed as exc:
                    raise UserError(f"arXiv API refused the request: {exc}") from exc
                except HttpStatusError as exc:
                    raise UserError(f"arXiv API at {settings.arxiv_api_url} answered {exc}: check PAPERKB_ARXIV_API_URL") from exc
                except MalformedResponse as exc:
                    raise StepFailed(f"arXiv API answered with a broken feed ({exc}); it is kept in raw/{RAW_SOURCE}/{relpath}") from exc
                except ArxivUnavailable as exc:
                    raise StepFailed(str(exc)) from exc
                fetched.append(entry)
        loader = _Loader(settings, run, ["*"], collect_ids=True)
        for entry in fetched:
            loader.add_api_feed(raw, entry.path)
        with wh.transaction():
            loader.merge(wh)
        loader.cleanup()
        found = set(loader.stats.paper_ids)
        missing = []
        for a in asked:
            try:
                pid = parse_arxiv_id(a).paper_id
            except ValueError:
                pid = a
            if pid not in found:
                missing.append(a)
        summary = {"step": "lookup", "mode": "network", "run_id": run.run_id, "requested": len(asked),
                   "found": len(found), "missing": missing, "paper_ids": sorted(found), **loader.summary()}
        _count_into(run, summary)
        run.message = summary_line(summary)
    log.info(summary["run_id"] + ": " + run.message)
    return summary

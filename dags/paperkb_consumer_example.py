"""
# paperkb consumer example

Runs whenever `paperkb_nightly` publishes a new snapshot (the `paperkb_snapshot` asset). It shows how
a downstream team hooks into paperkb: read the snapshot id from the asset event, open that snapshot
(pinned, so a newer publish cannot change it under you), check its manifest and run a smoke query.
Copy it and replace `smoke_search` with your own job (export, index sync, report...).
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import Asset, Param, dag, task

SNAPSHOT = Asset(name="paperkb_snapshot", uri="x-paperkb://snapshots/current", group="paperkb")


@dag(
    dag_id="paperkb_consumer_example",
    schedule=[SNAPSHOT],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={"query": Param("neural networks", type="string", description="smoke query run on each new snapshot")},
    tags=["paperkb", "example"],
    doc_md=__doc__,
)
def paperkb_consumer_example():
    @task
    def snapshot_manifest(triggering_asset_events=None) -> dict:
        """
        ### snapshot_manifest
        Resolves the snapshot named in the triggering asset event (CURRENT when triggered by hand)
        and returns its manifest: id, counts, model.
        """
        from pipeline import snapshots
        from pipeline.settings import Settings

        snapshot_id = None
        for event in (triggering_asset_events or {}).get(SNAPSHOT, []):
            snapshot_id = (event.extra or {}).get("snapshot_id") or snapshot_id
        path = snapshots.resolve(Settings.load().snapshots_dir, snapshot_id)
        manifest = snapshots.read_manifest(path)
        return {"snapshot_id": manifest.get("snapshot_id", path.name), "counts": manifest.get("counts", {}),
                "model": manifest.get("model", {})}

    @task
    def smoke_search(manifest: dict, params=None) -> list[dict]:
        """
        ### smoke_search
        Opens the same snapshot read-only and searches it, the way an app without Airflow would.
        """
        from pipeline.query import Searcher, open_snapshot
        from pipeline.settings import Settings

        settings = Settings.load()
        snap = open_snapshot(settings, manifest["snapshot_id"])
        resp = Searcher(snap, settings).search(params["query"], k=5)
        return [{"paper_id": r.paper_id, "title": r.title, "score": round(float(r.score), 4)} for r in resp.results]

    smoke_search(snapshot_manifest())  # type: ignore[arg-type]  # TaskFlow passes an XComArg: the dict at run time


paperkb_consumer_example()

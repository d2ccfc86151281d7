"""Operations: snapshots, serve, mcp, the DAG folder, the replay server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from pipeline.errors import UserError

from pipeline.cli.console import echo
from pipeline.cli.root import app, get_settings

PANEL = "Operations"


snapshots_app = typer.Typer(help="List, verify and roll back published snapshots.", no_args_is_help=True)
app.add_typer(snapshots_app, name="snapshots", rich_help_panel=PANEL)


@snapshots_app.command("list")
def snapshots_list(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON."),
                   store: Optional[str] = typer.Option(None, "--store", help="List a snapshot store's instead "
                                                       "(s3://bucket/prefix; docs/object-storage.md).")) -> None:
    """Published snapshots, oldest first; * marks CURRENT; status ok or damaged (what is wrong), and who pins it."""
    import json as _json

    from pipeline.snapshots import list_snapshots

    settings = get_settings(ctx)  # an invalid setting is one line, whatever is listed
    if store is not None:
        from pipeline.store.listing import list_store

        rows = list_store(store)
    else:
        rows = list_snapshots(settings)
    if as_json:
        typer.echo(_json.dumps(rows, indent=1))
        return
    if not rows:
        echo("no snapshots published yet (run `paperkb publish`)")
    for r in rows:
        c = r["counts"]
        size = f"{r['bytes'] / 1e6:.1f} MB" if r.get("bytes") else "? MB"
        created = (r["created_at"] or "?")[:16].replace("T", " ")
        status = f"damaged: {r['problems'][0]}" if r.get("problems") else "ok"
        pinned = f"; pinned by {'; '.join(r['pinned_by'])}" if r.get("pinned_by") else ""
        echo(f"{'*' if r['current'] else ' '} {r['snapshot_id']}  {created}  {c.get('lancedb.papers', c.get('papers', 0))} papers  "
             f"{c.get('lancedb.chunks', 0)} passages  {size}", indent="    ")
        added = f"{r['bytes_new'] / 1e6:.1f} MB new; " if r.get("bytes_new") is not None else ""  # beside the one before
        echo(f"    {status}; {added}{r['model']}{pinned}", indent="      ")


@snapshots_app.command("rollback")
def snapshots_rollback(ctx: typer.Context, snapshot_id: str = typer.Argument(..., help="Snapshot id to make CURRENT.")) -> None:
    """Point CURRENT at an earlier snapshot (verified by checksum first)."""
    from pipeline.snapshots import rollback

    r = rollback(get_settings(ctx), snapshot_id)
    echo(f"rollback: CURRENT is {r['snapshot_id']} (was {r['previous'] or 'none'})")


@snapshots_app.command("verify")
def snapshots_verify(ctx: typer.Context, snapshot_id: Optional[str] = typer.Argument(None, help="Snapshot id (default CURRENT).")) -> None:
    """Re-hash every file of a snapshot against its manifest; exit 2 on any mismatch."""
    from pipeline.snapshots import read_manifest, resolve, verify

    settings = get_settings(ctx)
    path = resolve(settings, snapshot_id)
    problems = verify(settings, path=path)
    if problems:
        raise UserError(f"snapshot {path.name}: {len(problems)} problem(s): {'; '.join(problems[:3])}")
    echo(f"verify: snapshot {path.name} intact ({len(read_manifest(path)['files'])} files)")


@snapshots_app.command("push")
def snapshots_push(ctx: typer.Context, snapshot_id: Optional[str] = typer.Argument(None, help="Snapshot id (default CURRENT).")) -> None:
    """Upload a published snapshot to PAPERKB_SNAPSHOT_STORE (the objects it lacks) and make it the store's CURRENT."""
    from pipeline import writer_lock
    from pipeline.snapshots import resolve
    from pipeline.store.push import push

    settings = get_settings(ctx)
    with writer_lock.hold(settings.warehouse, "snapshots push"):
        r = push(settings, resolve(settings, snapshot_id))
    echo(f"push: {r['snapshot_id']} is CURRENT in {r['store']}: {r['objects_uploaded']} of {r['objects']} objects "
         f"uploaded ({r['bytes_uploaded'] / 1e6:.1f} MB) in {r['requests']} requests")


@app.command("dags-folder", rich_help_panel=PANEL)
def dags_folder() -> None:
    """Print the folder of the installed DAG files and pools.json (for AIRFLOW__CORE__DAGS_FOLDER)."""
    from pipeline.settings import DAGS_DIR

    print(DAGS_DIR)


@app.command("replay-server", rich_help_panel=PANEL)
def replay_server(
    data: Path = typer.Argument(..., help="The recorded data folder (arxiv/ and s2/ inside, e.g. shared/data)."),
    host: str = typer.Option("127.0.0.1", help="Address to bind (0.0.0.0: reachable from the other hosts)."),
    port: int = typer.Option(8765, min=0, max=65535, help="Port (0: any free one)."),
) -> None:
    """Serve the recorded arXiv/S2 answers; prints the `export PAPERKB_...` lines that point paperkb at it."""
    from pipeline.replay_server import serve_until_interrupted

    serve_until_interrupted(data, host, port, echo=lambda line: print(line, flush=True), started=lambda url: echo(
        f"paperkb: replaying the recorded arXiv/S2 data in {data} at {url}; Ctrl-C stops", err=True))




@app.command(rich_help_panel=PANEL)
def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback unless told otherwise)."),
    port: int = typer.Option(8000, min=1, max=65535, help="Port."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Pin a snapshot id instead of following CURRENT; "
                                            "s3://bucket/prefix follows a store's CURRENT (s3://bucket/prefix@ID: one snapshot)."),
    workers: int = typer.Option(1, min=1, max=64, help="Server processes, each with its own copy of the model and in-memory vectors (CISI on 2 cores: 90 requests/s with 1, 120 with 2)."),
) -> None:
    """Serve the HTTP API and the search page over the published snapshot (read-only)."""
    import os

    import uvicorn

    from pipeline.query import open_snapshot
    from pipeline.serve import create_app
    from pipeline.serve.bind import check_listen

    settings = get_settings(ctx)
    check_listen(host, port)  # a port in use: one line, exit 2 (uvicorn would log it and exit 3)
    from pipeline.serve.multi_holder import split_specs

    several = split_specs(settings.serve_snapshots)
    if len(several) > 1:  # PAPERKB_SERVE_SNAPSHOTS: fail early on an index that cannot be opened
        from pipeline.query.multi import open_multi

        open_multi(settings, several).close()
    else:
        open_snapshot(settings, snapshot, pin=False)  # fail early, one line, when there is nothing (intact) to serve
    from pipeline.store.url import is_store_url

    echo(f"paperkb: serving {snapshot if is_store_url(snapshot) else settings.snapshots_dir} on http://{host}:{port}/ (API docs at /docs) once the "
         "snapshot and the query model are loaded")
    try:
        if workers == 1:
            uvicorn.run(create_app(settings, snapshot), host=host, port=port, log_level="warning")
            return
        # Worker processes rebuild the app from the environment, so hand them the resolved settings.
        os.environ["PAPERKB_WAREHOUSE"] = str(settings.warehouse.resolve())
        os.environ["PAPERKB_SERVE_SNAPSHOT"] = snapshot or ""
        uvicorn.run("pipeline.serve.app:create_app_from_env", factory=True, host=host, port=port, workers=workers,
                    log_level="warning")
    except SystemExit as exc:  # uvicorn could not start: taken while the snapshot was loading?
        if exc.code in (0, None):
            raise
        check_listen(host, port)
        raise


@app.command(rich_help_panel=PANEL)
def mcp(
    ctx: typer.Context,
    transport: str = typer.Option("stdio", "--transport", help="stdio (an agent host starts this command) | http "
                                  "(streamable HTTP at /mcp, for remote agents)."),
    host: str = typer.Option("127.0.0.1", help="HTTP: address to bind (loopback unless told otherwise; other Host "
                             "names need PAPERKB_SERVE_ALLOWED_HOSTS)."),
    port: int = typer.Option(8001, min=1, max=65535, help="HTTP: port."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Pin a snapshot id instead of following CURRENT."),
) -> None:
    """MCP server for LLM agents over the published snapshot (read-only): search, papers, passages, citations, exports."""
    from pipeline.query import open_snapshot

    settings = get_settings(ctx)
    if transport not in ("stdio", "http"):
        raise UserError(f"--transport must be stdio or http, got {transport!r}")
    from pipeline.agents import server  # needs the [mcp] install profile (a missing `mcp`: one line naming it)

    open_snapshot(settings, snapshot, pin=False)  # fail early, one line, when there is nothing (intact) to serve
    if transport == "stdio":
        # stdout is the protocol's: say anything on stderr
        print(f"paperkb: MCP server over stdio on {settings.snapshots_dir} (snapshot {snapshot or 'CURRENT'})",
              file=sys.stderr, flush=True)
        server.run_stdio(settings, snapshot)
        return
    from pipeline.serve.bind import check_listen

    check_listen(host, port)
    echo(f"paperkb: MCP server on http://{host}:{port}{server.HTTP_PATH} over {settings.snapshots_dir} once the "
         "snapshot and the query model are loaded")
    server.run_http(settings, snapshot, host, port)

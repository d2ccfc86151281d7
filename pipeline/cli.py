"""The ``paperkb`` command.

``paperkb [--warehouse DIR] COMMAND``. Heavy imports live inside each command so ``--help`` is fast.
User errors (``pipeline.errors.UserError``) print one line and exit with code 2.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Optional

import typer

from pipeline.errors import UserError
from pipeline.settings import Settings

app = typer.Typer(
    name="paperkb",
    help="Nightly arXiv + Semantic Scholar pipeline and hybrid search over published snapshots.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root(
    ctx: typer.Context,
    warehouse: Optional[Path] = typer.Option(None, "--warehouse", help="Data root (env PAPERKB_WAREHOUSE, default ./warehouse)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging."),
) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    ctx.obj = {"warehouse": warehouse}


def get_settings(ctx: typer.Context, **overrides) -> Settings:
    """Settings from the environment, overridden by the global flags and the command's flags."""
    obj = ctx.find_root().obj or {}
    return Settings.load(warehouse=obj.get("warehouse"), **overrides)


# ==== harvest (issue 2) ==========================================================================

# ==== enrich (issue 3) ===========================================================================

# ==== fulltext (issue 4) =========================================================================

# ==== graph + collections (issue 5) ==============================================================

# ==== embed + publish + snapshots (issue 6) ======================================================

# ==== search, related, eval (issue 7) ============================================================

# ==== refresh (issue 8) ==========================================================================

# ==== serve (issue 9) ============================================================================


@app.command()
def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", help="Address to bind (loopback unless told otherwise)."),
    port: int = typer.Option(8000, min=1, max=65535, help="Port."),
    snapshot: Optional[str] = typer.Option(None, "--snapshot", help="Pin a snapshot id instead of following CURRENT."),
) -> None:
    """Serve the HTTP API and the search page over the published snapshot (read-only)."""
    import uvicorn

    from pipeline import snapshots
    from pipeline.serve import create_app

    settings = get_settings(ctx)
    snapshots.resolve(settings.snapshots_dir, snapshot)  # fail early, one line, when there is nothing to serve
    typer.echo(f"paperkb: serving {settings.snapshots_dir} on http://{host}:{port}/ (API docs at /docs)")
    uvicorn.run(create_app(settings, snapshot), host=host, port=port, log_level="warning")


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; usage errors (click) and ``UserError`` exit 2 with one line, no traceback."""
    try:
        app(args=argv, prog_name="paperkb")  # standalone: click prints usage errors and exits 2
    except UserError as exc:
        print(f"paperkb: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("paperkb: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The typer application, its global options, and what several command groups share (settings,
categories, export formats)."""

from __future__ import annotations

import inspect
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

VERBOSE = {"on": False}  # -v: errors print their traceback before the one line (read by pipeline.cli.main)


@app.callback()
def _root(
    ctx: typer.Context,
    warehouse: Optional[Path] = typer.Option(None, "--warehouse", help="Data root (env PAPERKB_WAREHOUSE, default ./warehouse)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show the logs (DEBUG) and the libraries' warnings on stderr."),
) -> None:
    from pipeline.cli.console import configure

    VERBOSE["on"] = verbose
    configure(verbose)
    ctx.obj = {"warehouse": warehouse}


def one_line_paragraphs(text: str) -> str:
    """Help text with each paragraph on one line (pure). Typer keeps a docstring's line breaks inside a
    paragraph (in ``--help`` after the first paragraph, and in the command list), so a docstring wrapped for
    the source showed as ragged lines; rich then wraps each paragraph to the terminal."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(line.strip() for line in p.splitlines() if line.strip()) for p in paragraphs)


def reflow_help(typer_app: typer.Typer) -> None:
    """Give every command of ``typer_app`` (and of its sub-apps) its docstring as :func:`one_line_paragraphs`,
    before typer builds the click commands."""
    for info in typer_app.registered_commands:
        if info.help is None and info.callback is not None and info.callback.__doc__:
            info.help = one_line_paragraphs(info.callback.__doc__)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            reflow_help(group.typer_instance)


def get_settings(ctx: typer.Context, **overrides) -> Settings:
    """Settings from the environment, overridden by the global flags and the command's flags."""
    obj = ctx.find_root().obj or {}
    settings = Settings.load(warehouse=obj.get("warehouse"), **overrides)
    if settings.warehouse.exists() and not settings.warehouse.is_dir():
        flag = "--warehouse" if obj.get("warehouse") is not None else "PAPERKB_WAREHOUSE"
        raise UserError(f"the warehouse {settings.warehouse} is a file, not a directory: point {flag} at a directory "
                        "(a new one is created)")
    return settings


def split_categories(values: Optional[list[str]]) -> Optional[list[str]]:
    """``--category cs.IR,cs.CL --category cs.DL`` -> ``['cs.IR', 'cs.CL', 'cs.DL']`` (None when not given)."""
    if not values:
        return None
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


def check_export_format(fmt: Optional[str]) -> Optional[str]:
    """The reference-manager format named by ``--format`` (one line, exit 2, for an unknown one)."""
    if fmt is None:
        return None
    from pipeline.exports import check_format

    try:
        return check_format(fmt)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def print_export(snap, ids: list[str], fmt: str, out: Optional[Path] = None) -> None:
    """The papers ``ids`` of ``snap`` as BibTeX / RIS / CSL-JSON, on stdout or into ``out``."""
    from pipeline.query.records import export_text

    text = export_text(snap, ids, fmt)
    if out is None:
        sys.stdout.write(text)
        return
    out.write_text(text, encoding="utf-8")
    from pipeline.cli.console import echo

    echo(f"export: {len(ids)} paper(s) as {fmt} -> {out}")

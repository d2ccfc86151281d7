"""The ``paperkb`` command.

``paperkb [--warehouse DIR] [-v] COMMAND``. The commands live in one module per group of ``--help``:
:mod:`.steps` (pipeline steps), :mod:`.reading` (reading and search), :mod:`.library` (library and
feeds), :mod:`.operations` (operations). Heavy imports live inside each command so ``--help`` is fast.
Every error ends as one line on stderr (``main`` and :func:`describe_error`): exit code 2 for user and
environment errors (``UserError``, files and permissions, a warehouse in use by another process, DuckDB
and LanceDB I/O, a damaged JSON file), 1 for a step that failed; ``-v`` adds the traceback.
"""

from __future__ import annotations

import sys

# isort: off - the order of the imports is the order of the groups in --help
from pipeline.cli import steps, reading, library, operations  # noqa: F401 - each registers its commands
# isort: on
from pipeline.cli.root import VERBOSE, app, reflow_help
from pipeline.cli.console import restore
from pipeline.cli.errors import describe_error, install_profile_of

__all__ = ["app", "describe_error", "install_profile_of", "main"]

reflow_help(app)  # every command's help: one line per paragraph, wrapped by rich to the terminal


def main(argv: list[str] | None = None) -> int:
    """Run the CLI: usage errors (click) and every error that reaches the top exit with one line
    (``paperkb: error: ...``), code 2 or 1 (:func:`describe_error`); ``-v`` prints the traceback first."""
    VERBOSE["on"] = False
    try:
        app(args=argv, prog_name="paperkb")  # standalone: click prints usage errors and exits 2
    except ModuleNotFoundError as exc:
        profile = install_profile_of(exc.name or "")
        if profile is None:
            return _report(exc)
        print(f"paperkb: error: this command needs {exc.name!r}, which the [{profile}] install profile adds: "
              f"pip install 'paperkb[{profile}]'", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("paperkb: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:  # noqa: BLE001 - the one top-level handler: one line, -v for the traceback
        return _report(exc)
    finally:
        restore()  # logging and progress as they were: main() may run inside a program or a test
    return 0


def _report(exc: BaseException) -> int:
    code, line = describe_error(exc)
    if VERBOSE["on"]:
        import traceback

        traceback.print_exception(exc, file=sys.stderr)
    elif code == 1:
        line += " (paperkb -v ... shows the traceback)"
    from pipeline.terminal import printable

    print(f"paperkb: error: {printable(line, one_line=True)}", file=sys.stderr)
    return code


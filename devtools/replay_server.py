"""The replay server from a checkout: ``python -m devtools.replay_server [--data DIR] [--port N]``.

It lives in the wheel as :mod:`pipeline.replay_server` (``paperkb replay-server DATA_DIR``); this module
keeps the old import path for the development harness, the tests and the benchmarks."""

from __future__ import annotations

from pipeline.replay_server import (  # noqa: F401 - re-exported
    RecordedServices,
    ReplayServer,
    Reply,
    export_lines,
    load_cassette,
    s2_request_key,
    serve_until_interrupted,
    service_env,
)


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m devtools.replay_server",
                                 description="paperkb replay-server from a checkout: serve the recorded arXiv/S2 data")
    ap.add_argument("--data", default="../shared/data", help="the recorded data folder")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    args = ap.parse_args(argv)
    serve_until_interrupted(args.data, args.host, args.port, echo=lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

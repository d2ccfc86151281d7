"""Run every benchmark module in bench/ in turn; results go to bench/out/ and are summarised in BENCHMARKS.md."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).resolve().parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if not m.name.startswith("_"))
    only = set(sys.argv[1:])
    failed = []
    for name in names:
        if only and name not in only:
            continue
        print(f"== bench.{name}", flush=True)
        rc = subprocess.call([sys.executable, "-m", f"bench.{name}"])
        if rc:
            failed.append(name)
    if failed:
        print("failed:", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""robosteer-bench NAME [ARGS...]: run ``benchmarks/NAME.py`` (a script that measures and prints a table)."""

from __future__ import annotations

import difflib
import runpy
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1] / "benchmarks"


def available() -> list[str]:
    """Names of the benchmark scripts."""
    return sorted(p.stem for p in BENCH_DIR.glob("*.py") if not p.name.startswith("_"))


def main(argv: list[str] | None = None) -> int:
    """Run one benchmark with the remaining arguments; list them when none is named."""
    argv = sys.argv[1:] if argv is None else argv
    names = available()
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: robosteer-bench NAME [ARGS...]\nbenchmarks: " + ", ".join(names))
        return 0 if argv else 2
    name = argv[0].removesuffix(".py")
    if name not in names:
        near = difflib.get_close_matches(name, names, n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        print(f"unknown benchmark {name!r}{hint} (available: {', '.join(names)})", file=sys.stderr)
        return 2
    sys.argv = [str(BENCH_DIR / f"{name}.py"), *argv[1:]]
    runpy.run_path(sys.argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

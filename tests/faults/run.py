"""``make faults``: plant known faults in the algorithm files and check that the default suite kills each.

Every module beside this one (``tests/faults/<area>.py``) holds ``FAULTS``, a list of dicts::

    {"name": "dsrl: distillation latents clipped to ±1",   # what a reader sees in the table
     "file": "policies/steering/dsrl.py",                  # the one file the fault changes
     "old": "<exact text, found exactly once>",            # what it replaces ...
     "new": "<the planted fault>",                         # ... with what
     "tests": ["tests/policies/steering/test_dsrl.py"]}    # pytest node ids that must fail

Each fault is applied to a temporary copy of the repository (the working tree is never touched), the tests
run there in the default (non-slow) selection, and the fault is *killed* when at least one of them fails.
A fault whose ``old`` text is not found exactly once is *stale* (the code moved on: update the fault). Exit
status 1 when any fault survived or is stale. Not part of ``make test``: a tool for whoever changes an
algorithm next (``python tests/faults/run.py -k dsrl`` runs the faults whose name holds "dsrl";
``--files $(git diff --name-only main~3)`` those planted in the files a change touched).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COPIED = (
    "robosteer",
    "policies",
    "sim",
    "real",
    "scripts",
    "configs",
    "tests",
    "benchmarks",
    "experiments",
    "pyproject.toml",
    "setup.py",
    "conftest.py",
)


def load_faults() -> list[dict]:
    """Every fault of every ``tests/faults/<area>.py``, in file order."""
    faults = []
    for path in sorted(Path(__file__).parent.glob("*.py")):
        if path.name in ("run.py", "__init__.py"):
            continue
        spec = importlib.util.spec_from_file_location(f"faults_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for fault in module.FAULTS:
            missing = {"name", "file", "old", "new", "tests"} - set(fault)
            if missing:
                raise SystemExit(f"{path}: fault {fault.get('name')!r} lacks keys {sorted(missing)}")
            faults.append(fault)
    return faults


def copy_tree(dest: Path) -> None:
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif src.exists():
            shutil.copy2(src, dest / name)


def run_fault(fault: dict, work: Path) -> tuple[str, float, str]:
    """(verdict, seconds, last line of pytest's output) for one fault, planted in a fresh copy under ``work``."""
    dest = work / "repo"
    if dest.exists():
        shutil.rmtree(dest)
    copy_tree(dest)
    target = dest / fault["file"]
    text = target.read_text()
    if text.count(fault["old"]) != 1:
        return "stale", 0.0, f"'old' found {text.count(fault['old'])} times in {fault['file']}"
    target.write_text(text.replace(fault["old"], fault["new"]))
    env = {**os.environ, "PYTHONPATH": str(dest), "PYTHONDONTWRITEBYTECODE": "1"}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *fault["tests"]],
        cwd=dest,
        env=env,
        capture_output=True,
        text=True,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    last = lines[-1] if lines else proc.stderr.strip().splitlines()[-1:]
    # 1: tests failed (killed); 0: all passed (survived); 5: nothing ran (e.g. slow-marked): survived
    verdict = "killed" if proc.returncode == 1 else "survived"
    if proc.returncode not in (0, 1, 5):
        verdict = "error"
    return verdict, time.perf_counter() - start, str(last)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-k", default="", help="only the faults whose name contains this text")
    parser.add_argument(
        "--files", nargs="*", help="only the faults planted in these files (e.g. those a change touched)"
    )
    args = parser.parse_args()
    faults = [f for f in load_faults() if args.k in f["name"]]
    if args.files is not None:
        faults = [f for f in faults if f["file"] in set(args.files)]
    print("| # | fault | file | verdict | s |\n|---|---|---|---|---|", flush=True)
    bad = 0
    with tempfile.TemporaryDirectory(prefix="robosteer-faults-") as tmp:
        for i, fault in enumerate(faults, 1):
            verdict, secs, last = run_fault(fault, Path(tmp))
            bad += verdict != "killed"
            print(f"| {i} | {fault['name']} | {fault['file']} | {verdict} | {secs:.0f} |", flush=True)
            if verdict != "killed":
                print(f"|   | ↳ {last} | | | |", flush=True)
    print(f"\n{len(faults) - bad} of {len(faults)} planted faults killed")
    return 1 if bad or not faults else 0


if __name__ == "__main__":
    sys.exit(main())

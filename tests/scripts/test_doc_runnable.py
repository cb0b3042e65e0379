"""The README's runnable blocks run, in order, as written, with tiny overrides appended (item 7 of the
hardening issue): a block preceded by ``<!-- runnable -->`` is executed line by line through the console
scripts, ``runs/`` moved into a temporary directory, so the commands a new user copies cannot drift.

Lines that serve forever (``robosteer-serve``) or run a named benchmark (``robosteer-bench NAME``) are
composed only (tests/scripts/test_doc_commands.py); ``a|b`` alternatives run the first.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARK = "<!-- runnable -->"
SKIP = ("robosteer-serve", "robosteer-bench")
# Appended to every line of a command (later overrides win): seconds instead of minutes, no videos.
TINY = {
    "robosteer-collect": ["episodes=2", "progress=false"],
    "robosteer-dataset": [],
    "robosteer-eval": ["episodes=2", "num_envs=2", "video=false", "progress=false", "max_episode_steps=60"],
    "robosteer-train": ["steps=20", "eval_episodes=2", "eval_envs=2", "eval_video_episodes=0", "progress=false"],
    "robosteer-steer": ["env_steps=64", "run.warmup_chunks=8", "run.eval_every=0", "run.eval_episodes=2",
                        "run.progress=false", "num_envs=2", "eval_envs=2", "eval_base=false", "max_episode_steps=60"],
    "robosteer-value": ["steps=20"],
    "robosteer-deploy": ["episodes=1"],
}  # fmt: skip


def runnable_lines(doc: Path) -> list[tuple[int, list[str]]]:
    """(line number, words) of every command line in the blocks marked runnable."""
    lines, found, armed, inside = doc.read_text().splitlines(), [], False, False
    for n, line in enumerate(lines, 1):
        if line.strip() == MARK:
            armed = True
        elif line.strip().startswith("```"):
            inside = armed and not inside
            armed = False
        elif inside:
            words = shlex.split(line, comments=True)
            if words and words[0].startswith("robosteer-"):
                found.append((n, words))
    return found


def concrete(words: list[str], runs: Path) -> list[str]:
    """The first of every ``a|b`` alternative, ``runs/`` under ``runs``, the tiny overrides appended."""
    args = [w.split("|")[0] if "=" in w else w for w in words[1:] if w != "..."]
    args = [a.replace("=runs/", f"={runs}/") for a in args]
    return [words[0], *args, *TINY[words[0]]]


def test_the_readme_has_a_runnable_block():
    assert len(runnable_lines(ROOT / "README.md")) >= 8


def test_runnable_blocks_run_in_order(tmp_path):
    """One Python process runs every line through its console script's entry point, in order (a process per
    line spent about 8 s of each 10 s importing torch, Hydra and Meta-World again)."""
    found = runnable_lines(ROOT / "README.md")
    lines = [(n, concrete(words, tmp_path / "runs")) for n, words in found if words[0] not in SKIP]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    proc = subprocess.run(
        [sys.executable, __file__, json.dumps(lines)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(proc.stdout[-3000:])
    if proc.returncode != 0:
        pytest.fail(f"{proc.stdout[-1500:]}\n{proc.stderr[-2500:]}")


def run_lines(lines: list[tuple[int, list[str]]]) -> int:
    """Run each ``(line, argv)`` through the console script ``argv[0]`` names; stop at the first that fails."""
    from importlib.metadata import entry_points

    scripts = {
        ep.name: ep for ep in entry_points(group="console_scripts") if ep.name.startswith("robosteer-")
    }
    for n, argv in lines:
        t0 = time.perf_counter()
        sys.argv = list(argv)
        try:
            scripts[argv[0]].load()()
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        print(
            f"README.md:{n}: {time.perf_counter() - t0:.1f} s  exit {code}  {' '.join(argv[:3])}", flush=True
        )
        if code != 0:
            print(f"README.md:{n}: {' '.join(argv)} exited {code}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(run_lines([(n, argv) for n, argv in json.loads(sys.argv[1])]))

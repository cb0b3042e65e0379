"""The README's runnable blocks run, in order, as written, with tiny overrides appended (item 7 of the
hardening issue): a block preceded by ``<!-- runnable -->`` is executed line by line through the console
scripts, ``runs/`` moved into a temporary directory, so the commands a new user copies cannot drift.

Lines that serve forever (``robosteer-serve``) or run a named benchmark (``robosteer-bench NAME``) are
composed only (tests/scripts/test_doc_commands.py); ``a|b`` alternatives run the first.
"""

from __future__ import annotations

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
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    bindir = Path(sys.executable).parent
    for n, words in runnable_lines(ROOT / "README.md"):
        if words[0] in SKIP:
            continue
        argv = concrete(words, tmp_path / "runs")
        t0 = time.perf_counter()
        proc = subprocess.run(
            [str(bindir / argv[0]), *argv[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        print(f"README.md:{n}: {time.perf_counter() - t0:.1f} s  {' '.join(argv[:3])}")
        if proc.returncode != 0:
            pytest.fail(f"README.md:{n}: {' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")

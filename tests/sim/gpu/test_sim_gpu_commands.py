"""The commands on the GPU simulator (``sim=warp``, on warp's CPU device here): robosteer-eval runs the scripted
expert and a trained policy, robosteer-steer steers a frozen base (left byte-identical), and the steered run
written here is evaluated in .venv's CPU Meta-World (mujoco 3.3.0): the round trip between the environments.

Runs under ``make gpu-test`` (``.venv-gpu``); skipped in the main environment (no mujoco_warp).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mujoco_warp")

ROOT = Path(__file__).resolve().parents[3]
DP_RUN = ROOT / "tests" / "fixtures" / "runs_fa6b6cd" / "dp"  # a tiny committed DP run on push-v3
MAIN_PYTHON = ROOT / ".venv" / "bin" / "python"  # .venv: Meta-World on mujoco 3.3.0


def _run(python: Path | str, module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MUJOCO_GL": "egl"}
    quiet = "run.progress=false" if module == "steer" else "progress=false"
    cmd = [str(python), "-m", f"robosteer.scripts.{module}", *args, quiet]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=env, timeout=600)


def _metrics(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text())


def test_eval_runs_the_expert_and_a_trained_policy_on_warp(tmp_path: Path) -> None:
    p = _run(sys.executable, "evaluate", "policy=expert", "task=reach-v3", "sim=warp", "episodes=4",
             "num_envs=4", "out=expert", cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    m = _metrics(tmp_path / "expert")
    assert (m["task"], m["episodes"], m["success_rate"]) == ("reach-v3", 4, 1.0)
    assert "video" not in m  # Warp renders no frames: no video, said in the log
    p = _run(sys.executable, "evaluate", f"checkpoint={DP_RUN}", "task=push-v3", "sim=warp", "episodes=2",
             "num_envs=2", "out=dp", cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert _metrics(tmp_path / "dp")["episodes"] == 2


def test_collect_on_warp_batches_worlds_and_records_its_sim(tmp_path: Path) -> None:
    """robosteer-collect sim=warp: a run regenerates bit for bit at the same num_envs; at another num_envs the
    episodes have the same seeds and initial states and agree to Warp's float rounding (its worlds are not
    bit-identical by index: 1e-6 after a step, measured 5e-3 in an action after 80 steps of contact); every
    episode succeeds, and the dataset says it was recorded on warp."""
    from robosteer.policies.data import open_dataset

    knobs = ["task=drawer-close-v3", "sim=warp", "episodes=3", "action_noise_std=0.1", "keep=all"]
    for n, out in ((1, "w1"), (3, "w3"), (3, "w3_again")):
        p = _run(sys.executable, "collect", *knobs, f"num_envs={n}", f"out={out}", cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-3000:]
    runs = [open_dataset(tmp_path / out / "demos.hdf5") for out in ("w1", "w3", "w3_again")]
    one, three, again = [[d.episode(n) for n in d.demo_names] for d in runs]
    assert runs[1].env_args["env_kwargs"]["suite"] == "warp"
    for a, b, c in zip(one, three, again, strict=True):
        assert a["attrs"]["success"] and int(a["attrs"]["seed"]) == int(b["attrs"]["seed"])
        assert (b["actions"] == c["actions"]).all() and (b["states"] == c["states"]).all()
        assert (a["obs"]["state"][0] == b["obs"]["state"][0]).all()
        steps = min(len(a["actions"]), len(b["actions"]))
        assert abs(len(a["actions"]) - len(b["actions"])) <= 2
        assert abs(a["actions"][:steps] - b["actions"][:steps]).max() < 0.05
    for d in runs:
        d.close()
    assert _metrics(tmp_path / "w3")["success_rate"] == 1.0


def test_steer_on_warp_then_evaluate_in_cpu_metaworld(tmp_path: Path) -> None:
    """benchmarks/warp_steering.py on a tiny budget: robosteer-steer sim=warp here (.venv-gpu), its kept and
    final actors scored by .venv's robosteer-eval in CPU Meta-World, the base's files checked unchanged."""
    if not MAIN_PYTHON.exists():
        pytest.skip(f"{MAIN_PYTHON} is missing (make install): the CPU Meta-World half of the round trip")
    base = tmp_path / "base"
    shutil.copytree(DP_RUN, base)
    steer = ["offline=none", "steerability.directions=0", "steerability.states=8", "run.warmup_chunks=4"]
    steer += ["dsrl.hidden=[32,32]", "dsrl.batch_size=16", "dsrl.noise_critic_steps=1", "run.eval_every=0"]
    steer += ["run.checkpoint_every=80", "run.eval_episodes=2", "eval_envs=2"]
    rows = tmp_path / "rows.jsonl"
    driver = [str(MAIN_PYTHON), "benchmarks/warp_steering.py", "--base", str(base), "--num-envs", "8"]
    driver += ["--env-steps", "160", "--keep-every", "80", "--episodes", "2", "--warp-python", sys.executable]
    driver += ["--out", str(tmp_path / "bench"), "--rows", str(rows), "--", *steer]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MUJOCO_GL": "egl"}
    p = subprocess.run(driver, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert "| num_envs | base |" in p.stdout and "| 8 | " in p.stdout
    (row,) = [json.loads(line) for line in rows.read_text().splitlines()]
    assert (row["sim"], row["num_envs"], row["episodes"], row["base_unchanged"]) == ("warp", 8, 2, True)
    assert row["env_steps"] >= 160 and 0.0 <= row["success_rate"] <= 1.0
    kept = [h["env_steps"] for h in row["unseen_history"]]  # each kept actor scored in CPU Meta-World
    assert len(kept) == 2 and kept == sorted(kept) and kept[0] >= 80


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["task=hammer-v3"], "task=hammer-v3 is not ported to sim=warp"),
        (["task=push-v3", "device=cuda"], "device=cuda"),  # this machine has no GPU (CI's neither)
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], words: str) -> None:
    """The other refusals need no Warp and are tested in .venv (tests/scripts/test_guards.py)."""
    p = _run(sys.executable, "evaluate", "policy=expert", "sim=warp", *args, "out=bad", cwd=tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr[-2000:]
    assert words in p.stderr
    assert not (tmp_path / "bad").exists()

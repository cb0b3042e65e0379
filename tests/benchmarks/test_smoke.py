"""Every benchmark that draws a table a user reads runs end to end on a tiny budget and writes no rows, so none
rots unseen (a moved attribute broke inference_latency and lerobot_compare once, found only when re-run).

Each runs in its own process, as a user runs it (``python benchmarks/NAME.py ... --rows ''``; the drivers with
no ``--rows`` write their results under ``--out`` only); the rows files under docs/results/ and the figures
under docs/figures/ are checked unchanged afterwards. The table it would fill is the docs' (the figures there
are measured with the full budgets in each script's docstring). The drivers that start five or more robosteer
commands (dsrl_steering, vgps, pixels' train part) take over 30 s even on these budgets: they are marked slow.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import clirun
import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {
    **os.environ,
    "PYTHONPATH": str(ROOT),
    "OMP_NUM_THREADS": "1",
    "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"),
}
DP_RUN = ROOT / "tests" / "fixtures" / "runs_fa6b6cd" / "dp"  # a tiny committed DP run on push-v3


def run(*args: str, cwd: Path = ROOT, timeout: float = 120) -> str:
    p = clirun.run([sys.executable, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, (
        f"{' '.join(args)} exited {p.returncode}:\n{p.stdout[-1500:]}\n{p.stderr[-3000:]}"
    )
    return p.stdout


def rows_digest(folder: str = "results") -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (ROOT / "docs" / folder).iterdir()}


@pytest.fixture(scope="module")
def demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two push-v3 demos from collect_quality's own run (its smoke test), kept for the other benchmarks."""
    before = rows_digest()
    out = tmp_path_factory.mktemp("collect")
    table = run(
        "benchmarks/collect_quality.py",
        "--episodes",
        "2",
        "--tasks",
        "push-v3",
        "--out",
        str(out),
        "--rows",
        "",
    )
    assert "| push-v3 | 2 |" in table
    assert rows_digest() == before
    return next(out.rglob("demos.hdf5"))


@pytest.fixture(autouse=True)
def no_rows_written():
    before, figures = rows_digest(), rows_digest("figures")
    yield
    assert rows_digest() == before, "a smoke run wrote rows under docs/results/"
    assert rows_digest("figures") == figures, "a smoke run drew a figure under docs/figures/"


def weak_base_in(out: Path, demos: Path, evaluated: bool) -> None:
    """Lay the committed tiny DP run and the demos where dsrl_steering / expo_steering keep the weak base they
    build once per ``--out`` (steering_runs.weak_base's names for --noise 0.3 --base-steps 3000 --demos 100), so
    the smoke run steers it instead of training one (robosteer-train's 50-episode evaluation alone is a minute).
    ``evaluated``: its robosteer-eval on the unseen episodes too (cached the same way), one subprocess less."""
    task = out / "push-v3"
    (task / "demos_noise0.3").mkdir(parents=True)
    shutil.copy(demos, task / "demos_noise0.3" / "demos.hdf5")
    shutil.copytree(DP_RUN, task / "base_dp_noise0.3_3000")
    if evaluated:
        (task / "base_dp_noise0.3_3000_eval").mkdir()
        (task / "base_dp_noise0.3_3000_eval" / "metrics.json").write_text(
            json.dumps({"success_rate": 0.0, "episodes": 1})
        )


def test_collect_quality(demos: Path) -> None:
    assert demos.is_file()


def test_env_speed() -> None:
    args = ["--seconds", "0.05", "--tasks", "push-v3", "--vectorizations", "sync", "--num-envs", "1"]
    out = run("benchmarks/env_speed.py", *args, "--rows", "")
    assert "push-v3" in out


def test_render_speed() -> None:
    out = run("benchmarks/render_speed.py", "--seconds", "0.05", "--sizes", "84", "--rows", "")
    assert "|" in out


def test_inference_latency(demos: Path) -> None:
    args = ["--dataset", str(demos), "--reps", "5", "--budget", "0.05", "--methods", "SDP (refill)", "flow-1"]
    out = run("benchmarks/inference_latency.py", *args, "--rows", "")
    assert "| SDP (refill) | 5 |" in out and "| flow-1 | 1 |" in out


def test_server_latency() -> None:
    out = run(
        "benchmarks/server_latency.py",
        "--checkpoint",
        str(DP_RUN),
        "--requests",
        "5",
        "--warmup",
        "1",
        "--rows",
        "",
    )
    assert "| client round trip (loopback) |" in out


def test_train_precision(demos: Path, tmp_path: Path) -> None:
    args = ["--dataset", str(demos), "--steps", "2", "--batch-size", "8", "--settings", "fp32 eager"]
    args += ["--out", str(tmp_path)]
    out = run("benchmarks/train_precision.py", *args, "--rows", "")
    assert "| fp32 eager | cpu | 2 |" in out


def test_lerobot_compare_our_side(demos: Path, tmp_path: Path) -> None:
    """Our side of the comparison (LeRobot's needs its own venv: benchmarks/README.md)."""
    args = ["--side", "ours", "--result", str(tmp_path / "ours.json"), "--batches", str(tmp_path / "b.npz")]
    args += ["--dataset", str(demos), "--down-dims", "8", "16", "--step-embed-dim", "8", "--batch-size", "4"]
    run("benchmarks/lerobot_compare.py", *args, "--warmup", "1", "--steps", "2", "--reps", "5")
    assert (tmp_path / "ours.json").is_file()


LEROBOT_PYTHON = Path(os.environ.get("ROBOSTEER_LEROBOT_PYTHON", "/tmp/lerobot-venv/bin/python"))


@pytest.mark.slow  # 20-80 s: two interpreters, one of them importing LeRobot
@pytest.mark.skipif(
    not LEROBOT_PYTHON.exists(), reason=f"no LeRobot venv at {LEROBOT_PYTHON} (benchmarks/README.md)"
)
def test_lerobot_compare_driver_appends_the_row_its_table_is_drawn_from(demos: Path, tmp_path: Path) -> None:
    """Both sides, one round: the driver appends one row to ``--rows`` (here, not docs/results/), and
    results_tables draws from it the very table the driver printed."""
    rows = tmp_path / "lerobot_compare.jsonl"
    args = ["--ours-python", sys.executable, "--lerobot-python", str(LEROBOT_PYTHON), "--rows", str(rows)]
    args += ["--dataset", str(demos), "--down-dims", "8", "16", "--step-embed-dim", "8", "--batch-size", "4"]
    args += ["--rounds", "1", "--warmup", "1", "--steps", "2", "--reps", "5"]
    out = run("benchmarks/lerobot_compare.py", *args)
    [row] = [json.loads(line) for line in rows.read_text().splitlines()]
    config = (row["down_dims"], row["batch_size"], row["steps"], row["reps"], row["rounds"])
    assert config == ([8, 16], 4, 2, 5, 1)
    assert row["robosteer"]["params_total"] == row["lerobot"]["params_total"]  # one network on both sides
    assert (row["robosteer"]["train_n"], row["lerobot"]["chunk_n"]) == (2, 5)
    assert row["command"].startswith("python benchmarks/lerobot_compare.py") and row["commit"]
    md = tmp_path / "speed.md"
    md.write_text(f"<!-- table: lerobot_compare rows={rows} -->\n<!-- /table -->\n")
    run("benchmarks/results_tables.py", "--write", str(md))
    drawn = [line for line in md.read_text().splitlines() if line.startswith("|")]
    assert len(drawn) == 10 and drawn == [line for line in out.splitlines() if line.startswith("|")]


def test_deploy_latency(tmp_path: Path) -> None:
    """One async cell at 0 ms; the twin at 400 Hz so its 200-step episode takes half a second, not 10 s."""
    args = ["--checkpoint", str(DP_RUN), "--episodes", "1", "--latencies", "0", "--modes", "async"]
    args += ["--rate-hz", "400", "--parallel", "1", "--out", str(tmp_path)]
    out = run("benchmarks/deploy_latency.py", *args, "--rows", "")
    assert "reference robosteer-eval on push-v3: success" in out
    assert "| latency_ms | mode | inpaint | blend | rate_hz | episodes | success_rate |" in out
    assert "| 0 | async | true | 1 | 400 | 1 |" in out


def test_steerability(demos: Path) -> None:
    args = ["--base", f"{DP_RUN}={demos}", "--label", "tiny", "--rows", ""]
    check = ["steerability.states=8", "steerability.latents=4", "steerability.directions=1"]
    check += ["steerability.episodes=1", "max_episode_steps=16", "eval_envs=1"]
    out = run("benchmarks/steerability.py", *args, "--", *check)
    assert "| label | task | base_success | over_noise | over_states | ratio |" in out
    assert "| tiny | push-v3 |" in out


TINY_STEER = ["num_envs=2", "eval_envs=1", "max_episode_steps=16", "run.warmup_chunks=2", "run.eval_every=16"]
TINY_STEER += ["run.eval_episodes=1", "run.checkpoint_every=16"]


# measured 47-67 s on this 2-core machine (load 3 from other jobs): base eval, steer, 2 evals, each a robosteer
# subprocess of 8-13 s, then the trained actor's eval in-process
@pytest.mark.slow
def test_dsrl_steering(demos: Path, tmp_path: Path) -> None:
    weak_base_in(tmp_path, demos, evaluated=False)
    args = ["--tasks", "push-v3", "--variants", "na", "--seeds", "0", "--episodes", "1", "--env-steps", "32"]
    args += ["--max-minutes", "1", "--out", str(tmp_path), "--rows", ""]
    tiny = ["dsrl.hidden=[32,32]", "dsrl.batch_size=16", "dsrl.noise_critic_steps=1", "dsrl.noise_bank=64"]
    tiny += ["steerability.directions=0", "steerability.states=8"]
    out = run("benchmarks/dsrl_steering.py", *args, "--", *TINY_STEER, *tiny)
    assert "| task | variant | base | steered (per seed) | mean | env steps | wall min/run |" in out
    assert "| push-v3 | na | 0.00 |" in out and (tmp_path / "curves.png").is_file()


def test_expo_steering(demos: Path, tmp_path: Path) -> None:
    weak_base_in(tmp_path, demos, evaluated=True)
    args = ["--tasks", "push-v3", "--methods", "expo", "--seeds", "0", "--episodes", "1", "--env-steps", "32"]
    args += ["--max-minutes", "1", "--out", str(tmp_path), "--figure", str(tmp_path / "curves.png")]
    tiny = ["expo.hidden=[32,32]", "expo.batch_size=16", "expo.num_samples=2", "expo.num_edits=1"]
    out = run("benchmarks/expo_steering.py", *args, "--", *TINY_STEER, *tiny)
    assert "| task | method | base | per seed | mean | env steps | wall min/run |" in out
    assert "| push-v3 | expo | 0 | 0.00 |" in out
    assert "| push-v3 | expo | 0 | > 32 | > 32 |" in out and (tmp_path / "curves.png").is_file()


# measured 37-47 s on this 2-core machine (load 3 from other jobs): 5 robosteer subprocesses (2 collects, critic,
# generalist, eval) of 7-10 s each
@pytest.mark.slow
def test_vgps(tmp_path: Path) -> None:
    args = ["--tasks", "push-v3", "--policies", "flow", "--ks", "2", "--seeds", "0"]
    args += ["--demos", "1", "--noisy", "1"]
    args += ["--train-steps", "2", "--critic-steps", "2", "--episodes", "1", "--num-envs", "1"]
    out = run("benchmarks/vgps.py", *args, "--latency-reps", "1", "--out", str(tmp_path))
    assert "| policy | K | success per seed | mean | re-plan ms | added ms / control step |" in out
    assert "| flow | 2 |" in out


def test_pixels_encoders_env(tmp_path: Path) -> None:
    args = ["encoders", "env", "--seconds", "0.05", "--batch-size", "2", "--threads", "1"]
    out = run("benchmarks/pixels.py", *args, "--out", str(tmp_path), "--rows", "")
    assert "| encoder | params | training samples/s |" in out and "| resnet18 (diffusion_policy) |" in out
    assert "| obs | image px | cameras | chunk | render | env steps/s |" in out
    assert "| pixels | 84 | 1 | 8 | policy_steps |" in out


# measured 28-32 s on this 2-core machine (load 3 from other jobs): collect from pixels, then train with one
# rendered evaluation episode (about 30 env steps/s)
@pytest.mark.slow
def test_pixels_train(tmp_path: Path) -> None:
    args = ["train", "--demos", "2", "--steps", "2", "--minutes", "1", "--episodes", "1"]
    args += ["--collect-overrides", "image_size=32", "--overrides", "batch_size=4", "policy.rgb_channels=[8]"]
    args += [
        "policy.mlp_hidden_dim=32",
        "policy.num_inference_steps=2",
        "eval_envs=1",
        "eval_video_episodes=0",
    ]
    out = run("benchmarks/pixels.py", *args, "lr_warmup_steps=1", "--out", str(tmp_path), "--rows", "")
    assert "| task | policy | obs | seed | steps | samples/s | train min | success |" in out
    assert "| push-v3 | diffusion | pixels | 0 | 2 |" in out


def test_data_scaling(tmp_path: Path) -> None:
    args = ["--tasks", "push-v3", "--policies", "flow", "--demos", "2", "--seeds", "0", "--collect", "3"]
    out = run("benchmarks/data_scaling.py", *args, "--steps", "2", "--episodes", "1", "--out", str(tmp_path))
    assert "| task | policy | 2 demos | train min/run |" in out and "| push-v3 | flow | " in out


def test_steering_throughput() -> None:
    """CPU Meta-World's cell only (Warp's needs .venv-gpu: tests/sim/gpu runs the loop there)."""
    args = ["--sims", "metaworld", "--num-envs", "2", "--warmup", "1", "--steps", "1", "--utd", "0.5"]
    out = run("benchmarks/steering_throughput.py", *args, "--rows", "")
    assert "| metaworld | 2 | cpu |" in out

"""Side-by-side with LeRobot's DiffusionPolicy: training samples/s and batch-1 inference latency, same UNet.

Why: to show what our Diffusion Policy costs against the reference implementation most users know, on the
same data and the same network size. LeRobot never enters our requirements: it lives in a throwaway venv
(default ``/tmp/lerobot-venv``, see benchmarks/README.md), and this script runs in three roles:

- driver (default): runs ``--side ours`` with our venv's Python and ``--side lerobot`` with LeRobot's,
  one after the other (``--rounds`` times, alternating), then prints one combined table;
- ``--side ours``: builds our policy (``backbone="unet"``), pre-samples training batches from our
  ``SequenceDataset`` and saves them with the normalisation stats to a .npz, then measures;
- ``--side lerobot``: loads that .npz (so both sides train on the very same tensors), builds LeRobot's
  ``DiffusionPolicy`` with matching sizes, and measures.

Both sides: 1 thread, DDIM with the same train timesteps / inference steps, epsilon prediction, each
project's own optimiser preset (ours AdamW, LeRobot Adam; lr 1e-4, betas (0.95, 0.999), wd 1e-6), gradient
clipping at 10, no EMA, normalisation inside the timed step (ours inside ``loss``; LeRobot's preprocessor,
as its training loop calls it). LeRobot requires an image or ``observation.environment_state`` input, so
the 39-d Meta-World state is split: dims 0-3 (hand xyz + gripper) -> ``observation.state``, dims 4-38 ->
``observation.environment_state``; its global condition is then To * 39, exactly ours.

The driver appends one row per run to ``--rows`` (default ``docs/results/lerobot_compare.jsonl``; ``''``: none):
the settings, each side's min / median / count of every timing, its parameters and versions, and the
provenance (command, commit, machine, load). ``results_tables.py`` draws the docs' table from those rows with
the same code that prints it here.

Module-level imports are stdlib only: each side imports its own stack inside its function.
Run: ``.venv/bin/python benchmarks/lerobot_compare.py [--lerobot-python /tmp/lerobot-venv/bin/python]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = ROOT / "runs" / "calib" / "push_demos" / "demos.hdf5"
DEFAULT_OURS_PYTHON = ROOT / ".venv" / "bin" / "python"
DEFAULT_LEROBOT_PYTHON = Path("/tmp/lerobot-venv/bin/python")
STATE_SPLIT = 4  # LeRobot: state[:4] -> observation.state, state[4:] -> observation.environment_state


# ---------------------------------------------------------------------------------------------- timing
def time_calls(fn: Callable[[], Any], warmup: int, reps: int) -> list[float]:
    """Milliseconds per call of ``fn`` after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t0) / 1e6)
    return out


def load_avg() -> list[float]:
    """1/5/15-minute load averages (the machine is shared; timings are only comparable at equal load)."""
    return [round(x, 2) for x in os.getloadavg()]


# ---------------------------------------------------------------------------------------------- our side
def side_ours(args: argparse.Namespace) -> dict[str, Any]:
    """Pre-sample batches (saved for LeRobot's side), then time our training step and sampler."""
    import numpy as np
    import torch

    from robosteer.policies import make_policy
    from robosteer.policies.data import SequenceDataset

    torch.set_num_threads(1)
    torch.manual_seed(0)
    ds = SequenceDataset(str(args.dataset), ["state"], args.n_obs_steps, args.horizon, args.n_action_steps)
    stats = ds.stats()
    n_batches = args.warmup + args.steps
    batches_path = Path(args.batches)
    if not batches_path.exists():
        rng = np.random.default_rng(0)
        idx = rng.integers(0, len(ds), (n_batches, args.batch_size))
        items = [[ds[int(i)] for i in row] for row in idx]
        obs = np.stack([[it["obs"]["state"].numpy() for it in row] for row in items])  # (N, B, To, 39)
        act = np.stack([[it["action"].numpy() for it in row] for row in items])  # (N, B, Tp, 4)
        window = ds[len(ds) // 2]["obs"]["state"].numpy()[None]  # (1, To, 39)
        flat = {f"stats/{k}/{s}": v for k, st in stats.items() for s, v in st.items()}
        np.savez(batches_path, obs=obs, action=act, window=window, **flat)
    data = np.load(batches_path)
    obs_t = torch.from_numpy(data["obs"])
    act_t = torch.from_numpy(data["action"])
    window = {"state": torch.from_numpy(data["window"])}

    policy = make_policy(
        "diffusion",
        ds.shape_meta,
        stats,
        backbone="unet",
        unet_down_dims=tuple(args.down_dims),
        unet_kernel_size=args.kernel_size,
        unet_n_groups=args.n_groups,
        unet_cond_predict_scale=True,
        time_embed_dim=args.step_embed_dim,
        n_obs_steps=args.n_obs_steps,
        horizon=args.horizon,
        n_action_steps=args.n_action_steps,
        num_train_timesteps=args.train_timesteps,
        num_inference_steps=args.inference_steps,
        scheduler="ddim",
        prediction_type="epsilon",
        clip_sample=True,
    )
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.95, 0.999), eps=1e-8, weight_decay=1e-6)
    k = 0

    def train_step() -> None:
        nonlocal k
        i = k % obs_t.shape[0]
        k += 1
        loss, _ = policy.loss({"obs": {"state": obs_t[i]}, "action": act_t[i]})
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 10.0)
        opt.step()

    policy.train()
    train_ms = time_calls(train_step, args.warmup, args.steps)

    policy.eval()
    with torch.no_grad():
        cond = policy.encode_obs(window)  # (1, G)
    x = torch.randn(1, *policy.noise_shape)
    ts = [torch.tensor([t]) for t in policy.ddim_table().timesteps]

    def floor() -> None:
        with torch.no_grad():
            for t in ts:
                policy.model(x, t, cond)

    ta = args.n_action_steps
    policy.reset()
    policy.act({"state": window["state"][:, -1]})

    def refill() -> None:
        policy.acting.qpos.fill_(ta)  # type: ignore[union-attr]  # empty queue: this act() re-plans
        policy.act({"state": window["state"][:, -1]})

    chunk_ms, floor_ms, refill_ms = [], [], []
    for _ in range(args.reps // 5):  # interleave the three in blocks of 5 so load drifts hit all alike
        chunk_ms += time_calls(lambda: policy.sample(window), 2, 5)
        floor_ms += time_calls(floor, 1, 5)
        refill_ms += time_calls(refill, 1, 5)
    return {
        "side": "robosteer",
        "torch": torch.__version__,
        "version": "working tree",
        "params_total": sum(p.numel() for p in policy.parameters()),
        "params_denoiser": sum(p.numel() for p in policy.model.parameters()),
        "train_ms": train_ms,
        "chunk_ms": chunk_ms,
        "floor_ms": floor_ms,
        "refill_ms": refill_ms,
        "load": load_avg(),
    }


# ---------------------------------------------------------------------------------------------- LeRobot
def side_lerobot(args: argparse.Namespace) -> dict[str, Any]:
    """Time LeRobot's DiffusionPolicy on the batches our side saved (same tensors, same sizes)."""
    from importlib.metadata import version

    import numpy as np
    import torch
    from lerobot.configs.types import FeatureType, NormalizationMode, PolicyFeature
    from lerobot.policies.diffusion.configuration_diffusion import DiffusionConfig
    from lerobot.policies.diffusion.modeling_diffusion import DiffusionPolicy
    from lerobot.policies.diffusion.processor_diffusion import make_diffusion_pre_post_processors

    torch.set_num_threads(1)
    torch.manual_seed(0)
    data = np.load(args.batches)
    obs = torch.from_numpy(data["obs"])  # (N, B, To, 39)
    act = torch.from_numpy(data["action"])  # (N, B, Tp, 4)
    window = torch.from_numpy(data["window"])  # (1, To, 39)
    s = STATE_SPLIT
    dim = obs.shape[-1]
    names = ("min", "max", "mean", "std")
    stats = {
        "observation.state": {n: torch.from_numpy(data[f"stats/state/{n}"][:s]) for n in names},
        "observation.environment_state": {n: torch.from_numpy(data[f"stats/state/{n}"][s:]) for n in names},
        "action": {n: torch.from_numpy(data[f"stats/action/{n}"]) for n in names},
    }
    cfg = DiffusionConfig(
        input_features={
            "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(s,)),
            "observation.environment_state": PolicyFeature(type=FeatureType.ENV, shape=(dim - s,)),
        },
        output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(act.shape[-1],))},
        normalization_mapping={
            "VISUAL": NormalizationMode.MEAN_STD,
            "STATE": NormalizationMode.MIN_MAX,
            "ENV": NormalizationMode.MIN_MAX,
            "ACTION": NormalizationMode.MIN_MAX,
        },
        device="cpu",
        n_obs_steps=args.n_obs_steps,
        horizon=args.horizon,
        n_action_steps=args.n_action_steps,
        down_dims=tuple(args.down_dims),
        kernel_size=args.kernel_size,
        n_groups=args.n_groups,
        diffusion_step_embed_dim=args.step_embed_dim,
        use_film_scale_modulation=True,
        noise_scheduler_type="DDIM",
        num_train_timesteps=args.train_timesteps,
        num_inference_steps=args.inference_steps,
        prediction_type="epsilon",
        clip_sample=True,
    )
    policy = DiffusionPolicy(cfg)
    pre, post = make_diffusion_pre_post_processors(cfg, dataset_stats=stats)
    opt = cfg.get_optimizer_preset().build(policy.get_optim_params())
    clip = cfg.get_optimizer_preset().grad_clip_norm
    pad = torch.zeros(obs.shape[1], args.horizon, dtype=torch.bool)
    k = 0

    def train_step() -> None:
        nonlocal k
        i = k % obs.shape[0]
        k += 1
        batch = pre(
            {
                "observation.state": obs[i, ..., :s],
                "observation.environment_state": obs[i, ..., s:],
                "action": act[i],
                "action_is_pad": pad,
            }
        )
        loss, _ = policy.forward(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), clip)
        opt.step()
        opt.zero_grad()

    policy.train()
    train_ms = time_calls(train_step, args.warmup, args.steps)

    policy.eval()
    policy.reset()
    cur = {"observation.state": window[:, -1, :s], "observation.environment_state": window[:, -1, s:]}
    for _ in range(args.n_obs_steps):  # fill the obs queues (and the action queue)
        policy.select_action(pre(dict(cur)))
    norm_obs = pre(dict(cur))
    with torch.no_grad():
        stacked = {
            key: torch.stack(list(policy._queues[key]), dim=1) for key in norm_obs if key in policy._queues
        }
        gcond = policy.diffusion._prepare_global_conditioning(stacked)  # (1, G)
    x = torch.randn(1, args.horizon, act.shape[-1])
    sched = policy.diffusion.noise_scheduler
    sched.set_timesteps(policy.diffusion.num_inference_steps)
    ts = [torch.full((1,), int(t), dtype=torch.long) for t in sched.timesteps]

    def floor() -> None:
        with torch.no_grad():
            for t in ts:
                policy.diffusion.unet(x, t, global_cond=gcond)

    def refill() -> None:
        policy._queues["action"].clear()  # empty queue: this select_action re-plans
        post(policy.select_action(pre(dict(cur))))

    chunk_ms, floor_ms, refill_ms = [], [], []
    for _ in range(args.reps // 5):
        chunk_ms += time_calls(lambda: policy.predict_action_chunk(norm_obs), 2, 5)
        floor_ms += time_calls(floor, 1, 5)
        refill_ms += time_calls(refill, 1, 5)
    return {
        "side": "LeRobot",
        "torch": torch.__version__,
        "version": version("lerobot"),
        "params_total": sum(p.numel() for p in policy.parameters()),
        "params_denoiser": sum(p.numel() for p in policy.diffusion.unet.parameters()),
        "train_ms": train_ms,
        "chunk_ms": chunk_ms,
        "floor_ms": floor_ms,
        "refill_ms": refill_ms,
        "load": load_avg(),
        "config": {
            k2: (list(v) if isinstance(v, tuple) else v)
            for k2, v in vars(cfg).items()
            if k2
            in (
                "down_dims",
                "kernel_size",
                "n_groups",
                "diffusion_step_embed_dim",
                "noise_scheduler_type",
                "num_train_timesteps",
                "num_inference_steps",
                "prediction_type",
                "n_obs_steps",
                "horizon",
                "n_action_steps",
                "use_film_scale_modulation",
                "beta_schedule",
                "clip_sample",
            )
        },
    }


# ---------------------------------------------------------------------------------------------- driver
def run_side(python: Path, side: str, argv: list[str], out: Path) -> dict[str, Any]:
    """Run one side in its own interpreter; its result comes back as JSON in ``out``."""
    cmd = [str(python), str(Path(__file__).resolve()), "--side", side, "--result", str(out), *argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT) if side == "ours" else "", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(
            f"--side {side} with {python} failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
        )
    return json.loads(out.read_text())


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One side's rounds as its part of the row: min, median and count of each timing over all rounds.

    Min and median are what the table shows; the load after each round says how loaded each side ran.
    """
    first = runs[0]
    out = {k: first[k] for k in ("torch", "version", "params_total", "params_denoiser")}
    for kind in ("train", "chunk", "refill", "floor"):
        xs = [x for run in runs for x in run[f"{kind}_ms"]]
        out |= {f"{kind}_ms_min": min(xs), f"{kind}_ms_med": statistics.median(xs), f"{kind}_n": len(xs)}
    out["loads"] = [run["load"] for run in runs]
    if "config" in first:  # LeRobot's side: its DiffusionConfig's fields that set the sizes compared
        out["config"] = first["config"]
    return out


def driver(args: argparse.Namespace, config: dict[str, Any], passthrough: list[str]) -> None:
    """Run both sides ``--rounds`` times, alternating; append the run's row (``--rows``) and print its table."""
    from results_tables import LEROBOT_LAST_COLUMN, append_row, lerobot_compare_caption, lerobot_compare_table

    if not args.lerobot_python.exists():
        raise SystemExit(f"LeRobot venv not found at {args.lerobot_python}; see benchmarks/README.md")
    results: dict[str, list[dict[str, Any]]] = {"ours": [], "lerobot": []}
    with tempfile.TemporaryDirectory() as tmp:
        batches = Path(tmp) / "batches.npz"
        common = [*passthrough, "--batches", str(batches)]
        for r in range(args.rounds):
            for side, python in (("ours", args.ours_python), ("lerobot", args.lerobot_python)):
                print(f"  round {r + 1}/{args.rounds}: {side} ...", flush=True)
                results[side].append(run_side(python, side, common, Path(tmp) / f"{side}{r}.json"))
    row = {
        **config,
        "rounds": args.rounds,
        "threads": 1,
        "robosteer": summarise(results["ours"]),
        "lerobot": summarise(results["lerobot"]),
    }
    if args.rows:
        append_row(args.rows, row)
    o, lr = row["robosteer"], row["lerobot"]
    print(f"\nCPU {platform.machine()}, {os.cpu_count()} CPUs. {lerobot_compare_caption(row)}\n")
    print(lerobot_compare_table(row))
    print(
        f"\n{LEROBOT_LAST_COLUMN} Load averages (1/5/15 min) after each run: ours {o['loads']}, "
        f"LeRobot {lr['loads']}"
    )
    print(f"LeRobot config: {json.dumps(lr['config'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", choices=("ours", "lerobot"), default=None, help="internal: run one side")
    parser.add_argument("--result", type=Path, help="internal: where a side writes its JSON result")
    parser.add_argument("--batches", type=Path, help="internal: .npz of pre-sampled batches (ours writes it)")
    parser.add_argument("--ours-python", type=Path, default=DEFAULT_OURS_PYTHON)
    parser.add_argument("--lerobot-python", type=Path, default=DEFAULT_LEROBOT_PYTHON)
    parser.add_argument("--rounds", type=int, default=2, help="alternating ours/LeRobot rounds")
    parser.add_argument(
        "--rows", default="docs/results/lerobot_compare.jsonl", help="append the run's row here ('': don't)"
    )
    side_args = parser.add_argument_group("passed to both sides")
    side_args.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    side_args.add_argument("--down-dims", type=int, nargs="+", default=[64, 128, 256])
    side_args.add_argument("--kernel-size", type=int, default=5)
    side_args.add_argument("--n-groups", type=int, default=8)
    side_args.add_argument("--step-embed-dim", type=int, default=128)
    side_args.add_argument("--n-obs-steps", type=int, default=2)
    side_args.add_argument("--horizon", type=int, default=16)
    side_args.add_argument("--n-action-steps", type=int, default=8)
    side_args.add_argument("--train-timesteps", type=int, default=100)
    side_args.add_argument("--inference-steps", type=int, default=10)
    side_args.add_argument("--batch-size", type=int, default=64)
    side_args.add_argument("--warmup", type=int, default=5)
    side_args.add_argument("--steps", type=int, default=30)
    side_args.add_argument("--reps", type=int, default=30, help="inference timings per kind (multiple of 5)")
    args = parser.parse_args()
    if args.side is None:
        passthrough: list[str] = []
        config: dict[str, Any] = {}
        for action in side_args._group_actions:  # forward every side option, defaults included
            value = getattr(args, action.dest)
            passthrough += [
                action.option_strings[0],
                *map(str, value if isinstance(value, list) else [value]),
            ]
            if isinstance(value, Path):  # the dataset, named from the repository root when it lies inside
                path = value.resolve()
                value = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
            config[action.dest] = value
        driver(args, config, passthrough)
        return
    if args.result is None or args.batches is None:
        parser.error("--side needs --result and --batches")
    result = side_ours(args) if args.side == "ours" else side_lerobot(args)
    args.result.write_text(json.dumps(result))


if __name__ == "__main__":
    sys.exit(main())

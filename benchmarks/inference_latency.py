"""Per-control-step inference latency of DP (DDPM-100, DDIM-10), SDP and flow (10, 1) at batch 1 on CPU.

Why: a sampler is only as cheap as its denoiser calls, and the issue's target is that sampler bookkeeping
(schedulers, obs encoding, normalisation, the act() queue) adds at most 20% on top of them. Each method is
timed beside its *floor*: the same number of bare ``policy.model(x, t, cond)`` calls with a pre-encoded
condition and precomputed timesteps (for SDP, its per-position level vectors), nothing else. Both are
measured interleaved in the same loop so machine load hits them alike.

Random weights, normaliser stats fitted from the dataset (latency does not depend on training).
Run: ``python benchmarks/inference_latency.py [--backbone unet] [--reps 30] [--methods flow-1 ...]``. Prints a markdown table and
appends one row per method (with its provenance: command, commit, machine, load) to ``--rows``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from results_tables import append_row

from robosteer.policies import make_policy
from robosteer.policies.base import GenerativePolicy
from robosteer.policies.data import open_dataset

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = ROOT / "runs" / "calib" / "push_demos" / "demos.hdf5"

# (label, registry name, config overrides)
METHODS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "DP-DDPM-100",
        "diffusion",
        {"scheduler": "ddpm", "num_train_timesteps": 100, "num_inference_steps": 100},
    ),
    ("DP-DDIM-10", "diffusion", {"scheduler": "ddim", "num_train_timesteps": 100, "num_inference_steps": 10}),
    ("SDP (refill)", "streaming", {"num_train_timesteps": 100, "num_inference_steps": 10}),
    ("flow-10", "flow", {"num_inference_steps": 10}),
    ("flow-1", "flow", {"num_inference_steps": 1}),
]


@dataclass
class Row:
    """One method's measurements (milliseconds)."""

    label: str
    calls: int
    ta: int
    chunk: list[float]
    floor: list[float]
    act_step: list[float]


def ms(f: Callable[[], Any]) -> float:
    """Wall time of one call to ``f`` in milliseconds."""
    t0 = time.perf_counter_ns()
    f()
    return (time.perf_counter_ns() - t0) / 1e6


def floor_fn(policy: GenerativePolicy, obs: dict[str, torch.Tensor]) -> tuple[Callable[[], None], int]:
    """The bare denoiser calls one chunk of ``policy`` makes, with everything precomputed; and their count.

    Mirrors each sampler's call signature: DP/DDIM passes ``t`` (B,) from its inference grid, DDPM the
    diffusers timesteps, flow ``t * time_embed_scale``, SDP per-position levels (B, Tp) * ratio.
    """
    with torch.no_grad():
        cond = policy.encode_obs(obs)  # (1, G)
    x = torch.randn(1, *policy.noise_shape)
    cfg: Any = policy.config
    if policy.name == "streaming":
        ratio = policy.ddim_table().ratio  # type: ignore[operator]
        init = policy.init_levels  # (Tp,)
        ts = [((init - i).clamp(min=-1) * ratio).unsqueeze(0) for i in range(policy.nfe_per_call)]  # type: ignore[operator]
    elif policy.name == "diffusion":
        if cfg.scheduler == "ddpm":
            sched = policy.make_train_scheduler()  # type: ignore[operator]
            sched.set_timesteps(cfg.num_inference_steps)
            ts = [t.expand(1) for t in sched.timesteps]
        else:
            ts = [torch.tensor([t]) for t in policy.ddim_table().timesteps]  # type: ignore[operator]
    else:  # flow
        k = cfg.num_inference_steps
        ts = [torch.tensor([i / k * cfg.time_embed_scale]) for i in range(k)]
    model = policy.model

    def run() -> None:
        with torch.no_grad():
            for t in ts:
                model(x, t, cond)

    return run, len(ts)


def measure(label: str, policy: GenerativePolicy, states: np.ndarray, reps: int, budget_s: float) -> Row:
    """Interleave chunk and floor timings; then time act() over whole Ta-step cycles."""
    policy.eval()
    to, ta = policy.config.n_obs_steps, policy.config.n_action_steps
    window = {"state": torch.as_tensor(states[None, :to])}  # (1, To, 39)
    floor, n_calls = floor_fn(policy, window)
    is_sdp = policy.name == "streaming"
    step = 0

    def next_obs() -> dict[str, torch.Tensor]:
        nonlocal step
        s = {"state": torch.as_tensor(states[step % len(states)][None])}  # (1, 39)
        step += 1
        return s

    def chunk() -> None:
        if is_sdp:  # one act() call that refills the queue: 1 streaming call of nfe_per_call denoiser calls
            policy.acting.qpos.fill_(ta)  # type: ignore[union-attr]  # empty queue -> this call re-plans
            policy.act(next_obs())
        else:
            policy.sample(window)

    policy.reset()
    policy.act(next_obs())  # builds the obs history (and the SDP buffer)
    chunk_t: list[float] = []
    floor_t: list[float] = []
    for _ in range(3):  # warm-up
        chunk()
        floor()
    start = time.perf_counter()
    for r in range(reps):
        if r % 2:  # alternate the order so neither side always runs on a warm cache
            chunk_t.append(ms(chunk))
            floor_t.append(ms(floor))
        else:
            floor_t.append(ms(floor))
            chunk_t.append(ms(chunk))
        if r >= 4 and time.perf_counter() - start > budget_s:
            break
    # act(): mean per control step over full Ta-step cycles (one refill + Ta-1 queue pops)
    policy.reset()
    step_t: list[float] = []
    start = time.perf_counter()
    for c in range(max(3, reps // 3)):
        step_t.append(sum(ms(lambda: policy.act(next_obs())) for _ in range(ta)) / ta)
        if c >= 2 and time.perf_counter() - start > budget_s / 2:
            break
    return Row(label, n_calls, ta, chunk_t, floor_t, step_t[1:] if len(step_t) > 1 else step_t)


def fmt(xs: list[float]) -> str:
    """'min / median' in ms."""
    return f"{min(xs):.2f} / {statistics.median(xs):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", choices=("mlp", "unet"), default="mlp")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument(
        "--reps", type=int, default=60, help="timed chunks per method (interleaved with floors)"
    )
    parser.add_argument("--budget", type=float, default=12.0, help="max seconds of chunk timing per method")
    parser.add_argument("--threads", type=int, default=1)
    labels = [label for label, _, _ in METHODS]
    parser.add_argument(
        "--methods", nargs="+", default=labels, choices=labels, help="a subset, in table order"
    )
    parser.add_argument(
        "--rows", default="docs/results/inference_latency.jsonl", help="append rows here ('': don't)"
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    with open_dataset(args.dataset) as f:
        stats = f.stats(["state", "action"])
        states = f.episode(0, ["state"])["obs"]["state"].astype(np.float32)  # (T, 39)
        shape_meta = {
            "obs": {"state": {"shape": [states.shape[1]], "type": "low_dim"}},
            "action": {"shape": [int(f.action_dim or 0)]},
        }

    rows = []
    for label, name, overrides in (m for m in METHODS if m[0] in args.methods):
        policy = make_policy(name, shape_meta, stats, backbone=args.backbone, **overrides)
        rows.append(measure(label, policy, states, args.reps, args.budget))
        n_params = sum(p.numel() for p in policy.model.parameters())
        if args.rows:
            r = rows[-1]
            append_row(
                args.rows,
                {
                    "method": label,
                    "backbone": args.backbone,
                    "threads": args.threads,
                    "torch": torch.__version__,
                    "denoiser_params": n_params,
                    "denoiser_calls": r.calls,
                    "ta": r.ta,
                    **{f"{k}_ms_min": min(getattr(r, k)) for k in ("chunk", "floor", "act_step")},
                    **{
                        f"{k}_ms_med": statistics.median(getattr(r, k))
                        for k in ("chunk", "floor", "act_step")
                    },
                    "chunks": len(r.chunk),
                },
            )
        print(
            f"  done {label}: {len(rows[-1].chunk)} chunks, denoiser {n_params / 1e6:.2f}M params", flush=True
        )

    load = os.getloadavg()
    print(
        f"\nInference latency, batch 1, CPU ({platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{args.threads} thread), backbone={args.backbone}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n"
    )
    header = [
        "method",
        "denoiser calls / chunk",
        "ms / chunk (min / med)",
        "floor ms (min / med)",
        "ratio (med / med)",
        "ms / control step (chunk / Ta)",
        "act() ms / step, measured (min / med)",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        med_c, med_f = statistics.median(r.chunk), statistics.median(r.floor)
        print(
            f"| {r.label} | {r.calls} | {fmt(r.chunk)} | {fmt(r.floor)} | {med_c / med_f:.2f} | "
            f"{min(r.chunk) / r.ta:.3f} / {med_c / r.ta:.3f} (Ta={r.ta}) | "
            f"{min(r.act_step):.3f} / {statistics.median(r.act_step):.3f} |"
        )
    print(
        "\nchunk = one `sample(obs)` (DP, flow) or one refilling `act(obs)` (SDP: one streaming call, "
        "N/h denoiser calls, once every Ta steps). floor = the same denoiser calls with the condition "
        "pre-encoded and timesteps precomputed. ratio = chunk / floor (target <= 1.20). act() column: "
        "mean cost per control step over whole Ta-step cycles (one refill + Ta-1 queue pops)."
    )


if __name__ == "__main__":
    main()

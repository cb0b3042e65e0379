"""V-GPS on Meta-World MT10: generalists (DP, flow, SDP) with and without value-guided steering.

For every MT10 task: collect ``--demos`` clean scripted demos (successes only) and ``--noisy`` mixed-quality
episodes (action noise + random-action segments, failures kept) into two files of that task, so the data
is "scripted demos plus noisy and partly failing episodes". Train, per policy and seed, one multi-task
generalist on all 20 files (task id -> learned embedding; no per-task models), and ONE offline critic
(``--algo``, Cal-QL by default, sparse success reward) on the same files, shared by every generalist. Then
evaluate each generalist on every task for ``--episodes`` unseen initial states (eval seed 200000) through
``robosteer-eval ... steer=vgps critic=... samples=K temperature=β``; K = 1 rows are the plain generalist
("without V-GPS"; for DP and flow identical to V-GPS with K = 1, for SDP its native streaming ``act``).
``--replan-every n`` executes n steps of each steered chunk instead of Ta (``robosteer-eval replan_every=n``);
its K = 1 rows then also go through the wrapper (one fresh sample per re-plan, executed alike), so they show
what re-planning alone does. SDP's candidates come from its stateless ``sample``: ``--sdp-sample streaming``
(default; a cold-start streaming call, robosteer-eval ``sample_levels=streaming``) or ``constant`` (full DDIM
at one level, which every SDP cell used before this option existed). The added latency per control step is
measured in-process at batch 1: steered re-plan / n − base re-plan / Ta (n = Ta without ``--replan-every``). Every finished evaluation is appended to
``<out>/results.jsonl``, so an interrupted grid resumes where it stopped; the table is printed at the end.

    python benchmarks/vgps.py --policies diffusion flow streaming --ks 1 4 16 32 --seeds 0 1 2 \
        --out runs/bench/vgps
    # tiny check (minutes on a CPU):
    python benchmarks/vgps.py --tasks reach-v3 button-press-topdown-v3 --policies flow --ks 1 4 --seeds 0 \
        --demos 5 --noisy 5 --train-steps 200 --critic-steps 200 --episodes 4 --out runs/bench/vgps_tiny
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from robosteer.scripts.common import log_beside, read_results, run_module

ROOT = Path(__file__).resolve().parents[1]
EVAL_SEED = 200000
MT10 = [
    "reach-v3",
    "push-v3",
    "pick-place-v3",
    "door-open-v3",
    "drawer-open-v3",
    "drawer-close-v3",
    "button-press-topdown-v3",
    "peg-insert-side-v3",
    "window-open-v3",
    "window-close-v3",
]


def _run(args: list[str], log: Path) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    run_module(args, log, ROOT)


def collect(task: str, out: Path, args: argparse.Namespace) -> list[Path]:
    """The task's two files: clean expert successes and noisy, partly failing episodes."""
    files = []
    for kind, extra in (
        ("clean", [f"episodes={args.demos}", "seed=0", "keep=success"]),
        (
            "noisy",
            [
                f"episodes={args.noisy}",
                "seed=1",
                "keep=all",
                f"action_noise_std={args.noise}",
                f"random_segment_prob={args.segment_prob}",
            ],
        ),
    ):
        d = out / "data" / task / kind
        if not (d / "demos.hdf5").exists():
            _run(
                ["robosteer.scripts.collect", f"task={task}", *extra, "progress=false", f"out={d}"],
                log_beside(d),
            )
        files.append(d / "demos.hdf5")
    return files


def _list(paths: list[Path]) -> str:
    return "[" + ",".join(str(p) for p in paths) + "]"


def train_generalist(policy: str, seed: int, files: list[Path], out: Path, args: argparse.Namespace) -> Path:
    run = out / "generalists" / f"{policy}_s{seed}"
    if not (run / "metrics.json").exists():
        _run(
            [
                "robosteer.scripts.train",
                f"policy={policy}",
                f"dataset={_list(files)}",
                f"steps={args.train_steps}",
                f"seed={seed}",
                "progress=false",
                f"out={run}",
                *([] if not (run / "checkpoints" / "latest").exists() else ["resume=true"]),
            ],
            log_beside(run),
        )
    return run


def train_critic(files: list[Path], out: Path, args: argparse.Namespace) -> Path:
    run = out / f"critic_{args.algo}"
    if not (run / "metrics.json").exists():
        _run(
            [
                "robosteer.scripts.value",
                f"algo={args.algo}",
                f"dataset={_list(files)}",
                f"steps={args.critic_steps}",
                f"score={args.score}",
                "seed=0",
                "checkpoint_every=500",
                f"out={run}",
                *([] if not (run / "checkpoints" / "latest").exists() else ["resume=true"]),
            ],
            log_beside(run),
        )
    return run


def sdp_sample(policy: str, k: int, args: argparse.Namespace) -> str | None:
    """The SDP ``sample`` path a cell draws from: SDP through the wrapper only (else None: DP, flow, SDP ``act``)."""
    return args.sdp_sample if policy == "streaming" and (k > 1 or args.replan_every) else None


def evaluate(
    gen: Path, critic: Path, task: str, k: int, levels: str | None, out: Path, args: argparse.Namespace
) -> dict:
    # keyed by everything that changes the result, so a re-run with other --episodes / --temperature never
    # reuses an old cell (cells from before --sdp-sample drew SDP candidates at constant levels: no suffix)
    every = args.replan_every
    name = f"{gen.name}_k{k}_{task}_ep{args.episodes}_t{args.temperature:g}" + (f"_r{every}" if every else "")
    name += f"_{levels}" if levels not in (None, "constant") else ""
    run = out / "evals" / name
    if not (run / "metrics.json").exists():
        _run(
            [
                "robosteer.scripts.evaluate",
                f"checkpoint={gen}",
                "which=ema",
                f"task={task}",
                f"episodes={args.episodes}",
                f"num_envs={args.num_envs}",
                f"seed={EVAL_SEED}",
                # K = 1: the plain generalist (for SDP its native streaming act, not one fresh sample); with
                # --replan-every, K = 1 goes through the wrapper too: one fresh sample per re-plan, executed alike
                *(
                    []
                    if k == 1 and not every
                    else ["steer=vgps", f"critic={critic}", f"samples={k}", f"temperature={args.temperature}"]
                ),
                *([f"replan_every={every}"] if every else []),
                *([f"sample_levels={levels}"] if levels else []),
                "video=false",
                "progress=false",
                f"out={run}",
            ],
            log_beside(run),
        )
    return json.loads((run / "metrics.json").read_text())


def latency(
    gen: Path,
    critic_dir: Path,
    task: str,
    ks: list[int],
    reps: int,
    every: int | None = None,
    sample_levels: str = "streaming",
) -> dict[int, dict[str, float]]:
    """Batch-1 re-plan time of the base and of V-GPS with each K (median ms), on a real observation; the added
    time per control step compares V-GPS re-planning every ``every`` steps with the base's every Ta."""
    import torch

    from robosteer import sim
    from robosteer.policies import load_policy
    from robosteer.policies.steering.vgps import VGPSPolicy
    from robosteer.policies.value import load_critic

    torch.set_num_threads(1)
    policy = load_policy(gen, which="ema")
    policy.set_task(task)
    if policy.name == "streaming":
        policy.set_sample_levels(sample_levels)
    critic = load_critic(critic_dir)
    tid = critic.task_names.index(task) if critic.num_tasks > 1 else None
    with sim.make_env(task, num_envs=1, seed=EVAL_SEED, obs="state") as env:
        o = env.reset(seed=[EVAL_SEED])
    to, ta = policy.config.n_obs_steps, policy.config.n_action_steps
    obs = {k: torch.as_tensor(v).unsqueeze(1).repeat_interleave(to, dim=1).float() for k, v in o.items()}

    def med(fn: object) -> float:
        fn()  # warm-up
        times = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return 1000 * float(np.median(times))

    base = med(lambda: policy.sample(obs))
    out = {}
    for k in ks:
        steered = VGPSPolicy(
            policy, critic, samples=k, score="first" if critic.action_steps == 1 else "chunk", task_id=tid
        )
        ms = med(lambda steered=steered: steered.sample(obs))
        out[k] = {"base_plan_ms": base, "plan_ms": ms, "added_ms_per_step": ms / (every or ta) - base / ta}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", nargs="+", default=MT10)
    parser.add_argument("--policies", nargs="+", default=["diffusion", "flow", "streaming"])
    parser.add_argument("--ks", nargs="+", type=int, default=[1, 4, 16, 32])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--demos", type=int, default=50, help="clean expert demos per task")
    parser.add_argument("--noisy", type=int, default=50, help="noisy, partly failing episodes per task")
    parser.add_argument("--noise", type=float, default=0.3)
    parser.add_argument("--segment-prob", type=float, default=0.02)
    parser.add_argument("--train-steps", type=int, default=20000)
    parser.add_argument("--critic-steps", type=int, default=20000)
    parser.add_argument("--algo", default="calql", choices=["calql", "iql"])
    parser.add_argument("--score", default="first", choices=["first", "chunk"])
    parser.add_argument("--temperature", type=float, default=0.0)  # ours: argmax (reference eval script: 1.0)
    parser.add_argument("--episodes", type=int, default=50)
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--latency-reps", type=int, default=20)
    parser.add_argument(
        "--replan-every",
        type=int,
        default=None,
        help="env steps executed per steered plan (robosteer-eval replan_every; default: the policy's Ta)",
    )
    parser.add_argument(
        "--sdp-sample",
        default="streaming",
        choices=["streaming", "constant"],
        help="SDP's stateless sample path for V-GPS candidates (robosteer-eval sample_levels)",
    )
    parser.add_argument("--out", default="runs/bench/vgps")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    out = (ROOT / args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    results_path = out / "results.jsonl"
    key = ("policy", "seed", "k", "task", "episodes", "temperature", "replan_every", "sample_levels")
    done = read_results(results_path, key, defaults={"replan_every": None, "sample_levels": None})

    files = [f for task in args.tasks for f in collect(task, out, args)]
    critic = train_critic(files, out, args)
    cm = json.loads((critic / "metrics.json").read_text())
    print(f"critic: {critic}: corr(Q, MC return) on its data = {cm.get('q_mc_corr'):.2f}", flush=True)
    lat: dict[tuple[str, int], dict[str, float]] = {}
    for policy in args.policies:
        for seed in args.seeds:
            gen = train_generalist(policy, seed, files, out, args)
            if seed == args.seeds[0]:
                lat_ks = latency(
                    gen, critic, args.tasks[0], args.ks, args.latency_reps, args.replan_every, args.sdp_sample
                )
                for k, v in lat_ks.items():
                    lat[(policy, k)] = v
            for k in args.ks:
                for task in args.tasks:
                    levels = sdp_sample(policy, k, args)
                    cell = (policy, seed, k, task, args.episodes, args.temperature, args.replan_every, levels)
                    if cell in done:
                        continue
                    m = evaluate(gen, critic, task, k, levels, out, args)
                    r = {
                        "policy": policy,
                        "seed": seed,
                        "k": k,
                        "task": task,
                        "success_rate": m["success_rate"],
                        "episodes": m["episodes"],
                        "plan_sample_ms": m.get("plan_sample_ms"),
                        "plan_score_ms": m.get("plan_score_ms"),
                        "temperature": args.temperature,
                        "replan_every": args.replan_every,
                        "sample_levels": levels,
                    }
                    done[cell] = r
                    with results_path.open("a") as f:
                        f.write(json.dumps(r) + "\n")
                    print(json.dumps(r), flush=True)

    cells: dict[tuple[str, int], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in done.values():
        if (
            r["task"] in args.tasks
            and r["episodes"] == args.episodes
            and r["temperature"] == args.temperature
            and r["replan_every"] == args.replan_every
            and r["sample_levels"] == sdp_sample(r["policy"], r["k"], args)
        ):
            cells[(r["policy"], r["k"])][r["seed"]].append(r["success_rate"])
    print(
        f"\nMT{len(args.tasks)} average success on {args.episodes} unseen episodes per task (eval seed {EVAL_SEED}); "
        f"K = 1 is the generalist without V-GPS; β = {args.temperature}; one {args.algo} critic for all; "
        f"re-plan every {args.replan_every or 'Ta'} steps; SDP candidates: {args.sdp_sample} sample; "
        f"latency: batch 1, 1 thread, load average {os.getloadavg()[0]:.1f}"
    )
    print("| policy | K | success per seed | mean | re-plan ms | added ms / control step |")
    print("|---|---|---|---|---|---|")
    for (policy, k), per_seed in sorted(cells.items()):
        means = [float(np.mean(v)) for _, v in sorted(per_seed.items()) if len(v) == len(args.tasks)]
        if not means:
            continue
        lt = lat.get((policy, k), {})
        plan = f"{lt['plan_ms']:.1f}" if lt else "-"
        added = f"{lt['added_ms_per_step']:.2f}" if lt else "-"
        print(
            f"| {policy} | {k} | {', '.join(f'{m:.2f}' for m in means)} | {np.mean(means):.2f} | {plan} | {added} |"
        )


if __name__ == "__main__":
    main()

"""The steering benchmarks' shared runs: the weak base they steer, robosteer-eval on the unseen episodes (eval
seed 200000), and a run's kept checkpoints scored there. A library, not a script: dsrl_steering.py,
expo_steering.py and pixels.py (and the investigations under experiments/) import it, never each other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from robosteer.scripts.common import log_beside, run_module

ROOT = Path(__file__).resolve().parents[1]
EVAL_SEED = 200000


def run_logged(args: list[str], log: Path) -> None:
    """``python -m MODULE ARGS`` from the repository root, its output in ``log`` (tests replace it)."""
    run_module(args, log, ROOT)


def evaluate(
    checkpoint: Path, task: str, episodes: int, out: Path, which: str = "ema", deterministic: bool = True
) -> float:
    """robosteer-eval's success on the unseen episodes (cached in ``out``); ``deterministic=False``: a steering
    run's actor samples its latents instead of acting with their mean."""
    if not (out / "metrics.json").exists():
        run_logged(
            [
                "robosteer.scripts.evaluate",
                f"checkpoint={checkpoint}",
                f"which={which}",
                f"task={task}",
                f"episodes={episodes}",
                f"seed={EVAL_SEED}",
                *([] if deterministic else ["deterministic=false"]),
                "video=false",
                "progress=false",
                f"out={out}",
            ],
            log_beside(out),
        )
    return float(json.loads((out / "metrics.json").read_text())["success_rate"])


def evaluate_in_process(
    policy: Any, task: str, episodes: int, out: Path, which: str, episode_max: tuple[str, ...] = ()
) -> float:
    """A loaded steering policy's success on the unseen episodes (cached in ``out``), as robosteer-eval scores it:
    for actors no checkpoint holds as such (the trained actor beside an averaged one, an average of kept actors).
    ``episode_max``: per-step info keys whose per-episode maximum ``out/metrics.json`` keeps (sim.evaluate)."""
    import torch

    from robosteer import sim
    from robosteer.scripts.evaluate import obs_mode

    metrics = out / "metrics.json"
    if not metrics.exists():
        torch.set_num_threads(1)
        mode, cams, size = obs_mode(policy.shape_meta)  # the inputs robosteer-eval gives it (state or pixels)
        inputs = {"obs": mode, "cameras": cams, "image_size": size}
        with torch.no_grad(), sim.make_env(task, num_envs=4, seed=EVAL_SEED, **inputs) as env:
            m = sim.evaluate(
                env, policy, episodes=episodes, seed=EVAL_SEED, progress=False, episode_max=episode_max
            )
        m |= {"steered": True, "which": which}  # as robosteer-eval labels what it evaluated
        out.mkdir(parents=True, exist_ok=True)
        metrics.write_text(json.dumps(m))
    return float(json.loads(metrics.read_text())["success_rate"])


def evaluate_trained(run: Path, task: str, episodes: int, out: Path) -> float | None:
    """The final checkpoint's *trained* actor on the same unseen states as ``evaluate`` (what the run would
    act with without ``dsrl.actor_tau``), beside the averaged actor it acts with; None when it keeps none."""
    from robosteer.policies.steering.dsrl import load_steered_policy

    if not (out / "metrics.json").exists():
        policy = load_steered_policy(str(run), trained=True)
        if policy.agent.actor_avg is None:
            return None
        return evaluate_in_process(policy, task, episodes, out, "latest (trained)")
    return float(json.loads((out / "metrics.json").read_text())["success_rate"])


def kept_checkpoints(run: Path) -> list[Path]:
    """The checkpoints a run kept (``run.keep_every``), in step order (their names are zero-padded steps)."""
    history = run / "checkpoints" / "history"
    return sorted(history.iterdir()) if history.is_dir() else []


def kept_steps(checkpoint: Path) -> int:
    """The env steps at which a kept checkpoint was written."""
    return int(json.loads((checkpoint / "extra.json").read_text())["counters"]["env_steps"])


def unseen_history(run: Path, task: str, episodes: int, deterministic: bool = True) -> list[dict]:
    """The acting actor of every checkpoint the run kept (``run.keep_every``) on the unseen episodes: a late
    decline shows here, on the same episodes as the final figure, not only in the 50 validation episodes
    that pick ``best``. ``deterministic=False``: the same actors sampling their latents (``_eval_kept_sampled``)."""
    kept = kept_checkpoints(run)
    where = "_eval_kept" if deterministic else "_eval_kept_sampled"
    return [
        {
            "env_steps": kept_steps(ck),
            "success_rate": evaluate(
                ck, task, episodes, Path(f"{run}{where}/{ck.name}"), "latest", deterministic
            ),
        }
        for ck in kept
    ]


def weak_base(
    task: str,
    out: Path,
    noise: float,
    steps: int,
    episodes: int,
    demos: int = 100,
    augment: float | str = 0.0,
) -> tuple[Path, Path, float]:
    """Collect ``demos`` noisy demos and train the weak base once per task: (base, demos, success on unseen
    states). A base is weakened by noisy demos (``noise``) or by few of them (``demos``); ``augment`` trains
    it with that action noise on the demos' actions (robosteer-train action_noise_std=; ``"auto"``: the
    smallest the steerability check calls steerable, its choice in the base's metrics.json)."""
    tag = f"noise{noise}" if demos == 100 else f"{demos}demos_noise{noise}"  # 100: the original names
    data = out / task / f"demos_{tag}"
    if not (data / "demos.hdf5").exists():
        run_logged(
            [
                "robosteer.scripts.collect",
                f"task={task}",
                f"episodes={demos}",
                "seed=0",
                f"action_noise_std={noise}",
                "keep=all",
                "progress=false",
                f"out={data}",
            ],
            out / f"{task}_collect.log",
        )
    base = out / task / (f"base_dp_{tag}_{steps}" + (f"_aug{augment}" if augment else ""))
    if not (base / "metrics.json").exists():
        run_logged(
            [
                "robosteer.scripts.train",
                "policy=diffusion",
                f"dataset={data / 'demos.hdf5'}",
                f"task={task}",
                f"steps={steps}",
                *([f"action_noise_std={augment}"] if augment else []),
                "eval_episodes=50",
                "progress=false",
                f"out={base}",
            ],
            log_beside(base, ".train.log"),
        )
    return base, data / "demos.hdf5", evaluate(base, task, episodes, Path(f"{base}_eval"))


def steer_budget(args: Any, seed: int, run: Path) -> list[str]:
    """The ``robosteer-steer`` overrides every benchmark run shares: budget, seed, no base eval, output."""
    return [
        f"env_steps={args.env_steps}",
        f"run.max_minutes={args.max_minutes}",
        f"seed={seed}",
        "eval_base=false",
        "run.progress=false",
        f"out={run}",
    ]

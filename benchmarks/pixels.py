"""Policies from pixels (``obs=pixels``: proprio + one camera, no privileged state) beside the same policies
from state, on the same demos and wall budget; the encoders' training throughput; env steps/s with images.

Six parts, each appending rows (``part``: encoders | env | train | deploy | steer | probe) to ``--rows``:

- ``encoders``: samples/s of one Diffusion Policy training step (forward, backward, AdamW) on a batch of
  84 px images at To=2, per encoder (ours ``small`` at two widths, diffusion_policy's ResNet-18), in this
  process; the bare denoiser step on the same batch without images is the floor.
- ``env``: env steps/s of one env, state-only against ``obs=pixels`` at 84 and 64 px, and chunked (Ta=8, To=2)
  with images rendered at every step against only at the steps a chunked policy reads (``render=policy_steps``).
- ``train``: ``robosteer-train obs=<obs> policy=<p>`` on ``--demos`` push-v3 (etc.) demos collected with
  ``obs=pixels`` (the file holds state too, so both columns train on the same episodes), capped at
  ``--minutes`` of training, then 100 unseen evaluation episodes. Data vs update time come from the run.

- ``deploy``: ``robosteer-deploy robot=sim_twin policy=<--base>`` at Meta-World's 80 Hz (the twin in its own
  process renders the policy's cameras at every control tick and streams them as uint8), per ``--modes``, beside
  ``robosteer-eval`` of the same checkpoint on the same episode seeds: success, held ticks, inference and tick
  lateness.

- ``steer``: ``robosteer-steer base=<--base>`` (DSRL-NA from pixels through the base's own embedding, the
  CLI's defaults plus ``--steer-overrides``, ``--env-steps`` within ``--steer-minutes``), then 100 unseen
  episodes (seed 200000) with ``robosteer-eval`` of its final actor (``which=latest``) and of the one its periodic
  evaluations picked (``which=best``), and of its final trained actor where it acts with an averaged one
  (``dsrl.actor_tau``): success before (the base's stock sampler) and after, env steps, wall time.

- ``probe``: what the base's embedding (what DSRL's actor reads from pixels) tells of the scene. On the base's own
  demonstrations (every fifth episode held out), the object's and the goal's x, y (the simulator's state, used
  here only as labels) are read out of the embedding by ridge regression and by a small MLP; the arm's proprio
  alone is the floor, and the base's observation encoder trained afresh on the labels (``--probe-steps``) shows
  what the pixels hold: R² and the error in cm on the held-out windows. With ``--evals``, each
  ``robosteer-eval`` run's success by the third of the goal's y its episodes drew.

Run: ``python benchmarks/pixels.py encoders env`` (minutes), ``python benchmarks/pixels.py deploy --base <run>``, ``python benchmarks/pixels.py train --tasks push-v3
--policies diffusion --obs pixels state --seeds 0 1`` (45 min of CPU per cell).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import yaml
from results_tables import append_row, steered_base_which
from steering_runs import (  # evaluate_trained: the final trained (not averaged) actor
    EVAL_SEED,
    evaluate_trained,
)
from steering_runs import evaluate as evaluate_once  # robosteer-eval of a checkpoint once, at seed 200000

from robosteer.policies.checkpoint import find_checkpoint, read_checkpoint_config
from robosteer.scripts.common import run_module

ROOT = Path(__file__).resolve().parents[1]
ENCODERS: dict[str, dict] = {  # name -> policy overrides (the defaults are configs/policy/diffusion.yaml's)
    "small [16,32,32] (default)": {"rgb_channels": (16, 32, 32), "rgb_crop": 0.9},
    "small [32,64,128]": {"rgb_channels": (32, 64, 128), "rgb_crop": 0.9},
    "resnet18 (diffusion_policy)": {"rgb_arch": "resnet18", "rgb_crop": 0.9},
}


def encoder_rows(batch: int, seconds: float, threads: int) -> list[dict]:
    """samples/s of a full training step per encoder; the denoiser alone on proprio is the floor."""
    import torch

    from robosteer.policies.data.stats import compute_stats
    from robosteer.policies.registry import make_policy

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    lowdim = {"proprio": {"shape": [4], "type": "low_dim"}}
    image = {"image/corner": {"shape": [84, 84, 3], "type": "rgb"}}
    rand = np.random.default_rng(0)
    stats = compute_stats(
        {k: [rand.standard_normal((100, 4)).astype(np.float32)] for k in ("proprio", "action")}
    )
    rows = []
    for name, overrides, obs in [("no images (floor)", {}, lowdim)] + [
        (n, o, {**lowdim, **image}) for n, o in ENCODERS.items()
    ]:
        policy = make_policy("diffusion", {"obs": obs, "action": {"shape": [4]}}, stats, **overrides)
        policy.train()
        opt = torch.optim.AdamW(policy.parameters(), 1e-4)
        b = {"obs": {"proprio": torch.randn(batch, 2, 4)}, "action": torch.randn(batch, 16, 4)}
        if "image/corner" in obs:
            b["obs"]["image/corner"] = torch.randint(0, 256, (batch, 2, 84, 84, 3), dtype=torch.uint8)
        steps, start = 0, 0.0
        while steps < 3 or time.perf_counter() - start < seconds:
            if steps == 2:  # two warm-up steps
                start = time.perf_counter()
            loss, _ = policy.loss(b)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
        per_s = batch * (steps - 2) / (time.perf_counter() - start)
        params = sum(p.numel() for p in policy.obs_encoder.parameters())
        row = {"encoder": name, "batch_size": batch, "threads": threads}
        rows.append(row | {"samples_per_s": per_s, "encoder_params": params})
        print(f"| {name} | {params / 1e6:.2f}M | {per_s:.0f} |", flush=True)
    return rows


def chunked_env_steps_per_s(task: str, size: int, seconds: float, render: str) -> float:
    """Env steps/s of one chunked env (Ta=8, To=2 windows, obs=pixels), as the steering loop steps it."""
    from robosteer import sim

    kw = dict(
        obs="pixels", cameras=("corner",), image_size=size, action_chunk=8, obs_history=2, render=render
    )
    with sim.make_env(task, **kw) as env:
        env.reset(seed=0)
        chunk = np.zeros((1, 8, 4), np.float32)
        executed, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            executed += int(env.step(chunk)[4]["steps_executed"][0])
        return executed / (time.perf_counter() - start)


def env_rows(task: str, seconds: float) -> list[dict]:
    """Env steps/s of one env: state-only, proprio + one 84 / 64 px camera, and chunked with each render mode."""
    from env_rates import image_env_steps_per_s

    rows = []
    one, two = ("corner",), ("corner", "gripperPOV")  # a second, wrist-like camera: what it costs
    cells = [("state", 0, "every_step", 1, one), ("pixels", 84, "every_step", 1, one)]
    cells += [("pixels", 84, "every_step", 1, two), ("pixels", 64, "every_step", 1, one)]
    cells += [("pixels", 84, "every_step", 8, one), ("pixels", 84, "policy_steps", 8, one)]
    for obs, size, render, chunk, cams in cells:
        if chunk == 1:
            per_s = image_env_steps_per_s(task, size or 84, seconds, obs, cams)
        else:
            per_s = chunked_env_steps_per_s(task, size, seconds, render)
        row = {"task": task, "obs": obs, "image_size": size, "render": render, "chunk": chunk}
        rows.append(row | {"cameras": len(cams) if obs != "state" else 0, "env_steps_per_s": per_s})
        print(f"| {obs} | {size or '-'} | {len(cams)} | {chunk} | {render} | {per_s:,.0f} |", flush=True)
    return rows


def tb_split(run: Path) -> tuple[float | None, float | None]:
    """Mean data and update seconds per step over the run's TensorBoard scalars."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tb"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    mean = lambda t: float(np.mean([e.value for e in acc.Scalars(t)])) if t in tags else None  # noqa: E731
    return mean("time/data_s_per_step"), mean("time/update_s_per_step")


def train_rows(args: argparse.Namespace, out: Path) -> list[dict]:
    rows = []
    for task in args.tasks:
        demos = out / f"{task}_demos"
        if not (demos / "metrics.json").exists():
            collect = ["robosteer.scripts.collect", f"task={task}", f"episodes={args.demos}", "obs=pixels"]
            run_module(
                [*collect, *args.collect_overrides, "progress=false", f"out={demos}"],
                out / f"{task}_collect.log",
                ROOT,
            )
        for policy in args.policies:
            for obs in args.obs:
                for seed in args.seeds:
                    run = out / f"{task}_{policy}_{obs}_s{seed}"
                    train = ["robosteer.scripts.train", f"policy={policy}", f"obs={obs}", f"seed={seed}"]
                    train += [f"dataset={demos / 'demos.hdf5'}", f"steps={args.steps}"]
                    train += [f"max_minutes={args.minutes}", f"task={task}", f"eval_episodes={args.episodes}"]
                    train += [*args.overrides, "progress=false", f"out={run}"]
                    if args.stop_at_step:
                        train += [f"stop_at_step={args.stop_at_step}"]
                    if not (run / "metrics.json").exists():
                        run_module(train, run.with_suffix(".log"), ROOT)
                    m = json.loads((run / "metrics.json").read_text())
                    trained = read_checkpoint_config(find_checkpoint(run, "latest")[0])
                    data_s, update_s = tb_split(run)
                    row = {"task": task, "policy": policy, "obs": obs, "seed": seed, "demos": args.demos}
                    row |= {
                        k: m[k]
                        for k in ("steps", "batch_size", "samples_per_s", "wall_time_s", "success_rate")
                    }
                    row |= {
                        "episodes": args.episodes,
                        "minutes": args.minutes,
                        "schedule_steps": args.steps,
                        **({"note": args.note} if args.note else {}),
                        **({"overrides": list(args.overrides)} if args.overrides else {}),
                        **(
                            {"collect_overrides": list(args.collect_overrides)}
                            if args.collect_overrides
                            else {}
                        ),
                        **({"stop_at_step": args.stop_at_step} if args.stop_at_step else {}),
                        "data_s_per_step": data_s,
                        "update_s_per_step": update_s,
                        "num_params": m["num_params"],
                        "n_obs_steps": trained["policy"]["config"]["n_obs_steps"],
                    }
                    rows.append(row)
                    print(
                        f"| {task} | {policy} | {obs} | {seed} | {m['steps']} | {m['samples_per_s']:.0f} | "
                        f"{m['wall_time_s'] / 60:.1f} | {m['success_rate']:.2f} |",
                        flush=True,
                    )
    return rows


def demos_action_noise(base: Path) -> float | None:
    """The action noise (σ) of the demos a base trained on, from its dataset's collect config (None: unknown)."""
    trained = read_checkpoint_config(find_checkpoint(base, "latest")[0])
    collect_cfg = Path(trained["dataset"][0]).parent / "config.yaml"
    if not collect_cfg.exists():
        return None
    return float(yaml.safe_load(collect_cfg.read_text()).get("action_noise_std", 0.0))


def base_eval_row(args: argparse.Namespace, out: Path) -> tuple[dict, bool]:
    """The base as steering reads it (its ``which`` weights, stock sampler) on the same unseen episodes as the
    steered actors (seed 200000), so a lift is a paired difference: (row, whether it was measured just now)."""
    which = steered_base_which(args.steer_overrides)
    task = read_checkpoint_config(find_checkpoint(Path(args.base), "latest")[0])["task"]
    ev = out / f"base_eval_{which}_{args.episodes}"
    fresh = not (ev / "metrics.json").exists()
    success = evaluate_once(Path(args.base), task, args.episodes, ev, which=which)
    row = {"part": "base_eval", "task": task, "base": str(args.base), "which": which}
    row |= {"episodes": args.episodes, "eval_seed": EVAL_SEED, "success_rate": success}
    return row, fresh


def steer_rows(args: argparse.Namespace, out: Path) -> list[dict]:
    """DSRL-NA from pixels on ``args.base`` per seed: the steering run, then 100 unseen episodes of its actor,
    beside the base's own success on the same episodes (one ``base_eval`` row per base). A finished run with
    fewer env steps than ``--env-steps`` is extended from its last checkpoint and evaluated anew."""
    if not args.base:
        raise SystemExit("steer: pass --base <run directory of a policy trained with obs=pixels>")
    base_row, fresh = base_eval_row(args, out)
    rows = [base_row] if fresh else []
    for seed in args.seeds:
        run = out / f"dsrl_s{seed}"
        steer = [
            "robosteer.scripts.steer",
            f"base={args.base}",
            f"env_steps={args.env_steps}",
            f"seed={seed}",
        ]
        steer += [f"run.max_minutes={args.steer_minutes}", f"run.eval_every={args.eval_every}"]
        steer += ["run.eval_episodes=50", "run.checkpoint_every=5000", "run.progress=false"]
        steer += [*args.steer_overrides, f"out={run}"]
        metrics = run / "metrics.json"
        if metrics.exists() and (steps := json.loads(metrics.read_text())["env_steps"]) < args.env_steps:
            # extend it from its last checkpoint (its metrics kept aside: their wall time adds to the row's);
            # its actors are evaluated anew
            metrics.rename(run / f"metrics_{steps}.json")
            for which in ("latest", "best", "trained"):
                shutil.rmtree(f"{run}_eval_{which}", ignore_errors=True)
        if not metrics.exists():
            resume = ["resume=true"] if (run / "checkpoints" / "latest").exists() else []
            run_module([*steer, *resume], run.with_suffix(".log"), ROOT)
        m = json.loads(metrics.read_text())
        unseen = {  # the final actor (latest) and the periodic evals' pick (best), on the same unseen episodes
            which: evaluate_once(run, m["task"], args.episodes, Path(f"{run}_eval_{which}"), which=which)
            for which in ("latest", "best")
        }
        final = unseen["latest"]
        trained = evaluate_trained(run, m["task"], args.episodes, Path(f"{run}_eval_trained"))
        row = {"task": m["task"], "algo": "dsrl-na", "obs": "pixels", "seed": seed, "base": str(args.base)}
        row["base_demos_action_noise"] = demos_action_noise(Path(args.base))
        row |= {k: m[k] for k in ("base_success_rate", "initial_success_rate", "success_rate", "env_steps")}
        row |= {
            "best_success_rate": m["best_success_rate"],
            "best_env_steps": m["best_env_steps"],
            "final_eval_success_rate": final,
            "base_eval_success_rate": base_row["success_rate"],  # the same unseen episodes
            "best_eval_success_rate": unseen["best"],
            "trained_eval_success_rate": trained,  # the final trained actor (the averaged one acts): None if none
            "final_eval_episodes": args.episodes,
            "steer_eval_episodes": 50,
            "steerability_ratio": (m.get("steerability") or {}).get("ratio"),
            # every session of the run: a resumed session's metrics count only its own wall time
            "wall_time_s": m["wall_time_s"]
            + sum(json.loads(p.read_text())["wall_time_s"] for p in run.glob("metrics_*.json")),
            "env_steps_budget": args.env_steps,
            **({"overrides": list(args.steer_overrides)} if args.steer_overrides else {}),
            **({"note": args.note} if args.note else {}),
        }
        rows.append(row)
        print(
            f"| {m['task']} | {seed} | {base_row['success_rate']:.2f} | {final:.2f} | "
            f"{unseen['best']:.2f} | {m['env_steps']} | {row['wall_time_s'] / 60:.1f} |",
            flush=True,
        )
    return rows


# Meta-World v3's state layout (push-v3): the object's position at 4:7, the goal's at 36:39.
PROBE_TARGETS = {"object x": 4, "object y": 5, "goal x": 36, "goal y": 37}


def _fit_scores(pred: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per target: R² and root-mean-square error of ``pred`` against ``truth`` (N, T); R² is NaN where the
    target does not vary over ``truth`` (one held-out episode holds one goal)."""
    err, var = ((pred - truth) ** 2).mean(0), truth.var(0)
    varies = var > 1e-12  # a spread under a micrometre is rounding, not a target that moves
    return np.where(varies, 1.0 - err / np.where(varies, var, 1.0), np.nan), np.sqrt(err)


def probe_rows(args: argparse.Namespace) -> list[dict]:
    """The object's and the goal's x, y read out of the base's embedding (ridge, MLP), of the proprio alone, and of
    the base's encoder trained afresh on them, on held-out demonstration windows: what a steering actor that
    reads the embedding can know of where to push."""
    import copy

    import torch

    from robosteer.policies.checkpoint import load_policy
    from robosteer.policies.data import open_dataset
    from robosteer.policies.steering.embedding import BaseEmbedding, embed_windows

    if not args.base:
        raise SystemExit("probe: pass --base <run directory of a policy trained with obs=pixels>")
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    which = steered_base_which(args.steer_overrides)
    base = load_policy(args.base, which=which)
    embedding = BaseEmbedding(base)
    dataset = read_checkpoint_config(find_checkpoint(Path(args.base), "latest")[0])["dataset"][0]
    if "proprio" not in embedding.raw_keys:
        raise SystemExit(
            f"probe: the base reads {list(embedding.raw_keys)}; it needs a base trained with obs=pixels"
        )
    windows: dict[str, list[np.ndarray]] = {k: [] for k in embedding.raw_keys}
    labels, episode = [], []
    to = int(base.config.n_obs_steps)
    with open_dataset(dataset) as demos:  # the one reader: camera keys in either image layout
        # sorted by name, as before, so the held-out fifth is unchanged
        for i, name in enumerate(sorted(demos.demo_names)):
            obs = demos.episode(name, list(dict.fromkeys([*embedding.raw_keys, "state"])))["obs"]
            n = len(obs["state"])
            frames = np.clip(np.arange(n)[:, None] + np.arange(1 - to, 1), 0, None)  # (T, To), first repeated
            for k in embedding.raw_keys:  # (T, ...) -> windows (T, To, ...), as the policy reads them
                windows[k].append(obs[k][frames])
            labels.append(obs["state"][:, list(PROBE_TARGETS.values())])
            episode += [i] * len(labels[-1])
    raw = {k: np.concatenate(v) for k, v in windows.items()}  # {key: (N, To, ...)}
    y = np.concatenate(labels)  # (N, 4) metres
    test = np.asarray(episode) % 5 == 0
    emb = embed_windows(embedding, raw)[:, 0]  # (N, G)
    proprio = raw["proprio"][:, -1].astype(np.float64)  # (N, P): the arm's state now

    def ridge(x: np.ndarray) -> np.ndarray:
        x = np.c_[x, np.ones(len(x))]
        w = np.linalg.solve(x[~test].T @ x[~test] + 1e-3 * np.eye(x.shape[1]), x[~test].T @ y[~test])
        return x[test] @ w

    ym = y[~test].mean(0)
    ys = np.maximum(y[~test].std(0), 1e-6)  # a goal fixed over the fitted windows divides by no zero
    target = torch.tensor((y - ym) / ys, dtype=torch.float32)  # (N, 4) standardised labels
    train_idx = np.flatnonzero(~test)
    rng = np.random.default_rng(0)

    def fit(forward, params, inputs, steps: int, lr: float) -> np.ndarray:
        opt = torch.optim.AdamW(params, lr)
        for _ in range(steps):
            b = rng.choice(train_idx, 64)
            loss = ((forward(inputs(b), True) - target[b]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            idx = np.flatnonzero(test)
            pred = [forward(inputs(idx[i : i + 256]), False).numpy() for i in range(0, len(idx), 256)]
        return np.concatenate(pred) * ys + ym

    e = torch.tensor((emb - emb[~test].mean(0)) / (emb[~test].std(0) + 1e-6), dtype=torch.float32)
    mlp = torch.nn.Sequential(
        torch.nn.Linear(e.shape[1], 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU()
    )
    mlp.append(torch.nn.Linear(256, len(PROBE_TARGETS)))
    fresh = copy.deepcopy(base)  # the base's encoder and normaliser, its weights drawn anew
    for module in fresh.obs_encoder.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()
    head = torch.nn.Linear(embedding.dim, len(PROBE_TARGETS))

    def encoder(obs: dict, training: bool) -> torch.Tensor:
        fresh.train(training)
        return head(fresh.encode_obs(obs))

    t0 = time.perf_counter()
    preds = {
        "proprio, ridge": ridge(proprio),
        "base embedding, ridge": ridge(emb.astype(np.float64)),
        "base embedding, MLP": fit(lambda x, _t: mlp(x), mlp.parameters(), lambda b: e[b], 3000, 1e-3),
        "base encoder trained on the labels": fit(
            encoder,
            [*fresh.obs_encoder.parameters(), *head.parameters()],
            lambda b: {k: torch.as_tensor(v[b]) for k, v in raw.items()},
            args.probe_steps,
            3e-4,
        ),
    }
    rows = []
    for readout, pred in preds.items():
        r2, rmse = _fit_scores(pred, y[test])
        for j, name in enumerate(PROBE_TARGETS):
            row = {"task": base.task, "base": str(args.base), "which": which, "target": name}
            row |= {"readout": readout, "r2": float(r2[j]) if np.isfinite(r2[j]) else None}
            row |= {"rmse_cm": float(100 * rmse[j])}
            row |= {
                "spread_cm": float(100 * y[test][:, j].std()),
                "windows": len(y),
                "test_windows": int(test.sum()),
            }
            row |= {"probe_steps": args.probe_steps, "wall_time_s": time.perf_counter() - t0}
            rows.append(row)
            print(f"| {name} | {readout} | {r2[j]:.2f} | {100 * rmse[j]:.1f} |", flush=True)  # nan: constant
    return rows


def goal_thirds_rows(evals: list[Path]) -> list[dict]:
    """Success of each ``robosteer-eval`` run by the third of the goal's y its episodes drew (each episode's goal
    replayed from its seed): an actor that cannot see the goal along y aims at one y, and its success falls
    with the distance from it; one that sees it does not."""
    from robosteer.sim.metaworld_env import MetaWorldEnv

    rows, envs = [], {}
    for ev in evals:
        m = json.loads((Path(ev) / "metrics.json").read_text())
        env = envs.setdefault(m["task"], MetaWorldEnv(m["task"]))
        goal_y = np.array(
            [env.reset(seed=int(s))[0]["state"][PROBE_TARGETS["goal y"]] for s in m["episode_seeds"]]
        )
        third = np.digitize(
            goal_y, np.quantile(goal_y, [1 / 3, 2 / 3])
        )  # (episodes,) 0 low, 1 middle, 2 high
        ok = np.asarray(m["successes"], dtype=bool)
        row = {"part": "probe_goal", "task": m["task"], "eval": str(ev), "which": m.get("which")}
        row |= {"steered": bool(m.get("steered")), "episodes": len(ok), "success_rate": float(ok.mean())}
        row |= {"thirds": [float(ok[third == t].mean()) for t in range(3)]}
        row |= {"thirds_episodes": [int((third == t).sum()) for t in range(3)]}
        row |= {"goal_y_cm": [float(100 * goal_y.min()), float(100 * goal_y.max())]}
        rows.append(row)
        print(f"| {ev} | {row['success_rate']:.2f} | " + " | ".join(f"{x:.2f}" for x in row["thirds"]) + " |")
    return rows


def deploy_rows(args: argparse.Namespace, out: Path) -> list[dict]:
    """The pixel policy ``args.base`` on the sim twin at 80 Hz, per mode, beside robosteer-eval of it."""
    if not args.base:
        raise SystemExit("deploy: pass --base <run directory of a policy trained with obs=pixels>")
    ev = out / "deploy_eval"
    if not (ev / "metrics.json").exists():
        evaluate = ["robosteer.scripts.evaluate", f"checkpoint={args.base}", f"episodes={args.episodes}"]
        evaluate += ["obs=pixels", "seed=100000", "video=false", "progress=false", f"out={ev}"]
        run_module(evaluate, ev.with_suffix(".log"), ROOT)
    reference = json.loads((ev / "metrics.json").read_text())
    rows = []
    for mode in args.modes:
        run = out / f"deploy_{mode}"
        if not (run / "metrics.json").exists():
            deploy = ["robosteer.scripts.deploy", "robot=sim_twin", f"policy={args.base}", "obs=pixels"]
            deploy += [f"episodes={args.episodes}", f"mode={mode}", "robot.driver.rate_hz=80", "seed=100000"]
            deploy += ["progress=false", f"out={run}"]
            run_module(deploy, run.with_suffix(".log"), ROOT)
        m = json.loads((run / "metrics.json").read_text())
        eps = m["per_episode"]
        row = {"task": m["task"], "base": str(args.base), "mode": mode, "rate_hz": 80.0}
        row |= {"cameras": m["driver"]["cameras"], "image_size": m["driver"]["image_size"]}
        row |= {k: m[k] for k in ("episodes", "success_rate", "mean_steps", "infer_ms_mean", "held_ticks")}
        row |= {
            "ticks": int(sum(e["ticks"] for e in eps)),
            "tick_late_ms_p99_max": float(max(e["tick_late_ms_p99"] for e in eps)),
            "eval_success_rate": reference["success_rate"],
            "eval_episodes": reference["episodes"],
        }
        rows.append(row)
        print(
            f"| {m['task']} | {mode} | {m['success_rate']:.2f} | {reference['success_rate']:.2f} | "
            f"{m['held_ticks']} / {row['ticks']} | {m['infer_ms_mean']:.1f} |",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("parts", nargs="+", choices=["encoders", "env", "train", "steer", "deploy", "probe"])
    parser.add_argument("--base", default=None, help="steer: the pixel policy's run directory")
    parser.add_argument("--env-steps", type=int, default=30000, help="steer: env steps per run")
    parser.add_argument("--steer-minutes", type=float, default=40.0, help="steer: wall budget per run")
    parser.add_argument(
        "--eval-every", type=int, default=10000, help="steer: env steps between periodic evals"
    )
    parser.add_argument(
        "--steer-overrides",
        nargs="*",
        default=[],
        help="steer: robosteer-steer overrides, e.g. dsrl.latent_bound=1.5 (recorded in the row)",
    )
    parser.add_argument(
        "--probe-steps", type=int, default=3000, help="probe: training steps of the freshly drawn encoder"
    )
    parser.add_argument(
        "--evals",
        nargs="*",
        type=Path,
        default=[],
        help="probe: robosteer-eval run directories whose success is split by the goal's y",
    )
    parser.add_argument("--modes", nargs="+", default=["sync", "async"], help="deploy: runtime modes")
    parser.add_argument("--seconds", type=float, default=10.0, help="encoders / env: measuring time per cell")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--tasks", nargs="+", default=["push-v3"])
    parser.add_argument("--policies", nargs="+", default=["diffusion"])
    parser.add_argument("--obs", nargs="+", default=["pixels"], choices=["pixels", "state"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--demos", type=int, default=100)
    parser.add_argument("--steps", type=int, default=15000, help="the LR schedule's length")
    parser.add_argument("--minutes", type=float, default=42.0, help="training wall budget per cell")
    parser.add_argument(
        "--stop-at-step",
        type=int,
        default=None,
        help="also stop here (a budget in steps, not load-dependent)",
    )
    parser.add_argument("--note", default=None, help="a remark stored with each train row")
    parser.add_argument(
        "--overrides",
        nargs="*",
        default=[],
        help="train: robosteer-train overrides, e.g. policy.n_obs_steps=1",
    )
    parser.add_argument(
        "--collect-overrides",
        nargs="*",
        default=[],
        help="train: robosteer-collect overrides for the demos, e.g. action_noise_std=0.3 (a weak, steerable base)",
    )
    parser.add_argument("--episodes", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench" / "pixels")
    parser.add_argument("--rows", default="docs/results/pixels.jsonl")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    for part in args.parts:
        if part == "encoders":
            print("| encoder | params | training samples/s |\n|---|---:|---:|")
            rows = encoder_rows(args.batch_size, args.seconds, args.threads)
        elif part == "env":
            print(
                "| obs | image px | cameras | chunk | render | env steps/s |\n|---|---:|---:|---:|---|---:|"
            )
            rows = env_rows(args.tasks[0], args.seconds)
        elif part == "deploy":
            print(
                "| task | mode | twin, 80 Hz | robosteer-eval | held ticks | infer ms |\n|---|---|---:|---:|---:|---:|"
            )
            rows = deploy_rows(args, out)
        elif part == "probe":
            print("| target | read out of | R² | error cm |\n|---|---|---:|---:|")
            rows = probe_rows(args) if args.base or not args.evals else []
            if args.evals:
                print(
                    "| robosteer-eval | success | goal y: low third | middle | high third |\n|---|---:|---:|---:|---:|"
                )
                rows += goal_thirds_rows(args.evals)
        elif part == "steer":
            print(
                "| task | seed | base, same ep. | final, 100 ep. | best, 100 ep. | env steps | wall min |\n|---|---:|---:|---:|---:|---:|---:|"
            )
            rows = steer_rows(args, out)
        else:
            print(
                "| task | policy | obs | seed | steps | samples/s | train min | success |\n|---|---|---|---:|---:|---:|---:|---:|"
            )
            rows = train_rows(args, out)
        for row in rows if args.rows else []:  # --rows '': print only
            append_row(args.rows, {"part": part, **row})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

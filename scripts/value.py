"""robosteer-value: train an offline critic (IQL or Cal-QL) on demonstrations for V-GPS steering.

    robosteer-value algo=calql dataset=runs/demos/demos.hdf5 steps=20000 out=runs/critic
    robosteer-value algo=iql dataset=[runs/mt/a.hdf5,runs/mt/b.hdf5] steps=20000 out=runs/critic_mt

The run directory holds ``config.yaml``, ``metrics.json``, TensorBoard curves under ``tb/`` and
``checkpoints/latest`` (the critic with its own normaliser, plus everything for ``resume=true``).
``robosteer-eval ... steer=vgps critic=<run>`` steers any generalist with it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from robosteer.scripts.common import (
    console_main,
    dataset_paths,
    exit_codes,
    format_table,
    start_run,
    write_metrics,
)

log = logging.getLogger("robosteer.value")
SCORES = ("first", "chunk")
EMBED_WHICH = (
    "ema"  # embed=: the base's weights whose embedding the critic reads (as robosteer-steer's which)
)


@torch.no_grad()
def q_mc_correlation(critic: Any, buffer: Any, n: int = 4096, seed: int = 0) -> float:
    """Pearson correlation of the steering score (target, min over heads) with the Monte-Carlo return on
    data transitions: does the critic rank the data's actions the way their outcomes do?"""
    batch = buffer.sample(n, torch.Generator().manual_seed(seed))
    q = critic.q_target(batch["obs"], batch["action"]).min(dim=0).values
    mc = batch["mc_return"]
    if float(q.std()) == 0 or float(mc.std()) == 0:
        return float("nan")
    return float(torch.corrcoef(torch.stack([q, mc]))[0, 1])


def load_embedding(path: str, device: Any) -> tuple[Any, dict[str, Any]]:
    """(the BaseEmbedding of the pixel policy at ``path``, what the critic's checkpoint records of it)."""
    from robosteer.policies.checkpoint import load_policy, state_dict_hash
    from robosteer.policies.steering.embedding import BaseEmbedding, reads_images

    base = load_policy(path, which=EMBED_WHICH, device=device)
    if not reads_images(base.shape_meta):
        raise ValueError(
            f"embed={path} reads no camera ({list(base.shape_meta['obs'])}): embed= is for a pixel policy; "
            "a state critic takes obs_keys= directly"
        )
    base.requires_grad_(False).eval()
    meta = {"base": str(Path(path).resolve()), "which": EMBED_WHICH, "hash": state_dict_hash(base)}
    return BaseEmbedding(base), meta


def critic_inputs(cfg: DictConfig, device: Any) -> tuple[list[str], int, Any, Any]:
    """(obs keys, To, embedding, its metadata): the dataset's keys, or with ``embed=`` (pixels) a frozen base's
    embedding of the base's own windows."""
    if not cfg.get("embed"):
        return list(cfg.obs_keys), int(cfg.n_obs_steps), None, None
    embedding, embed_meta = load_embedding(str(cfg.embed), device)
    keys, to = list(embedding.raw_keys), int(embedding.base.config.n_obs_steps)
    log.info("embed=%s: the critic reads its %d-d embedding of %s windows", cfg.embed, embedding.dim, keys)
    return keys, to, embedding, embed_meta


def run(cfg: DictConfig) -> dict[str, Any]:
    """Train as configured; return the metrics also written to ``out/metrics.json``."""
    from robosteer.policies.engine import resolve_device
    from robosteer.policies.run_log import LogSettings
    from robosteer.policies.value import build_learner, normalized_buffer, train_value, value_transitions

    torch.set_num_threads(int(cfg.threads))
    device = resolve_device(cfg.device)  # before any data is read: a bad value fails first
    start = time.perf_counter()
    if cfg.score not in SCORES:
        raise ValueError(f"score={cfg.score!r} is not known: expected one of {SCORES}")
    algo = str(cfg.algo_name)
    if algo not in cfg:
        raise ValueError(f"algo={algo!r}: the config has no '{algo}' block (configs/algo/{algo}.yaml)")
    algo_cfg = OmegaConf.to_container(cfg[algo], resolve=True)
    assert isinstance(algo_cfg, dict)
    run_dir = start_run(cfg)
    paths = dataset_paths(cfg)
    action_steps = 1 if cfg.score == "first" else int(cfg.n_action_steps)
    keys, to, embedding, embed_meta = critic_inputs(cfg, device)
    data, shape_meta, stats, tasks = value_transitions(
        paths,
        keys,
        to,
        action_steps,
        discount=float(algo_cfg["discount"]),
        reward=str(cfg.reward),
        demo_limit=cfg.demo_limit,
        embedding=embedding,
    )
    critic_to = 1 if embedding is not None else to  # one embedding already covers the base's window
    learner = build_learner(
        algo, algo_cfg, shape_meta, critic_to, action_steps, len(tasks), stats, device=device
    )
    buffer = normalized_buffer(learner.critic, data)
    log.info(
        "%s: %d transitions from %d file(s), critic obs %d, action %d",
        algo,
        len(buffer),
        len(paths),
        learner.critic.obs_dim,
        action_steps * learner.critic.action_dim,
    )
    figures = train_value(
        learner,
        buffer,
        run_dir,
        algo=algo,
        steps=int(cfg.steps),
        batch_size=int(cfg.batch_size),
        seed=int(cfg.seed),
        log_every=int(cfg.log_every),
        checkpoint_every=int(cfg.checkpoint_every),
        resume=bool(cfg.resume),
        log_settings=LogSettings(str(cfg.logger), cfg.wandb_project, cfg.wandb_mode),
        meta={
            "tasks": tasks,
            "dataset": paths,
            "obs_keys": list(shape_meta["obs"]),
            "embed": embed_meta,
            "score": str(cfg.score),
            "run": OmegaConf.to_container(cfg, resolve=True),
        },
    )
    metrics = {
        "algo": algo,
        "success_rate": None,  # no env interaction: success is not defined for value learning
        "episodes": 0,
        "env_steps": 0,
        "wall_time_s": time.perf_counter() - start,
        "num_transitions": len(buffer),
        "tasks": tasks,
        "score": str(cfg.score),
        "q_mc_corr": q_mc_correlation(learner.critic, buffer, seed=int(cfg.seed)),
        **figures,
    }
    write_metrics(run_dir, metrics)
    return metrics


def _main(cfg: DictConfig) -> None:
    with exit_codes("robosteer-value"):  # bad dataset/checkpoint: 2; NaN loss: 1
        m = run(cfg)
    row = {
        "algo": m["algo"],
        "steps": m["steps"],
        "transitions": m["num_transitions"],
        "critic loss": m.get("final_critic_loss"),
        "Q~MC corr": m["q_mc_corr"],
        "updates/s": m["updates_per_s"],
    }
    if m["algo"] == "calql":
        row["bound rate"] = m.get("final_calql_bound_rate")
    print(format_table([row]))
    print(f"run: {Path(str(cfg.out)).resolve()}")


def main() -> None:
    """Console-script entry point."""
    console_main("robosteer-value", "value", _main)


if __name__ == "__main__":
    main()

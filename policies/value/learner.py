"""Offline value learning for V-GPS: demonstrations → normalised transitions → IQL / Cal-QL → checkpoint.

Transitions come from ``policies.rl.chunk_transitions``, per file; files of several tasks give a multi-task
critic (``task_id`` indexes the distinct task names, as in ``SequenceDataset``). The critic scores the first
executed action (``action_steps=1``, the reference's) or the whole executed chunk (``action_steps=Ta``).
"""

from __future__ import annotations

import difflib
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robosteer.policies.checkpoint import CheckpointError, load_checkpoint
from robosteer.policies.data import compute_stats, open_dataset
from robosteer.policies.engine import RunEngine, losses, restore_generator
from robosteer.policies.rl import NormalizedCritic, ReplayBuffer, chunk_transitions
from robosteer.policies.run_log import LogSettings
from robosteer.policies.value.calql import CalQL, CalQLConfig
from robosteer.policies.value.iql import IQL, IQLConfig

log = logging.getLogger(__name__)

ALGOS: dict[str, tuple[type, type]] = {"iql": (IQL, IQLConfig), "calql": (CalQL, CalQLConfig)}
KIND = "critic"


def check_algo(algo: str) -> tuple[type, type]:
    """(learner class, config class) of ``algo``; a clear error names the valid choices."""
    if algo not in ALGOS:
        near = difflib.get_close_matches(algo, list(ALGOS), n=1, cutoff=0.0)
        raise ValueError(
            f"algo={algo!r} is not known: expected one of {sorted(ALGOS)} (nearest: {near[0]!r})"
        )
    return ALGOS[algo]


def value_transitions(
    paths: Sequence[str | os.PathLike],
    obs_keys: Sequence[str],
    n_obs_steps: int,
    action_steps: int,
    discount: float,
    reward: str = "sparse",
    demo_limit: int | None = None,
    embedding: Any = None,
) -> tuple[dict[str, torch.Tensor], dict[str, Any], dict[str, Any], list[str]]:
    """(transitions with ``task_id`` and ``mc_return``, shape_meta, critic stats, task names) of ``paths``;
    the stats (of current observations and every action row) are the critic's own, not any policy's.

    ``embedding`` (a :class:`~policies.steering.embedding.BaseEmbedding`, pixels): the observations are a
    frozen base's embedding of its own input windows (``obs_keys`` and ``n_obs_steps`` are the base's), one
    key ``base_embed`` (N, 1, G).
    """
    obs_transform = None
    out_keys = list(obs_keys)
    if embedding is not None:
        from robosteer.policies.steering.embedding import EMBED_KEY

        obs_transform = embedding.transform
        out_keys = [EMBED_KEY]
    parts: dict[str, list[torch.Tensor]] = {}
    tasks: dict[str, int] = {}  # name -> id: files of one task share its id (SequenceDataset's rule)
    shape_meta: dict[str, Any] | None = None
    for path in paths:
        with open_dataset(path) as f:
            f.check_obs_keys(list(obs_keys))
            shapes = {k: list(f.obs_shapes[k][0]) for k in obs_keys}
            if embedding is not None:
                shapes = {out_keys[0]: [embedding.dim]}
            meta = {
                "obs": {k: {"shape": shape, "type": "low_dim"} for k, shape in shapes.items()},
                "action": {"shape": [int(f.action_dim)]},
            }
            task = str(f.env_args.get("env_name", path))
            task_id = tasks.setdefault(task, len(tasks))
        if shape_meta is not None and meta != shape_meta:
            raise ValueError(f"{path}: obs/action shapes {meta} differ from {paths[0]} ({shape_meta})")
        shape_meta = meta
        tr = chunk_transitions(
            path,
            obs_keys,
            n_obs_steps,
            action_steps,
            reward,
            demo_limit,
            discount,
            obs_transform=obs_transform,
        )
        tr["task_id"] = torch.full((len(tr["reward"]),), task_id, dtype=torch.long)
        for k, v in tr.items():
            parts.setdefault(k, []).append(v)
    if shape_meta is None:
        raise ValueError("value learning needs at least one dataset path")
    data = {k: torch.cat(v) for k, v in parts.items()}
    a_dim = int(shape_meta["action"]["shape"][0])
    obs = {k: data[f"obs/{k}"][:, -1].flatten(1).numpy() for k in out_keys}
    stats = compute_stats({**obs, "action": data["action"].reshape(-1, a_dim).numpy()})
    return data, shape_meta, stats, list(tasks)


def normalized_buffer(
    critic: NormalizedCritic, data: Mapping[str, torch.Tensor], chunk: int = 65536
) -> ReplayBuffer:
    """Every transition in the critic's units, once, on the critic's device: features (N, F), actions (N, Da) in
    [-1, 1], r, done, mc."""
    n = len(data["reward"])
    keys = critic.obs_keys
    spec = {k: ((critic.obs_dim,), torch.float32) for k in ("obs", "next_obs")}
    spec["action"] = ((critic.action_steps * critic.action_dim,), torch.float32)
    spec.update({k: ((), torch.float32) for k in ("reward", "done", "mc_return")})
    buf = ReplayBuffer(n, spec, critic.device)
    with torch.no_grad():
        for i in range(0, n, chunk):
            sl = slice(i, i + chunk)
            tid = data["task_id"][sl]
            act = data["action"][sl].reshape(-1, critic.action_steps, critic.action_dim)
            buf.add(
                obs=critic.features({k: data[f"obs/{k}"][sl] for k in keys}, tid),
                next_obs=critic.features({k: data[f"next_obs/{k}"][sl] for k in keys}, tid),
                action=critic.normalize_action(act),
                reward=data["reward"][sl],
                done=data["done"][sl],
                mc_return=data["mc_return"][sl],
            )
    return buf


def build_learner(
    algo: str,
    algo_config: Mapping[str, Any],
    shape_meta: Mapping[str, Any],
    n_obs_steps: int,
    action_steps: int,
    num_tasks: int,
    stats: Mapping[str, Any] | None = None,
    device: str | torch.device = "cpu",
) -> IQL | CalQL:
    """The learner of ``algo`` over a fresh ``NormalizedCritic`` on ``device``; unknown config keys raise."""
    cls, cfg_cls = check_algo(algo)
    fields = set(cfg_cls.__dataclass_fields__)
    unknown = sorted(set(algo_config) - fields)
    if unknown:
        raise ValueError(f"unknown {algo} config keys {unknown}; valid keys: {sorted(fields)}")
    cfg = cfg_cls(**{k: list(v) if k == "hidden" else v for k, v in algo_config.items()})
    critic = NormalizedCritic(
        dict(shape_meta),
        n_obs_steps,
        action_steps,
        num_tasks=num_tasks,
        stats=dict(stats) if stats is not None else None,
        hidden=cfg.hidden,
        num_critics=cfg.num_critics,
        layer_norm=cfg.layer_norm,
        act=cfg.activation,
    )
    return cls(critic, cfg).to(device)  # in place: the optimizers keep their parameters


def train_value(
    learner: IQL | CalQL,
    buffer: ReplayBuffer,
    out_dir: str | os.PathLike,
    *,
    algo: str,
    steps: int,
    batch_size: int = 256,
    seed: int = 0,
    log_every: int = 100,
    checkpoint_every: int = 5000,
    resume: bool = False,
    meta: Mapping[str, Any] | None = None,
    log_settings: LogSettings | None = None,
) -> dict[str, Any]:
    """Train ``steps`` seeded updates into ``out_dir``, resumable bit-exactly; return the final figures.

    The learner trains where ``buffer`` lives (``robosteer-value device=``); its generator lives there too.
    """
    what = f"value learning ({algo})"
    run = RunEngine(out_dir, what=what, total=steps, resume=resume, desc=algo, log_settings=log_settings)
    gen = torch.Generator(device=buffer.device).manual_seed(seed)
    step = 0
    ck = run.restore()
    if ck is not None:
        learner.load_state_dict(ck.modules["learner"])
        for name, opt in learner.optimizers().items():
            opt.load_state_dict(ck.modules[f"opt_{name}"])
        for name, sched in learner.schedulers().items():  # older runs named the actor's "actor_sched"
            state = ck.modules.get(f"sched_{name}", ck.modules.get(f"{name}_sched"))
            if state is not None:
                sched.load_state_dict(state)
        step = int(ck.extra["step"])
        restore_generator(gen, ck.extra["generator"], reseed=seed + 7919 * step)
        run.mark_saved(step)

    def save() -> None:
        modules: dict[str, Any] = {"critic": learner.critic, "learner": learner}
        modules.update({f"opt_{k}": o.state_dict() for k, o in learner.optimizers().items()})
        modules.update({f"sched_{k}": sc.state_dict() for k, sc in learner.schedulers().items()})
        extra = {"step": step, "generator": gen.get_state()}
        config = {
            **(meta or {}),
            "kind": KIND,
            "algo": algo,
            "algo_config": asdict(learner.config),
            "critic": learner.critic.get_config(),
            "shape_meta": learner.critic.shape_meta,
            "step": step,
            "inference_module": "critic",
        }
        run.save_latest(modules, config, extra, step, learner.named_parameters())

    run.start(step)
    start = step
    window: dict[str, list[float]] = {}
    last: dict[str, float] = {}
    with run:
        while step < steps and not run.should_stop():
            info = learner.update(buffer.sample(batch_size, gen), gen)
            step += 1
            run.check(losses(info), step)
            for k, v in info.items():
                window.setdefault(k, []).append(v)
            if step % log_every == 0 or step == steps:
                last = {
                    k: float(np.nanmean(v)) if not np.all(np.isnan(v)) else float("nan")
                    for k, v in window.items()
                }
                for k, v in last.items():
                    run.scalar(f"train/{k}", v, step)
                run.scalar("time/updates_per_s", (step - start) / max(1e-9, run.seconds()), step)
                window = {}
            if run.due(step, checkpoint_every, step - 1):
                save()
    save()
    if run.interrupted:  # Ctrl-C, as a flag: the update in flight finished and is saved
        log.warning("interrupted at step %d: saved checkpoints/latest (resume=true continues)", step)
        raise KeyboardInterrupt
    wall = run.seconds()
    return {
        "steps": step,
        "updates_per_s": (step - start) / max(1e-9, wall),
        "train_wall_s": wall,
        **{f"final_{k}": v for k, v in last.items()},
    }


def load_critic(path: str | os.PathLike, device: str | torch.device = "cpu") -> NormalizedCritic:
    """The frozen critic of a ``robosteer-value`` run (or checkpoint) directory, in eval mode, no grads.

    ``critic.task_names`` lists the tasks it was trained on (task id = position).
    """
    p = Path(path)
    ckpt_dir = p / "checkpoints" / "latest" if (p / "checkpoints").is_dir() else p
    ck = load_checkpoint(ckpt_dir, names=["critic"])
    cfg = ck.config
    where = ck.path / "config.json"
    if cfg.get("kind") != KIND:
        raise CheckpointError(
            f"{where}: key 'kind' is {cfg.get('kind')!r}, expected {KIND!r} (a robosteer-value run)"
        )
    with torch.random.fork_rng(devices=[]):  # the init is overwritten: loading must not move the global RNG
        critic = NormalizedCritic(**cfg["critic"])
    try:
        critic.load_state_dict(ck.modules["critic"])
    except RuntimeError as e:
        raise CheckpointError(f"{where}: critic weights do not fit its config: {e}") from e
    critic.task_names = list(cfg.get("tasks") or [])
    critic.algo = cfg.get("algo")
    critic.requires_grad_(False)
    critic = critic.to(device).eval()
    if cfg.get("embed"):  # trained on a pixel base's embedding: score raw windows through that base
        return embedded_critic(critic, cfg["embed"], where, device)
    return critic


def embedded_critic(
    critic: NormalizedCritic, embed: Mapping[str, Any], where: Path, device: str | torch.device
) -> Any:
    """``critic`` scoring raw observation windows through the frozen base whose embedding it was trained on
    (the base is reloaded from its recorded path and refused if its weights changed)."""
    from robosteer.policies.checkpoint import load_policy, state_dict_hash
    from robosteer.policies.steering.embedding import BaseEmbedding, EmbeddedCritic

    base_dir = Path(embed["base"])
    if not base_dir.exists():
        raise CheckpointError(
            f"{where}: key 'embed.base' points to {base_dir}, which no longer exists: this critic reads that "
            "base's embedding, restore it there"
        )
    base = load_policy(base_dir, which=embed["which"], device=device)
    if state_dict_hash(base) != embed["hash"]:
        raise CheckpointError(
            f"{where}: the base at {base_dir} (which={embed['which']}) is not the one whose embedding this "
            "critic was trained on (weight hash differs)"
        )
    base.requires_grad_(False).eval()
    return EmbeddedCritic(critic, BaseEmbedding(base))

"""Generic imitation trainer: any policy with ``loss(batch) -> (loss, info)`` over a map-style dataset.

AdamW, warm-up + cosine LR, gradient clipping, EMA and an infinite seeded sampler; the run's lifecycle is
:class:`policies.engine.RunEngine`'s. Resuming is exact (N steps in one go or N/2 + resume + N/2 give
bit-identical weights): model, EMA, optimizer, scheduler, sampler position and every rank's RNGs are
restored. Under ``torchrun`` the policy is wrapped in DDP, each rank reads its own stride of the shared
index stream, and only rank 0 evaluates and writes files.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import BatchSampler, DataLoader, Dataset, Sampler

from robosteer.policies.checkpoint import Checkpoint, CheckpointError, jsonable
from robosteer.policies.engine import Best, RunEngine, scalar_value
from robosteer.policies.optim import lr_lambda
from robosteer.policies.rng import get_rng_state, seed_everything, set_rng_state
from robosteer.policies.run_log import LogSettings
from robosteer.policies.train.ema import EMAModel

log = logging.getLogger(__name__)

EvalFn = Callable[..., Mapping[str, Any]]


PRECISIONS = ("fp32", "bf16")


@dataclass
class TrainConfig:
    """Every hyperparameter of the imitation loop (``batch_size`` is per process)."""

    steps: int = 20_000  # gradient steps (the LR schedule spans them)
    batch_size: int = 256  # per process
    lr: float = 3e-4  # AdamW learning rate (diffusion_policy's)
    betas: tuple[float, float] = (0.95, 0.999)
    eps: float = 1e-8
    weight_decay: float = 1e-6  # AdamW weight decay (diffusion_policy's)
    lr_scheduler: str = "cosine"  # cosine | linear | constant (all after a linear warm-up)
    lr_warmup_steps: int = 500  # linear warm-up before the schedule
    grad_clip_norm: float | None = 10.0  # None or <= 0: no clipping (the norm is still logged)
    # ours: std of i.i.d. N(0, σ²) noise added to every demonstrated action of a batch (env units), clipped to
    # the demos' action range. Clean demos give a base whose chunk hardly depends on its noise, which leaves
    # DSRL nothing to steer; noisy targets spread it (0: off). robosteer-train also takes auto: the smallest of
    # 0, 0.1, 0.2, 0.3, 0.5 whose 1000-step probe the steerability check calls steerable, the run then
    # finished at it; at most 4000 extra steps (policies/train/auto_noise.py)
    action_noise_std: float = 0.0
    ema: bool = True  # evaluation and the 'ema'/'best' weights use the moving average
    ema_power: float = 0.75
    ema_max_decay: float = 0.9999
    ema_min_decay: float = 0.0
    ema_update_after_step: int = 0
    ema_inv_gamma: float = 1.0
    seed: int = 0  # seeds init, data order and training noise (rank r uses seed + r)
    num_workers: int = 0  # DataLoader workers (an in-memory dataset: 0 is usually fastest)
    log_every: int = 50  # steps between logged scalars
    checkpoint_every: int = 1000  # checkpoints/latest
    keep_every: int = 0  # > 0: keep checkpoints/history/<step> at the first save past each multiple
    eval_every: int = 0  # 0: evaluate only at the end
    eval_at_end: bool = True
    max_minutes: float | None = None  # wall-time budget of the training loop; stops with a checkpoint
    stop_at_step: int | None = None  # stop (with a checkpoint) here; the LR schedule still spans `steps`
    resume: bool = False  # true: continue from <out>/checkpoints/latest (bit-exact)
    progress: bool = True  # a progress bar on the terminal
    logger: str = "tensorboard"  # tensorboard | wandb (W&B beside TensorBoard: scalars, eval videos, config)
    wandb_project: str | None = None  # null: WANDB_PROJECT, else robosteer
    wandb_mode: str | None = None  # null: WANDB_MODE, else online | offline (no network) | disabled
    device: str = "cpu"  # cpu | cuda | auto
    precision: str = "fp32"  # fp32 | bf16: autocast of the forward; weights, grads and AdamW stay fp32
    compile: bool = False  # torch.compile the loss's forward (the first steps pay for the compilation)
    find_unused_parameters: bool = False

    def __post_init__(self) -> None:
        LogSettings(self.logger, self.wandb_project, self.wandb_mode)  # a clear error at configuration time
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision={self.precision!r} is not known: expected one of {PRECISIONS}")
        if not (self.action_noise_std >= 0 and np.isfinite(self.action_noise_std)):
            raise ValueError(
                f"action_noise_std={self.action_noise_std!r}: expected a finite std >= 0 (0: off)"
            )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TrainConfig:
        """Build from a mapping, rejecting unknown keys (typos must not be silently ignored)."""
        names = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown TrainConfig keys {unknown}; valid keys: {sorted(names)}")
        d = dict(d)
        if "betas" in d:
            d["betas"] = tuple(float(b) for b in d["betas"])
        return cls(**d)


class InfiniteSampler(Sampler[int]):
    """An endless stream of dataset indices: epoch ``e`` is a permutation seeded by ``(seed, e)``.

    Rank ``r`` of ``W`` takes items ``r, r + W, ...`` of the global stream, so ranks never see the same
    sample in a step. ``start`` is the number of items this rank already consumed: resuming at
    ``start = step * batch_size`` continues the exact stream.
    """

    def __init__(
        self,
        size: int,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        start: int = 0,
        shuffle: bool = True,
    ) -> None:
        if size <= 0:
            raise ValueError("InfiniteSampler needs a non-empty dataset")
        self.size, self.seed, self.rank, self.world_size = size, seed, rank, world_size
        self.start, self.shuffle = start, shuffle

    def __iter__(self) -> Iterator[int]:
        g = self.start * self.world_size + self.rank
        epoch, perm = -1, np.arange(self.size)
        while True:
            e = g // self.size
            if self.shuffle and e != epoch:
                epoch, perm = e, np.random.default_rng([self.seed, e]).permutation(self.size)
            yield int(perm[g % self.size])
            g += self.world_size


class _BatchView(Dataset):
    """Index a dataset with a list of indices to get a collated batch (``dataset.get_batch``)."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, indices: list[int]) -> Any:
        return self.dataset.get_batch(indices)


class ActionNoise:
    """Adds N(0, ``std``²) to a batch's demonstrated actions (B, Tp, Da), clipped to [``low``, ``high``].

    Draws from the global torch RNG, which every checkpoint saves, so a resumed run draws the same noise.
    """

    def __init__(self, std: float, low: np.ndarray, high: np.ndarray) -> None:
        self.std = float(std)
        self.low = torch.as_tensor(low, dtype=torch.float32)  # (Da,)
        self.high = torch.as_tensor(high, dtype=torch.float32)  # (Da,)

    @classmethod
    def for_dataset(cls, std: float, dataset: Any) -> ActionNoise:
        """The demos' own action range bounds the noisy actions (what the policy's normaliser was fitted on)."""
        stats = getattr(dataset, "stats", None)
        if not callable(stats):
            raise ValueError(
                f"action_noise_std={std} needs the dataset's action range, but {type(dataset).__name__} has no stats()"
            )
        action = stats()["action"]
        return cls(std, np.asarray(action["min"]), np.asarray(action["max"]))

    def to(self, device: torch.device) -> ActionNoise:
        self.low, self.high = self.low.to(device), self.high.to(device)
        return self

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        action = torch.as_tensor(batch["action"], dtype=torch.float32)  # (B, Tp, Da)
        noisy = action + self.std * torch.randn(action.shape, device=action.device)
        return {**batch, "action": torch.clamp(noisy, self.low, self.high)}


class _LossModule(nn.Module):
    """Routes ``forward`` to ``policy.loss`` so DDP's gradient hooks see the call."""

    def __init__(self, policy: nn.Module) -> None:
        super().__init__()
        self.policy = policy

    def forward(self, batch: Any) -> Any:
        return self.policy.loss(batch)


def _to_device(x: Any, device: torch.device) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(device, non_blocking=True)
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x).to(device)
    if isinstance(x, Mapping):
        return {k: _to_device(v, device) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return type(x)(_to_device(v, device) for v in x)
    return x


class Trainer:
    """Trains ``policy`` on ``dataset`` into ``out_dir`` (see the module docstring).

    ``policy_name``, ``shape_meta`` and ``policy_config`` (default ``policy.get_config()``) go into every
    checkpoint so ``load_policy`` can rebuild the policy; ``run_config`` is kept for provenance, and
    ``checkpoint_meta`` (e.g. ``{"task": "push-v3"}``) is merged into the top level of ``config.json``.
    """

    def __init__(
        self,
        policy: nn.Module,
        dataset: Dataset,
        cfg: TrainConfig,
        out_dir: str | os.PathLike,
        *,
        policy_name: str,
        shape_meta: Mapping[str, Any],
        policy_config: Mapping[str, Any] | None = None,
        eval_fn: EvalFn | None = None,
        run_config: Mapping[str, Any] | None = None,
        checkpoint_meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.policy = policy
        self.dataset = dataset
        self.cfg = cfg
        self.out_dir = Path(out_dir)
        self.policy_name = policy_name
        self.shape_meta = dict(shape_meta)
        if policy_config is None:
            get_config = getattr(policy, "get_config", None)
            policy_config = get_config() if callable(get_config) else {}
        self.policy_config = jsonable(policy_config)
        self.eval_fn = eval_fn
        self.run_config = jsonable(run_config or {})
        self.checkpoint_meta = jsonable(checkpoint_meta or {})
        distributed = dist.is_available() and dist.is_initialized()
        self.rank, self.world_size = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
        self.is_main = self.rank == 0
        self.device = torch.device(cfg.device)
        self.step = 0
        self._elapsed_before = 0.0  # wall time of earlier sessions of this run (resume)
        self._eval_count = 0

    # ------------------------------------------------------------------ setup
    def _build(self) -> None:
        cfg = self.cfg
        self.policy.to(self.device)
        self.policy.train()
        self.optimizer = torch.optim.AdamW(
            self.policy.parameters(),
            lr=cfg.lr,
            betas=tuple(cfg.betas),
            eps=cfg.eps,
            weight_decay=cfg.weight_decay,
        )
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_lambda(cfg.lr_scheduler, cfg.lr_warmup_steps, cfg.steps)
        )
        seed_everything(cfg.seed + self.rank)
        ckpt = self.run.restore()
        if ckpt is not None:
            self._restore(ckpt)
        self.model: nn.Module = _LossModule(self.policy)
        if self.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel

            # Broadcasts rank 0's weights: every rank (and its EMA copy below) starts identical.
            self.model = DistributedDataParallel(
                self.model,
                find_unused_parameters=cfg.find_unused_parameters,
                device_ids=[self.device.index] if self.device.type == "cuda" else None,
            )
        if cfg.compile:  # the wrapper only: the policy's weights and checkpoints keep their names
            self.model = torch.compile(self.model)
        self.action_noise = (
            ActionNoise.for_dataset(cfg.action_noise_std, self.dataset).to(self.device)
            if cfg.action_noise_std > 0
            else None
        )
        self.ema: EMAModel | None = None
        if cfg.ema:
            self.ema = EMAModel(
                self.policy,
                update_after_step=cfg.ema_update_after_step,
                inv_gamma=cfg.ema_inv_gamma,
                power=cfg.ema_power,
                min_value=cfg.ema_min_decay,
                max_value=cfg.ema_max_decay,
            )
            if ckpt is not None:
                self.ema.averaged_model.load_state_dict(ckpt.modules["ema"])
                self.ema.load_state_dict(ckpt.extra.get("ema_state"))
        sampler = InfiniteSampler(
            len(self.dataset),
            seed=cfg.seed,
            rank=self.rank,
            world_size=self.world_size,
            start=self.step * cfg.batch_size,
        )
        if hasattr(self.dataset, "get_batch"):
            # One vectorised gather per batch (SequenceDataset) instead of batch_size items + collation;
            # the sampler order, and so exact resume, is unchanged.
            batches = BatchSampler(sampler, cfg.batch_size, drop_last=True)
            kw: dict[str, Any] = dict(dataset=_BatchView(self.dataset), batch_size=None, sampler=batches)
        else:
            kw = dict(dataset=self.dataset, batch_size=cfg.batch_size, sampler=sampler, drop_last=True)
        self.loader = DataLoader(
            **kw,
            num_workers=cfg.num_workers,
            pin_memory=self.device.type == "cuda",
            persistent_workers=cfg.num_workers > 0,
            # A private generator: worker seeding must not draw from the global RNG (exact resume).
            generator=torch.Generator().manual_seed(cfg.seed * 1_000_003 + self.step),
        )

    def _restore(self, ckpt: Checkpoint) -> None:
        extra = ckpt.extra
        self._check_same_policy(ckpt)
        self.policy.load_state_dict(ckpt.modules["model"])
        self.optimizer.load_state_dict(ckpt.modules["optimizer"])
        self.lr_scheduler.load_state_dict(ckpt.modules["lr_scheduler"])
        self.step = int(extra["step"])
        self.run.mark_saved(self.step)
        self._elapsed_before = float(extra.get("elapsed_s", 0.0))
        self._eval_count = int(extra.get("eval_count", 0))
        self.run.best = Best.from_state(extra.get("best"))
        if self.cfg.ema and ckpt.modules.get("ema") is None:
            raise KeyError(
                f"{ckpt.path}: resume with ema=true needs 'ema' weights, which this checkpoint lacks"
            )
        rng = extra.get("rng") or []
        if len(rng) == self.world_size:
            set_rng_state(rng[self.rank])
        else:
            log.warning(
                "checkpoint has RNG states of %d ranks, running %d: reseeding (not bit-exact)",
                len(rng),
                self.world_size,
            )
            seed_everything(self.cfg.seed + self.rank + 7919 * self.step)
        saved_steps = extra.get("total_steps")
        if saved_steps is not None and int(saved_steps) != self.cfg.steps:
            log.warning(
                "resuming with steps=%d (was %s): the LR schedule changes shape", self.cfg.steps, saved_steps
            )
        log.info("resumed from %s at step %d", ckpt.path, self.step)

    def _check_same_policy(self, ckpt: Checkpoint) -> None:
        """resume=true continues *that* run: a policy of another kind or shape would load the old weights
        into a different model (diffusion and flow share their weights' names) and overwrite ``latest``."""
        saved = ckpt.config.get("policy") or {}
        name, config = self.policy_name, self.policy_config
        if saved.get("name") not in (None, name):
            raise CheckpointError(
                f"{ckpt.path}: resume=true continues a {saved['name']} run, but the command builds policy={name}: "
                f"drop policy= to continue it, or choose another out="
            )
        old = saved.get("config") or {}
        changed = sorted(k for k in old.keys() & config.keys() if old[k] != config[k])
        if changed:
            k = changed[0]
            raise CheckpointError(
                f"{ckpt.path}: resume=true continues a run with policy.{k}={old[k]!r}, but the command gives "
                f"{config[k]!r}: drop the override to continue it, or choose another out="
            )

    # ------------------------------------------------------------------ checkpoints
    def _checkpoint_config(self) -> dict[str, Any]:
        return {
            **self.checkpoint_meta,
            "kind": "policy",
            "policy": {"name": self.policy_name, "config": self.policy_config},
            "shape_meta": self.shape_meta,
            "step": self.step,
            "inference_module": "ema" if self.ema is not None else "model",
            "train": jsonable(asdict(self.cfg)),
            "run": self.run_config,
        }

    def _gather_rng(self) -> list[Any]:
        state = get_rng_state()
        if self.world_size == 1:
            return [state]
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, state)
        return gathered

    def save_latest(self) -> None:
        """Write ``checkpoints/latest`` (all ranks must call: RNG states are gathered)."""
        modules: dict[str, Any] = {"model": self.policy}
        if self.ema is not None:
            modules["ema"] = self.ema.averaged_model
        modules["optimizer"] = self.optimizer.state_dict()
        modules["lr_scheduler"] = self.lr_scheduler.state_dict()
        extra = {
            "step": self.step,
            "total_steps": self.cfg.steps,
            "elapsed_s": self._elapsed_before + self.run.seconds(),
            "eval_count": self._eval_count,
            "ema_state": self.ema.state_dict() if self.ema is not None else None,
            "best": self.run.best.state(),
            "rng": self._gather_rng(),
            "world_size": self.world_size,
            "sampler": {"seed": self.cfg.seed, "consumed_per_rank": self.step * self.cfg.batch_size},
        }
        self.run.save_latest(modules, self._checkpoint_config(), extra, self.step)
        if self.world_size > 1:
            dist.barrier()  # no rank may go on (e.g. resume) before the checkpoint is in place

    def _check_update(self, loss: torch.Tensor, grad_norm: torch.Tensor, info: Mapping[str, Any]) -> None:
        """Stop before the optimizer step when the loss or gradient norm is NaN/inf (all ranks agree)."""
        ok = torch.isfinite(loss.detach()) & torch.isfinite(grad_norm)
        if self.world_size > 1:  # one rank's NaN must stop every rank, or the others hang in a collective
            bad = (~ok).to(torch.int32).reshape(1)
            dist.all_reduce(bad, op=dist.ReduceOp.MAX)
            ok = bad == 0
        if bool(ok.all()):
            return
        values = {"loss": loss, "grad_norm": grad_norm}
        values.update({f"info.{k}": v for k, v in (info or {}).items() if scalar_value(v) is not None})
        self.run.check(values, self.step + 1)
        # finite on this rank: another rank's loss or gradient was not
        raise self.run.stopped("non-finite loss or gradient norm on another rank", self.step + 1)

    # ------------------------------------------------------------------ evaluation
    def eval_policy(self) -> nn.Module:
        """The weights evaluation uses: the EMA copy when EMA is on."""
        return self.ema.averaged_model if self.ema is not None else self.policy

    def _evaluate(self) -> dict[str, Any] | None:
        """Rank 0 evaluates the EMA weights (in eval mode) through the engine, which forks every RNG."""
        if self.eval_fn is None or not self.is_main:
            return None
        policy = self.eval_policy()
        params = inspect.signature(self.eval_fn).parameters
        takes_step = "step" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        kw = {"step": self.step} if takes_step else {}
        was_training = policy.training
        policy.eval()
        try:
            metrics = self.run.evaluate(
                lambda: self.eval_fn(policy, **kw), self.step, seed=self.cfg.seed, best=self._best_checkpoint
            )
        finally:
            policy.train(was_training)
            if hasattr(policy, "reset"):
                policy.reset()
        self._eval_count += 1
        return metrics

    def _best_checkpoint(self, metrics: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        modules: dict[str, Any] = {"model": self.policy}
        if self.ema is not None:
            modules["ema"] = self.ema.averaged_model
        return modules, {**self._checkpoint_config(), "eval": jsonable(dict(metrics))}

    # ------------------------------------------------------------------ loop
    def _stop_requested(self) -> bool:
        stop = self.run.should_stop()
        if self.world_size > 1:
            flag = torch.tensor([1 if stop else 0], dtype=torch.int32)
            dist.broadcast(flag, src=0)  # rank 0's clock decides for everyone
            stop = bool(flag.item())
        return stop

    def _log_window(
        self, mean_loss: float, grad_norm: torch.Tensor, info: Mapping[str, Any], win: dict
    ) -> dict[str, str]:
        """Log the scalars of one ``log_every`` window; return the progress bar's postfix."""
        n, secs = win["n"], max(1e-9, win["data"] + win["update"])
        lr = self.optimizer.param_groups[0]["lr"]
        self.run.scalar("train/loss", mean_loss, self.step)
        self.run.scalar("train/lr", lr, self.step)
        self.run.scalar("train/grad_norm", float(grad_norm), self.step)
        self.run.scalar("time/data_s_per_step", win["data"] / n, self.step)
        self.run.scalar("time/update_s_per_step", win["update"] / n, self.step)
        self.run.scalar("time/samples_per_s", self.cfg.batch_size * self.world_size * n / secs, self.step)
        if self.ema is not None:
            self.run.scalar("train/ema_decay", self.ema.decay, self.step)
        for k, v in (info or {}).items():
            if (s := scalar_value(v)) is not None:
                self.run.scalar(f"train/{k}", s, self.step)
        return {"loss": f"{mean_loss:.4f}", "lr": f"{lr:.2e}"}

    def fit(self) -> dict[str, Any]:
        """Train to ``cfg.steps`` (or the wall-time budget); return the metrics written to metrics.json."""
        cfg = self.cfg
        self.run = RunEngine(
            self.out_dir, what="training", total=cfg.steps, resume=cfg.resume, settings=cfg, main=self.is_main
        )
        self._build()
        start_step = self.step
        self.run.start(self.step)
        stop_at = cfg.steps if cfg.stop_at_step is None else min(cfg.stop_at_step, cfg.steps)
        clip = cfg.grad_clip_norm if cfg.grad_clip_norm and cfg.grad_clip_norm > 0 else float("inf")
        params = [p for p in self.policy.parameters() if p.requires_grad]
        data_time = update_time = 0.0
        win = {"loss": 0.0, "n": 0, "data": 0.0, "update": 0.0}
        last_loss = float("nan")
        last_eval: dict[str, Any] | None = None
        last_eval_step = -1
        data_iter = iter(self.loader)
        with self.run:  # closed on any exit: a NaN stops without saving, so latest stays the last good one
            try:
                while self.step < stop_at and not self._stop_requested():
                    t0 = time.perf_counter()
                    batch = _to_device(next(data_iter), self.device)
                    if self.action_noise is not None:
                        batch = self.action_noise(batch)
                    t1 = time.perf_counter()
                    self.optimizer.zero_grad(set_to_none=True)
                    with torch.autocast(self.device.type, torch.bfloat16, enabled=cfg.precision == "bf16"):
                        loss, info = self.model(batch)
                    loss.backward()
                    grad_norm = torch.nn.utils.clip_grad_norm_(params, clip)
                    self._check_update(loss, grad_norm, info)  # raises before a NaN step reaches the weights
                    self.optimizer.step()
                    self.lr_scheduler.step()
                    if self.ema is not None:
                        self.ema.step(self.policy)
                    self.step += 1
                    t2 = time.perf_counter()
                    data_time += t1 - t0
                    update_time += t2 - t1
                    win["data"] += t1 - t0
                    win["update"] += t2 - t1
                    win["loss"] += float(loss.detach())
                    win["n"] += 1
                    postfix: dict[str, str] = {}
                    if self.step % cfg.log_every == 0 or self.step == cfg.steps:
                        mean_loss = win["loss"] / win["n"]
                        if self.world_size > 1:
                            t = torch.tensor([mean_loss], dtype=torch.float64)
                            dist.all_reduce(t)
                            mean_loss = float(t) / self.world_size
                        last_loss = mean_loss
                        postfix = self._log_window(mean_loss, grad_norm, info, win)
                        win = {"loss": 0.0, "n": 0, "data": 0.0, "update": 0.0}
                    self.run.progress(1, **postfix)
                    if self.run.due(self.step, cfg.eval_every, self.step - 1) and self.step < cfg.steps:
                        last_eval = self._evaluate() or last_eval
                        last_eval_step = self.step
                    if self.run.due(self.step, cfg.checkpoint_every, self.step - 1):
                        self.save_latest()
                if self.run.interrupted:  # Ctrl-C, as a flag: the step in flight finished
                    raise KeyboardInterrupt
            except KeyboardInterrupt:
                if self.world_size > 1 and not self.run.interrupted:
                    raise  # a rank interrupted on its own: the others cannot join a save
                log.warning(
                    "interrupted at step %d: saving checkpoints/latest (resume=true continues)", self.step
                )
                self.save_latest()
                raise
            final_eval = self.eval_fn is not None and cfg.eval_at_end and last_eval_step != self.step
            if final_eval:
                last_eval = self._evaluate() or last_eval
            if final_eval or self.step != self.run.saved_step or not self.run.latest.exists():
                self.save_latest()  # after the final eval, so 'best' and eval counters are current
        loop_steps = self.step - start_step
        loop_time = max(1e-9, data_time + update_time)
        metrics: dict[str, Any] = {
            "steps": self.step,
            "final_loss": last_loss,
            "wall_time_s": self._elapsed_before + self.run.seconds(),
            "samples_per_s": cfg.batch_size * self.world_size * loop_steps / loop_time,
            "steps_per_s": loop_steps / loop_time,
            "data_time_s": data_time,
            "update_time_s": update_time,
            "batch_size": cfg.batch_size,
            "world_size": self.world_size,
            "num_params": sum(p.numel() for p in self.policy.parameters()),
            "stopped_early": self.step < cfg.steps,
            "resumed_from_step": start_step if start_step else None,
        }
        if last_eval is not None:
            metrics["success_rate"] = float(last_eval.get("success_rate", float("nan")))
            metrics.update({k: last_eval[k] for k in ("episodes", "env_steps") if k in last_eval})
            metrics["eval_step"] = last_eval.get("step")
            metrics["best_success_rate"] = self.run.best.success_rate
            metrics["best_step"] = self.run.best.step
        metrics = jsonable(metrics)
        self.run.finish(metrics)
        if self.world_size > 1:
            dist.barrier()
        return metrics


def train(
    policy: nn.Module,
    dataset: Dataset,
    out_dir: str | os.PathLike,
    *,
    policy_name: str,
    shape_meta: Mapping[str, Any],
    eval_fn: EvalFn | None = None,
    **cfg: Any,
) -> dict[str, Any]:
    """One-call form of :class:`Trainer`: ``train(policy, ds, "runs/x", policy_name=..., shape_meta=..., steps=N)``."""
    return Trainer(
        policy,
        dataset,
        TrainConfig.from_dict(cfg),
        out_dir,
        policy_name=policy_name,
        shape_meta=shape_meta,
        eval_fn=eval_fn,
    ).fit()


__all__ = ["InfiniteSampler", "TrainConfig", "Trainer", "train"]

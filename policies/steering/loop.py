"""The chunk-MDP online loop shared by every steering learner (DSRL, EXPO): collect, learn, evaluate, save.

A learner (:class:`OnlineLearner`) chooses each executed chunk, consumes replay batches and hands out a
policy for evaluation. The loop owns the env, the replay (mixed with offline demonstrations at a fixed share),
logging, periodic evaluation with a ``best`` checkpoint, and ``checkpoints/latest`` for a resume (the learner,
replay and RNG exactly; the episodes in flight restart, as the simulator's state is not checkpointed).
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from robosteer.policies.engine import resolve_device
from robosteer.policies.run_log import LogSettings

log = logging.getLogger(__name__)


@dataclass
class OnlineRunConfig:
    """The online loop's knobs (per-chunk MDP; all counts in env steps unless named otherwise)."""

    env_steps: int = 100_000  # budget of executed env steps (chunks × steps executed)
    # chunk transitions collected with the learner's warm-up action before learning (DSRL: w ~ N(0, I); EXPO:
    # uniform random MDP actions). DSRL's reference collects init_rollout_steps (1,501 lift/can, 2,001 square)
    # vector-env steps of 4 envs, each a Ta=4 chunk: 6,004-8,004 transitions, 24k-32k env steps; EXPO's
    # start_training is 5,000 single-step transitions (env steps)
    warmup_chunks: int = 200  # ours (CPU): reference DSRL 6,004-8,004 chunk transitions, EXPO 5,000 steps
    # gradient steps per collected transition (EXPO: critic steps per transition); reference DSRL 5, EXPO 20
    utd: float = 2.0  # ours (CPU)
    # EXPO's default (DSRLRunConfig sets DSRL's); shaped: policies.rl.offline.shaped_chunk_reward
    reward: str = (  # ours: a −1/0 success cost, as DSRL's reference (EXPO's reference: the env's own 0/1 reward)
        "sparse"  # | sparse: −1 per chunk, 0 on the chunk that succeeds | dense: summed env reward
    )  # | shaped: the dense reward as a cost in [-1, 0] per chunk
    reward_scale: float = 10.0  # shaped: the env's largest per-step reward (Meta-World v3: 10)
    buffer_size: int = 500_000  # chunk transitions
    offline_ratio: float = 0.0  # share of every batch drawn from the offline demonstrations
    eval_every: int = 10_000  # env steps between evaluations of the acting policy (0: only at the end)
    eval_episodes: int = 50  # episodes per evaluation (eval_envs at a time)
    checkpoint_every: int = 10_000  # env steps between saves of checkpoints/latest (resume=true continues)
    keep_every: int = 0  # > 0: keep checkpoints/history/<env step> at the first save past each multiple
    log_every: int = 1_000  # env steps between logged scalars (TensorBoard, W&B, the console)
    seed: int = 0  # seeds the envs, the networks and every draw: the run is reproducible from it
    max_minutes: float | None = None  # wall-time budget: stops with a checkpoint (null: none)
    progress: bool = True  # a progress bar on the terminal
    logger: str = "tensorboard"  # tensorboard | wandb (W&B beside TensorBoard: scalars, eval videos, config)
    wandb_project: str | None = None  # null: WANDB_PROJECT, else robosteer
    wandb_mode: str | None = (
        None  # null: WANDB_MODE, else online | offline (`wandb sync` uploads later) | disabled
    )
    device: str = "cpu"  # cpu | cuda | auto: learner, replay buffers and the loop's generator live there

    def __post_init__(self) -> None:
        resolve_device(self.device)  # a clear error at configuration time
        LogSettings(self.logger, self.wandb_project, self.wandb_mode)
        from robosteer.policies.rl.offline import REWARDS

        if self.reward not in REWARDS:
            raise ValueError(f"reward={self.reward!r} is not known: expected one of {REWARDS}")
        if self.reward_scale <= 0:
            raise ValueError(
                f"reward_scale={self.reward_scale} is not valid: expected the env's largest step reward (> 0)"
            )
        if not 0.0 <= self.offline_ratio <= 1.0:
            raise ValueError(f"offline_ratio={self.offline_ratio} is not valid: expected a share in [0, 1]")


Sampler = Callable[[int], dict[str, torch.Tensor]]
Obs = dict[str, torch.Tensor]  # {key: (B, To, ...)}
Flags = np.ndarray  # (B,) per env row


def flat_features(obs: dict[str, torch.Tensor], keys: tuple[str, ...]) -> torch.Tensor:
    """``keys``' windows {key: (B, To, D)} flattened and concatenated: (B, To·ΣD) float."""
    return torch.cat([obs[k].flatten(1).float() for k in keys], dim=-1)


class OnlineLearner(nn.Module, ABC):
    """A steering learner under :func:`run_online`: what every one implements is abstract; the hooks only some
    need (watching transitions, extra replay fields, extra resume state) default to nothing."""

    kind: str  # checkpoint ``kind`` ("dsrl", "expo")
    obs_keys: tuple[str, ...]
    taken_dim: int  # size of the flattened ``taken`` field stored per transition

    @property
    @abstractmethod
    def label(self) -> str:
        """Progress-bar / plot label."""

    @abstractmethod
    def warmup_action(
        self, obs: dict[str, torch.Tensor], generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(taken (B, taken_dim), executed chunk (B, E, Da)) before learning starts."""

    @abstractmethod
    def explore(
        self, obs: dict[str, torch.Tensor], generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(taken (B, taken_dim), executed chunk (B, E, Da)) while learning."""

    @abstractmethod
    def learn(
        self, n_updates: int, n_transitions: int, sample: Sampler, generator: torch.Generator
    ) -> dict[str, float]:
        """Gradient steps after ``n_transitions`` new transitions; ``n_updates`` = utd · transitions owed."""

    @abstractmethod
    def eval_policy(self) -> Any:
        """A policy with ``act``/``reset`` for the evaluation harness."""

    @abstractmethod
    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Every optimizer by name (checkpointed for an exact resume)."""

    @abstractmethod
    def get_config(self) -> dict[str, Any]:
        """What rebuilds the learner (the checkpoint's config)."""

    def features(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Flattened low-dim observation history: {key: (B, To, D)} → (B, To·ΣD)."""
        return flat_features(obs, self.obs_keys)

    def observe(self, obs: Obs, chunk: torch.Tensor, steps: Flags, done: Flags, success: Flags) -> None:
        """Every collected transition (executed steps per row, episode ends, ends in success)."""

    def observe_recorded(self, obs: Obs) -> None:
        """The states of transitions cut from a recorded episode (a robot's), added to the replay together."""

    def observe_recorded_episode(
        self, obs: Obs, taken: torch.Tensor, success: bool, person: torch.Tensor | None
    ) -> None:
        """A recorded episode whole (a robot's): its chunk starts' windows {key: (N, To, ...)}, the executed
        chunks ``taken`` (N, E·Da), whether it ended in success, and the chunks a person commanded (N,) or
        None; for a learner that imitates what was executed (EXPO's base)."""

    def transition_fields(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        """Further replay fields stored with every transition, {name: (shape, dtype)}."""
        return {}

    def transition_extras(
        self, next_obs: dict[str, torch.Tensor], generator: torch.Generator
    ) -> dict[str, torch.Tensor]:
        """Those fields' values for transitions ending in ``next_obs`` (B, To, ...), computed at storage."""
        return {}

    def extra_state(self) -> dict[str, Any]:
        """Further state dicts an exact resume needs (e.g. a BC replay), by checkpoint module name."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`extra_state` saved."""


def final_obs(
    info: dict[str, Any], next_obs: dict[str, Any], done: Any, keys: tuple[str, ...]
) -> dict[str, Any]:
    """Next observations with the finished envs' rows replaced by their episodes' last observations."""
    out = {k: np.array(next_obs[k], copy=True) for k in keys}
    final = info.get("final_obs")
    for i in np.flatnonzero(done):
        row = final[i] if not isinstance(final, dict) else {k: final[k][i] for k in keys}
        for k in keys:
            out[k][i] = row[k]
    return out


def transition_spec(
    obs_space: Any,
    keys: tuple[str, ...],
    taken_dim: int,
    extra: dict[str, tuple[tuple[int, ...], torch.dtype]] | None = None,
) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Replay fields of one chunk transition: ``obs/<k>``, ``next_obs/<k>``, ``taken``, ``reward``, ``done``,
    then the learner's ``extra`` fields (:meth:`OnlineLearner.transition_fields`). Observations are float32,
    except uint8 images, kept as they come (a quarter of the memory)."""
    spec: dict[str, tuple[tuple[int, ...], torch.dtype]] = {}
    for k in keys:  # obs/k first, then next_obs/k
        uint8 = np.dtype(getattr(obs_space[k], "dtype", np.float32)) == np.uint8
        dtype = torch.uint8 if uint8 else torch.float32
        spec[f"obs/{k}"] = spec[f"next_obs/{k}"] = (tuple(obs_space[k].shape), dtype)
    spec.update(taken=((taken_dim,), torch.float32), reward=((), torch.float32), done=((), torch.float32))
    for name, field in (extra or {}).items():
        if name in spec or "/" in name:
            raise ValueError(f"learner transition field {name!r} clashes with the replay's own fields")
        spec[name] = field
    return spec


def as_batch(batch: dict[str, torch.Tensor], keys: tuple[str, ...]) -> dict[str, Any]:
    """Flat replay fields → ``{"obs": {k: ...}, "next_obs": {k: ...}, "taken", "reward", "done", <extra>}``."""
    out: dict[str, Any] = {"obs": {}, "next_obs": {}}
    for name, value in batch.items():
        head, _, key = name.partition("/")
        if key and head in out:
            if key in keys:
                out[head][key] = value
        else:
            out[name] = value
    return out


def with_extras(
    learner: OnlineLearner,
    transitions: dict[str, torch.Tensor],
    keys: tuple[str, ...],
    generator: torch.Generator,
    chunk: int = 256,
) -> dict[str, torch.Tensor]:
    """``transitions`` (flat replay fields) plus the learner's extra fields, computed ``chunk`` rows at a time."""
    if not learner.transition_fields():
        return transitions
    n = len(transitions["reward"])
    parts = [
        learner.transition_extras({k: transitions[f"next_obs/{k}"][i : i + chunk] for k in keys}, generator)
        for i in range(0, n, chunk)
    ]
    return {**transitions, **{name: torch.cat([p[name] for p in parts]) for name in parts[0]}}


def check_replay_memory(
    spec: dict[str, tuple[tuple[int, ...], torch.dtype]], capacity: int, available: int | None = None
) -> None:
    """A replay of ``capacity`` transitions of ``spec`` must fit in the memory available (it is allocated
    whole, up front): else a clear error with the largest ``run.buffer_size`` that fits in half of it."""
    sizes = {
        k: math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        for k, (shape, dtype) in spec.items()
    }
    per = sum(sizes.values())  # bytes per transition
    need = capacity * per
    available = memory_available() if available is None else available
    if available and need > available:
        biggest = max(sizes, key=sizes.__getitem__)
        raise ValueError(
            f"run.buffer_size={capacity} chunk transitions need {need / 2**30:.1f} GiB ({per / 1024:.0f} KiB "
            f"each, the largest field {biggest!r}); {available / 2**30:.1f} GiB are available: pass "
            f"run.buffer_size={available // 2 // per} or less"
        )


def memory_available() -> int:
    """Bytes of memory available now (``MemAvailable``); 0 where the system does not say."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def replays(
    learner: OnlineLearner,
    obs_space: Any,
    cfg: OnlineRunConfig,
    device: torch.device,
    offline: dict[str, torch.Tensor] | None = None,
    demo_room: int = 0,
) -> tuple[Any, Any]:
    """(online replay, offline replay or None) of a run: the learner's transition fields, the offline
    demonstrations with their extras from the learner as built (before a resume loads its weights).
    ``demo_room``: space in the offline replay for demonstrations added while the run goes (a person's
    interventions on a robot); with it, that replay exists even without offline demonstrations."""
    from robosteer.policies.rl import ReplayBuffer

    keys = learner.obs_keys
    spec = transition_spec(obs_space, keys, learner.taken_dim, learner.transition_fields())
    check_replay_memory(spec, cfg.buffer_size)
    buffer, offline_buf = ReplayBuffer(cfg.buffer_size, spec, device), None
    if offline is not None:
        offline = with_extras(
            learner, offline, keys, torch.Generator(device=device).manual_seed(cfg.seed + 1)
        )
        offline_buf = ReplayBuffer(len(offline["reward"]) + demo_room, spec, device)
        offline_buf.add(**offline)
    elif demo_room:
        offline_buf = ReplayBuffer(demo_room, spec, device)
    return buffer, offline_buf


def mixed_batch(
    offline: Any,
    online: Any,
    batch_size: int,
    offline_ratio: float,
    gen: torch.Generator,
    keys: tuple[str, ...],
) -> dict[str, Any]:
    """A replay batch with ``offline_ratio`` of its rows from the demonstrations, as the learner reads it."""
    from robosteer.policies.rl import sample_mixed

    return as_batch(sample_mixed(offline, online, batch_size, offline_ratio, gen), keys)


def learner_state(learner: OnlineLearner, buffer: Any) -> dict[str, Any]:
    """The checkpoint modules of a learner and its replay: ``agent``, ``buffer``, ``opt_<name>``, extras."""
    modules: dict[str, Any] = {"agent": learner.state_dict(), "buffer": buffer.state_dict()}
    modules.update({f"opt_{n}": o.state_dict() for n, o in learner.optimizers().items()})
    modules.update(learner.extra_state())
    return modules


def load_learner_state(learner: OnlineLearner, buffer: Any, modules: dict[str, Any]) -> None:
    """Put :func:`learner_state`'s modules back into ``learner`` and ``buffer``."""
    learner.load_state_dict(modules["agent"])
    for name, opt in learner.optimizers().items():
        opt.load_state_dict(modules[f"opt_{name}"])
    buffer.load_state_dict(modules["buffer"])
    learner.load_extra_state({n: modules[n] for n in learner.extra_state()})


RECENT = 50  # training episodes behind train/success_rate and train/return


def owed_updates(counters: dict[str, Any], utd: float, new_transitions: int) -> int:
    """The gradient steps ``new_transitions`` owe at ``utd`` each, the fraction carried in ``pending_updates``."""
    counters["pending_updates"] += utd * new_transitions
    n_updates = int(counters["pending_updates"])
    counters["pending_updates"] -= n_updates
    return n_updates


class OnlineRun:
    """What every online steering loop shares, the simulator's (:func:`run_online`) and a robot's
    (``robosteer.real.steering.run_robot``): the run engine, the replay (offline demonstrations mixed in at
    ``offline_ratio``), the counters and evaluation history, ``checkpoints/latest`` (the resume state), the
    periodic evaluation with its ``best`` checkpoint, the owed gradient steps and the logged scalars.

    ``obs_space``: the env's single observation space ({key: (To, ...)}); ``eval_fn(policy) ->
    {"success_rate", ...}`` evaluates ``learner.eval_policy()``.
    """

    def __init__(
        self,
        learner: OnlineLearner,
        obs_space: Any,
        cfg: OnlineRunConfig,
        out_dir: str,
        eval_fn: Any = None,
        offline: dict[str, torch.Tensor] | None = None,
        resume: bool = False,
        checkpoint_config: dict[str, Any] | None = None,
        demo_room: int = 0,
    ) -> None:
        from robosteer.policies.engine import Best, RunEngine, restore_generator
        from robosteer.policies.rng import set_rng_state

        self.learner, self.cfg, self.eval_fn = learner, cfg, eval_fn
        self.device = device = resolve_device(cfg.device)  # the learner was built there (``device=``)
        built = getattr(learner, "device", device)
        if torch.device(built).type != device.type:
            raise ValueError(
                f"the learner lives on {built} but the run's device={cfg.device!r}: build it with device={device.type!r}"
            )
        what, total, desc = f"steering ({learner.kind})", cfg.env_steps, learner.label
        self.run = run = RunEngine(
            out_dir, what=what, total=total, resume=resume, unit="env step", desc=desc, settings=cfg
        )
        self.keys = learner.obs_keys
        self.extra_fields = learner.transition_fields()  # asked once: fixed for the run
        self.buffer, self.offline_buf = replays(learner, obs_space, cfg, device, offline, demo_room)
        # The loop's generator lives on the training device, so sampling there needs no host round trip.
        self.gen = torch.Generator(device=device).manual_seed(cfg.seed)
        self.counters = {
            "env_steps": 0,
            "transitions": 0,
            "updates": 0,
            "episodes": 0,
            "pending_updates": 0.0,
        }
        self.history: list[dict[str, float]] = []
        self.recent: list[tuple[bool, float]] = []  # (success, return) of the last RECENT episodes that ended
        self.info: dict[str, float] = {}  # the learner's latest figures
        self.next_log = 0
        self.config = {"kind": learner.kind, **learner.get_config(), **(checkpoint_config or {})}
        # the episodes in flight at the checkpoint (their env's record, the loop's returns), for an exact resume
        self.in_flight: dict[str, Any] | None = None
        ck = run.restore()
        if ck is not None:
            self.in_flight = ck.extra.get("in_flight")
            load_learner_state(learner, self.buffer, ck.modules)
            self.counters.update(ck.extra["counters"])
            self.history = list(ck.extra["history"])
            self.recent = [(bool(s), float(r)) for s, r in ck.extra.get("recent", [])]
            run.best = Best.from_state(ck.extra.get("best"))
            set_rng_state(ck.extra["rng"])
            run.mark_saved(int(self.counters["env_steps"]))
            restore_generator(
                self.gen, ck.extra["generator"], reseed=cfg.seed + 7919 * int(self.counters["transitions"])
            )
        self.next_log = self.counters["env_steps"] + cfg.log_every

    @property
    def step(self) -> int:
        return int(self.counters["env_steps"])

    def save(self, in_flight: dict[str, Any] | None = None) -> None:
        """``checkpoints/latest``; ``in_flight``: the episodes in flight (see :func:`run_online`)."""
        from robosteer.policies.rng import get_rng_state

        learner = self.learner
        modules = learner_state(learner, self.buffer)
        extra = {
            "counters": dict(self.counters),
            "history": self.history,
            "best": self.run.best.state(),
            "rng": get_rng_state(),
            "generator": self.gen.get_state(),
            "recent": [[s, r] for s, r in self.recent],
            **({"in_flight": in_flight} if in_flight is not None else {}),
        }
        self.run.save_latest(modules, self.config, extra, self.step, learner.named_parameters())

    def evaluate(self) -> None:
        """``eval_fn`` on the learner's evaluation policy at this step; a new best is kept as ``best``."""
        step, learner = self.step, self.learner
        m = self.run.evaluate(
            lambda: self.eval_fn(learner.eval_policy()),
            step,
            seed=self.cfg.seed,
            best=lambda m: ({"agent": learner.state_dict()}, {**self.config, "score": self.run.best.state()}),
        )
        self.history.append({"env_steps": float(step), "success_rate": float(m["success_rate"])})

    def sample(self, batch_size: int) -> dict[str, Any]:
        return mixed_batch(
            self.offline_buf, self.buffer, batch_size, self.cfg.offline_ratio, self.gen, self.keys
        )

    def tensors(self, obs: dict[str, Any]) -> dict[str, torch.Tensor]:
        """Observation windows on the device, in the replay's dtypes (uint8 images stay uint8)."""
        spec = self.buffer.spec
        return {k: torch.as_tensor(obs[k], dtype=spec[f"obs/{k}"][1], device=self.device) for k in self.keys}

    @property
    def learning(self) -> bool:
        """Past the warm-up: the learner acts and trains."""
        return self.counters["transitions"] >= self.cfg.warmup_chunks

    def learn(self, new_transitions: int) -> None:
        """The gradient steps owed for ``new_transitions`` (``utd`` each, fractions carried over)."""
        from robosteer.policies.engine import losses

        counters = self.counters
        n_updates = owed_updates(counters, self.cfg.utd, new_transitions)
        self.info.update(self.learner.learn(n_updates, new_transitions, self.sample, self.gen))
        # a NaN/inf loss stops the run here, before any save: checkpoints/latest stays the last good one
        self.run.check(losses(self.info), counters["env_steps"])
        counters["updates"] += n_updates

    def episode_ended(self, success: bool, ret: float) -> None:
        self.recent = [*self.recent, (success, ret)][-RECENT:]
        self.counters["episodes"] += 1

    def log(self) -> dict[str, str]:
        """Scalars every ``log_every`` env steps; the progress bar's postfix."""
        step, run, counters = self.step, self.run, self.counters
        postfix: dict[str, str] = {}
        if step >= self.next_log:
            self.next_log += self.cfg.log_every
            elapsed = max(run.seconds(), 1e-9)
            run.scalar("perf/env_steps_per_s", step / elapsed, step)
            run.scalar("perf/updates_per_s", counters["updates"] / elapsed, step)
            for k, v in self.info.items():
                run.scalar(f"train/{k}", v, step)
            if self.recent:
                rate, ret = self.train_figures()
                run.scalar("train/success_rate", rate, step)
                run.scalar("train/return", ret, step)
                postfix = {"success": f"{rate:.0%}", "q": f"{self.info.get('q', 0):.2f}"}
        return postfix

    def finish(self, in_flight: Callable[[], dict[str, Any] | None] = lambda: None) -> dict[str, Any]:
        """After the loop: keep what was learned on Ctrl-C (and re-raise it), else the final evaluation and
        save; the run's metrics. ``in_flight()``: the episodes in flight, for the save."""
        if self.run.interrupted:  # Ctrl-C, as a flag: keep what was learned, skip the final evaluation
            log.warning(
                "interrupted at env step %d: saving checkpoints/latest (resume=true continues)", self.step
            )
            self.save(in_flight())
            raise KeyboardInterrupt
        history = self.history
        if self.eval_fn is not None and (not history or history[-1]["env_steps"] != self.step):
            self.evaluate()
        self.save(in_flight())
        return self.metrics()

    def train_figures(self) -> tuple[float, float]:
        """(success rate, mean return) of the last ``RECENT`` training episodes (the loop's own reward)."""
        return float(np.mean([s for s, _ in self.recent])), float(np.mean([x for _, x in self.recent]))

    def metrics(self) -> dict[str, Any]:
        history, counters = self.history, self.counters
        train = self.train_figures() if self.recent else (None, None)
        return {
            "env_steps": counters["env_steps"],
            "updates": counters["updates"],
            "train_episodes": counters["episodes"],
            "train_success_rate": train[0],  # the last RECENT training episodes, exploring
            "train_return": train[1],
            "eval_episodes": self.cfg.eval_episodes,
            "wall_time_s": self.run.seconds(),
            "history": history,
            "success_rate": history[-1]["success_rate"] if history else None,
            "best_success_rate": self.run.best.success_rate if history else None,
            "best_env_steps": self.run.best.step if history else None,
            "initial_success_rate": history[0]["success_rate"] if history else None,
        }


def run_online(
    learner: OnlineLearner, env: Any, cfg: OnlineRunConfig, out_dir: str, **options: Any
) -> dict[str, Any]:
    """Collect chunk transitions from ``env`` and train ``learner``; returns the final metrics.

    ``env``: the batched env protocol with ``action_chunk`` set and observation histories (B, To, ...).
    Bootstrapping is cut only on true termination (success); a time-out keeps bootstrapping from its
    last observation. ``options``: :class:`OnlineRun`'s keywords: ``eval_fn(policy) -> {"success_rate", ...}``
    evaluates ``learner.eval_policy()``; ``offline``: transitions with the replay's fields, mixed into every
    batch at ``offline_ratio``; ``resume``; ``checkpoint_config``.
    """
    o = OnlineRun(learner, getattr(env, "single_observation_space", None), cfg, out_dir, **options)
    run, counters, keys, device, gen = o.run, o.counters, o.keys, o.device, o.gen
    num_envs = env.num_envs
    obs, ep_return = resume_episodes(env, o.in_flight, cfg.seed + 7919 * counters["transitions"])
    record = getattr(env, "episode_states", None)  # an env that can record its episodes in flight
    on_device = getattr(env, "output", "numpy") == "torch"  # a GPU sim's tensors: kept on the device
    step_env = TorchEnvSteps(o, ep_return) if on_device else NumpyEnvSteps(o, ep_return)

    def in_flight() -> dict[str, Any] | None:
        states = record() if record is not None else None
        return None if states is None else {"envs": states, "ep_return": step_env.ep_return.copy()}

    run.start(o.step)  # a resumed run drops its stale events; Ctrl-C becomes a flag
    with run:
        if not o.history and o.eval_fn is not None:
            o.evaluate()  # the untrained learner on top of the base: the "step 0" point of the curve
        while counters["env_steps"] < cfg.env_steps and not run.should_stop():
            before = o.step
            obs_t = o.tensors(obs)  # once a step
            warm = not o.learning
            taken, chunk = (learner.warmup_action if warm else learner.explore)(obs_t, gen)
            obs, next_t, reward, terminated, steps, done_any = step_env(env, chunk)
            # ours (time-outs): a time-out bootstraps (done = success only); DSRL's and EXPO's references store
            # it as terminal (ActionChunkWrapper returns truncated=False; train_robo.py masks it to 0)
            o.buffer.add(
                **{f"obs/{k}": obs_t[k] for k in keys},
                **{f"next_obs/{k}": next_t[k] for k in keys},
                taken=taken,
                reward=torch.as_tensor(reward, dtype=torch.float32, device=device),
                done=torch.as_tensor(terminated, dtype=torch.float32, device=device),
                **(learner.transition_extras(next_t, gen) if o.extra_fields else {}),
            )
            learner.observe(obs_t, chunk, steps, done_any, terminated)
            executed = step_env.account(
                reward, steps, done_any, terminated
            )  # the env steps of this vector step
            counters["env_steps"] += executed
            counters["transitions"] += num_envs
            if o.learning:
                o.learn(num_envs)
            due_eval = o.eval_fn is not None and run.due(counters["env_steps"], cfg.eval_every, before)
            due_save = run.due(counters["env_steps"], cfg.checkpoint_every, before)
            if due_eval or due_save or o.step >= o.next_log:
                step_env.settle()  # the episodes that ended, counted before they are logged or saved
            run.progress(executed, **o.log())
            if due_eval:
                o.evaluate()
            if due_save:
                o.save(in_flight())
        step_env.settle()
        return o.finish(in_flight)


class NumpyEnvSteps:
    """A vector step of a numpy env (Meta-World): rewards, dones and the true next observations on the host,
    the next observations moved to the learner's device; each finished episode counted as it ends."""

    def __init__(self, o: OnlineRun, ep_return: np.ndarray) -> None:
        self.o, self.ep_return = o, ep_return

    def __call__(self, env: Any, chunk: torch.Tensor) -> tuple[Any, ...]:
        from robosteer.policies.rl.offline import shaped_chunk_reward

        cfg = self.o.cfg
        next_obs, reward, terminated, truncated, info = env.step(chunk.cpu().numpy())
        steps = np.asarray(info["steps_executed"])
        success = np.asarray(info["success"], dtype=bool)
        if cfg.reward == "sparse":
            r = np.where(success, 0.0, -1.0)
        elif cfg.reward == "shaped":
            r = shaped_chunk_reward(np.asarray(reward), steps, chunk.shape[1], cfg.reward_scale)
        else:
            r = np.asarray(reward, dtype=np.float64)
        terminated = np.asarray(terminated, dtype=bool)  # (B,) episode ended in success
        done_any = terminated | np.asarray(truncated)
        real_next = final_obs(info, next_obs, done_any, self.o.keys)
        return next_obs, self.o.tensors(real_next), r, terminated, steps, done_any

    def account(self, r: np.ndarray, steps: np.ndarray, done_any: np.ndarray, terminated: np.ndarray) -> int:
        self.ep_return += r
        for i in np.flatnonzero(done_any):
            self.o.episode_ended(bool(terminated[i]), float(self.ep_return[i]))
            self.ep_return[i] = 0.0
        return int(steps.sum())

    def settle(self) -> None:
        """Every ended episode is counted as it ends: nothing waits."""


class TorchEnvSteps:
    """A vector step of a tensor env (MuJoCo Warp, Isaac) on the learner's device, with one host sync (the env
    steps executed): rewards, dones, returns and the true next observations stay tensors, and the finished
    episodes' figures wait on the device until :meth:`settle` (before a log, an evaluation or a save)."""

    SETTLE_EVERY = 64  # vector steps of episode figures held on the device at most

    def __init__(self, o: OnlineRun, ep_return: np.ndarray) -> None:
        self.o = o
        self.returns = torch.as_tensor(ep_return, dtype=torch.float64, device=o.device)  # (B,)
        self.pending: list[torch.Tensor] = []  # (3, B) per vector step: done, success, return at the end

    @property
    def ep_return(self) -> np.ndarray:
        return self.returns.cpu().numpy()

    def __call__(self, env: Any, chunk: torch.Tensor) -> tuple[Any, ...]:
        cfg = self.o.cfg
        next_obs, reward, terminated, truncated, info = env.step(chunk)
        steps = info["steps_executed"]  # (B,)
        if cfg.reward == "sparse":
            r = torch.where(info["success"], 0.0, -1.0).to(torch.float64)
        elif cfg.reward == "shaped":  # shaped_chunk_reward, in torch
            r = (reward.to(torch.float64) / cfg.reward_scale - steps.to(torch.float64)) / chunk.shape[1]
        else:
            r = reward.to(torch.float64)
        done_any = terminated | truncated
        real_next = {k: info["final_obs"][k] for k in self.o.keys}  # the true next obs of every env
        return next_obs, self.o.tensors(real_next), r, terminated, steps, done_any

    def account(
        self, r: torch.Tensor, steps: torch.Tensor, done_any: torch.Tensor, terminated: torch.Tensor
    ) -> int:
        self.returns += r
        self.pending.append(torch.stack([done_any.double(), terminated.double(), self.returns.clone()]))
        self.returns = torch.where(done_any, 0.0, self.returns)
        if len(self.pending) >= self.SETTLE_EVERY:
            self.settle()
        return int(steps.sum())  # the one host sync of a vector step

    def settle(self) -> None:
        """Count the episodes that ended since the last settle, in the order they ended (one host sync)."""
        if not self.pending:
            return
        held = torch.stack(self.pending).cpu().numpy()  # (T, 3, B)
        self.pending = []
        for done, success, ret in held:
            for i in np.flatnonzero(done):
                self.o.episode_ended(bool(success[i]), float(ret[i]))


def resume_episodes(
    env: Any, in_flight: dict[str, Any] | None, seed: int
) -> tuple[dict[str, Any], np.ndarray]:
    """(observations, per-env returns so far) to start the loop from: the checkpoint's episodes in flight,
    replayed by an env that can (``restore_episodes``), so a resumed run retraces the uninterrupted one step
    for step; otherwise every env starts a new episode from ``seed``."""
    if in_flight is not None:
        restore = getattr(env, "restore_episodes", None)  # GPU sims (warp, Isaac) cannot
        obs = restore(in_flight["envs"]) if restore is not None else None
        if obs is not None:
            return obs, np.asarray(in_flight["ep_return"], dtype=np.float64).copy()
        log.warning(
            "the checkpoint's episodes in flight do not replay on this env (another simulator or build, task or "
            "num_envs): they start afresh, so this resume does not retrace the interrupted run step for step"
        )
    return env.reset(seed=seed), np.zeros(env.num_envs)

"""The steering learner in a process of its own (``learner.mode=ray``): SERL's actor–learner split, on Ray.

Why this shape (../shared/reference/interop.md, section 3):
- The actor is robosteer-steer's own process, beside the robot: the control loop, the acting copy of the
  learner, the success judge, the recording and the simulator's evaluations. The learner is a Ray actor
  (:class:`LearnerWorker`), on this machine or on a GPU host of the same cluster (``learner.address``): the
  replay, the critics and the steering actor, trained in a thread of its own while the arm moves.
- Episodes flow one way, as recorded (the learner's observation keys only), each with its index; weights flow
  back latest-only: the learner publishes every ``weights_every`` updates and the actor takes the newest at an
  episode boundary (LeRobot), so each episode acts with one set of weights. The staleness (the learner's
  updates past the acting weights) is logged per episode.
- The cluster is token-authenticated (Ray's ``RAY_AUTH_MODE=token``): Ray's control plane runs code for whoever
  reaches its ports (it binds every interface, not loopback), and here it commands a robot. A cluster this run
  starts gets a fresh token of its own; joining one (``learner.address``) needs its token, and a cluster
  without one is joined only with ``learner.insecure=true``.
- Nothing durable lives in the learner. The actor pulls its whole state (learner, optimizers, replay,
  counters, generator) into ``checkpoints/latest``, and the recordings are the log: a resumed run re-sends
  every recorded episode its checkpoint has not seen (real/steering.py), so a learner killed mid-run costs
  the updates since the last checkpoint, never an episode.
"""

from __future__ import annotations

import contextlib
import math
import os
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from robosteer.policies.steering.loop import (
    OnlineLearner,
    OnlineRunConfig,
    learner_state,
    load_learner_state,
    mixed_batch,
    owed_updates,
    replays,
)

MODES = ("local", "ray")


class LearnerError(RuntimeError):
    """The learner process died, stopped on a fault, or does not answer."""


@dataclass
class LearnerConfig:
    """Where the learner runs (configs/steer.yaml ``learner:``)."""

    mode: str = (
        "local"  # local: the updates run in this process between episodes | ray: a Ray actor of their own
    )
    address: str | None = (
        None  # ray: an existing cluster (``ray start --head`` there: host:port); None: start one here
    )
    weights_every: int = 20  # ray: the learner publishes the steering actor's weights every N updates
    max_backlog: int | None = 256  # ray: transitions received but not yet learned from, past which the actor
    #   waits at the next episode boundary (the arm idle between episodes); None: never waits
    num_gpus: float = 0.0  # ray: GPUs the learner asks of the cluster (with device=cuda)
    timeout_s: float = 120.0  # ray: a learner call not answered in this time stops the run
    # ray with address: join a cluster without a Ray token (anyone reaching its ports can run code on it and so
    # command the robot); false (ours): a token is needed (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)
    insecure: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"learner.mode={self.mode!r} is not known: expected one of {MODES}")
        if self.weights_every < 1:
            raise ValueError(
                f"learner.weights_every={self.weights_every} is not valid: expected >= 1 updates"
            )
        if self.max_backlog is not None and self.max_backlog < 1:
            raise ValueError(
                f"learner.max_backlog={self.max_backlog} is not valid: expected >= 1 transitions, or null"
            )
        if self.timeout_s <= 0:
            raise ValueError(f"learner.timeout_s={self.timeout_s} is not valid: expected seconds > 0")
        if self.mode == "ray" and self.address and not self.insecure and not ray_token_known():
            raise ValueError(
                f"learner.address={self.address}: no Ray token is set (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or "
                "~/.ray/auth_token): start the head with RAY_AUTH_MODE=token and give this machine its token, or "
                "join a cluster without authentication with learner.insecure=true"
            )


def ray_token_known() -> bool:
    """A Ray authentication token is set for this process, in any of Ray's own places."""
    return (
        bool(os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"))
        or (Path.home() / ".ray" / "auth_token").is_file()
    )


def authenticate_ray(split: LearnerConfig) -> None:
    """Turn on Ray's token authentication for the cluster this process starts or joins: a cluster started
    here gets a fresh random token unless one is set; a joined one uses the token set (checked by
    :class:`LearnerConfig`), or none with ``insecure``."""
    if split.address and split.insecure and not ray_token_known():
        return  # the user's explicit choice: a cluster without authentication
    os.environ["RAY_AUTH_MODE"] = "token"
    if not split.address and not ray_token_known():
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)  # this run's own cluster, its own token
    # Ray reads its settings when first imported: re-read them (what Ray's own tests do after changing these
    # variables; ray 2.60 is pinned), else this process would run token-less beside a token-mode cluster.
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


class ShapeOnly:
    """The one attribute of a gym space the replay reads: ``shape``."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape


def ingest(
    learner: OnlineLearner,
    buffer: Any,
    gen: torch.Generator,
    cfg: OnlineRunConfig,
    arrays: dict[str, Any],
    held: list[bool] | None,
    n_obs_steps: int,
    exec_steps: int,
    demos: Any = None,
) -> tuple[int, float]:
    """A learned episode (as recorded, cut where it succeeded) into ``buffer``: its chunk transitions with the
    learner's extra fields; the learner sees their states. The chunks a person commanded (interventions) go
    to ``demos`` (the demonstration replay) as well. Returns the number of transitions and their return."""
    keys = learner.obs_keys
    t, person = _transitions(learner, gen, cfg, arrays, held, n_obs_steps, exec_steps)
    t = {k: v.to(buffer.device) for k, v in t.items()}
    buffer.add(**t)
    _add_person_chunks(demos, t, person)
    obs = {k: t[f"obs/{k}"] for k in keys}
    learner.observe_recorded(obs)
    success = bool(np.asarray(arrays["dones"]).any()) and not arrays.get("safety_abort")
    learner.observe_recorded_episode(obs, t["taken"], success, person)
    return len(t["reward"]), float(t["reward"].sum())


def ingest_demos(
    learner: OnlineLearner,
    demos: Any,
    gen: torch.Generator,
    cfg: OnlineRunConfig,
    arrays: dict[str, Any],
    held: list[bool] | None,
    n_obs_steps: int,
    exec_steps: int,
) -> int:
    """Only the intervention chunks of a learned episode into ``demos``: a resumed run rebuilds what its
    demonstration replay held (that replay is rebuilt, not checkpointed). Returns how many."""
    if demos is None:
        return 0
    t, person = _transitions(learner, gen, cfg, arrays, held, n_obs_steps, exec_steps)
    return _add_person_chunks(demos, t, person)


def _add_person_chunks(demos: Any, t: dict[str, torch.Tensor], person: torch.Tensor | None) -> int:
    """The transitions a person commanded (``person`` (N,) bool) into ``demos``; how many."""
    if demos is None or person is None or not bool(person.any()):
        return 0
    demos.add(**{k: v[person.to(v.device)].to(demos.device) for k, v in t.items()})
    return int(person.sum())


def _transitions(
    learner: OnlineLearner,
    gen: torch.Generator,
    cfg: OnlineRunConfig,
    arrays: dict[str, Any],
    held: list[bool] | None,
    n_obs_steps: int,
    exec_steps: int,
) -> tuple[dict[str, torch.Tensor], torch.Tensor | None]:
    """(an episode's chunk transitions with the learner's extras, the chunks a person commanded or None)."""
    from robosteer.policies.steering.loop import with_extras
    from robosteer.real.steering import learner_embedding, recorded_keys, recorded_transitions

    gamma = float(learner.config.gamma) if arrays.get("safety_abort") else None  # the abort's target
    embedding = learner_embedding(learner)  # a pixel base: the frames become its embedding here
    transform = None if embedding is None else embedding.transform
    keys = recorded_keys(learner)
    t = recorded_transitions(arrays, keys, n_obs_steps, exec_steps, cfg, held, gamma, transform)
    person = t.pop("person", None)
    return with_extras(learner, t, learner.obs_keys, gen), person


class LearnerWorker:
    """The learner's process: episodes in (:meth:`add_episode`), the owed updates in a training thread (``utd``
    per transition, ``learn_slice`` transitions a call, as the simulator loop makes them), the acting weights
    published every ``weights_every`` updates, the whole state on demand (:meth:`snapshot`).

    ``state``: a checkpoint's learner modules, ``counters`` and ``generator`` (a resumed run), or None.
    """

    def __init__(
        self,
        learner: OnlineLearner,
        shapes: dict[str, tuple[int, ...]],
        cfg: OnlineRunConfig,
        offline: dict[str, torch.Tensor] | None,
        state: dict[str, Any] | None,
        *,
        n_obs_steps: int,
        exec_steps: int,
        learn_slice: int,
        weights_every: int,
        threads: int = 1,
        demo_room: int = 0,
    ) -> None:
        from robosteer.policies.engine import resolve_device

        torch.set_num_threads(threads)
        self.learner, self.cfg = learner, cfg
        self.n_obs_steps, self.exec_steps, self.learn_slice = n_obs_steps, exec_steps, learn_slice
        self.weights_every = weights_every
        self.device = resolve_device(cfg.device)
        space = {k: ShapeOnly(tuple(s)) for k, s in shapes.items()}
        self.buffer, self.offline_buf = replays(learner, space, cfg, self.device, offline, demo_room)
        self.gen = torch.Generator(device=self.device).manual_seed(cfg.seed)
        self.counters: dict[str, Any] = {
            "transitions": 0,
            "updates": 0,
            "pending_updates": 0.0,
            "episodes": 0,
            "backlog": 0,
        }
        if state is not None:
            load_learner_state(learner, self.buffer, state["modules"])
            self.counters.update({k: state["counters"][k] for k in self.counters if k in state["counters"]})
            self.gen.set_state(torch.as_tensor(state["generator"], dtype=torch.uint8))
        self.info: dict[str, float] = {}
        self.fault: str | None = None
        self.cond = threading.Condition()
        self.busy_s, self.started = 0.0, time.monotonic()
        self.published: tuple[int, dict[str, torch.Tensor]] = (-1, {})
        self._publish()
        self.stopping = False
        self.thread = threading.Thread(target=self._train, name="learner", daemon=True)
        self.thread.start()

    # ------------------------------------------------------------------ the actor's calls
    def add_episode(self, index: int, arrays: dict[str, Any], held: list[bool] | None) -> dict[str, Any]:
        """Episode ``index`` (the next one expected: a resent one is acknowledged, not added twice)."""
        with self.cond:
            ret = None
            if index == self.counters["episodes"]:
                n, ret = ingest(
                    self.learner,
                    self.buffer,
                    self.gen,
                    self.cfg,
                    arrays,
                    held,
                    self.n_obs_steps,
                    self.exec_steps,
                    self.offline_buf,
                )
                c = self.counters
                c["transitions"] += n
                c["episodes"] += 1
                if c["transitions"] >= self.cfg.warmup_chunks:  # past the warm-up, as the local loop learns
                    c["backlog"] += n
                self.cond.notify_all()
            elif index > self.counters["episodes"]:
                raise LearnerError(
                    f"episode {index} arrived but the learner expected episode {self.counters['episodes']}"
                )
            return {**self._stats(), "last_return": ret}

    def add_demos(self, arrays: dict[str, Any], held: list[bool] | None, seed: int) -> int:
        """A learned episode's intervention chunks into the demonstration replay (a resumed run's rebuild)."""
        gen = torch.Generator(device=self.device).manual_seed(seed)
        with self.cond:
            return ingest_demos(
                self.learner, self.offline_buf, gen, self.cfg, arrays, held, self.n_obs_steps, self.exec_steps
            )

    def stats(self) -> dict[str, Any]:
        with self.cond:
            return self._stats()

    def weights(self, since: int) -> tuple[int, dict[str, torch.Tensor] | None]:
        """(the published version, its state dict if newer than ``since``, else None)."""
        with self.cond:
            version, state = self.published
        return version, (state if version > since else None)

    def snapshot(self) -> dict[str, Any]:
        """The whole learner between two updates: modules, counters, generator (for ``checkpoints/latest``)."""
        with self.cond:
            modules = learner_state(self.learner, self.buffer)
            return {
                "modules": {k: _cpu(v) for k, v in modules.items()},
                "counters": dict(self.counters),
                "generator": self.gen.get_state(),
                "stats": self._stats(),
            }

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.thread.join(timeout=30)

    def pid(self) -> int:
        return os.getpid()

    # ------------------------------------------------------------------ the training thread
    def _train(self) -> None:
        from robosteer.policies.engine import losses

        while True:
            with self.cond:
                while not self.stopping and (self.counters["backlog"] == 0 or self.fault):
                    self.cond.wait()
                if self.stopping:
                    return
                c = self.counters
                k = min(self.learn_slice, int(c["backlog"]))
                t0 = time.perf_counter()
                try:
                    n = owed_updates(c, self.cfg.utd, k)
                    info = self.learner.learn(n, k, self._sample, self.gen)
                except Exception as e:  # kept for the actor's next call: the run stops there
                    self.fault = f"the learner's update failed: {type(e).__name__}: {e}"
                    continue
                bad = {name: float(v) for name, v in losses(info).items() if not math.isfinite(float(v))}
                if bad:  # nothing past the last good checkpoint is kept: the actor stops without saving
                    what = ", ".join(f"{name} = {v}" for name, v in bad.items())
                    self.fault = f"non-finite {what} at learner update {c['updates'] + n}"
                    continue
                self.info.update(info)
                c["backlog"] -= k
                c["updates"] += n
                self.busy_s += time.perf_counter() - t0
                if c["updates"] - self.published[0] >= self.weights_every:
                    self._publish()

    def _sample(self, batch_size: int) -> dict[str, Any]:
        return mixed_batch(
            self.offline_buf, self.buffer, batch_size, self.cfg.offline_ratio, self.gen, self.learner.obs_keys
        )

    def _publish(self) -> None:
        self.published = (int(self.counters["updates"]), _cpu(self.learner.state_dict()))

    def _stats(self) -> dict[str, Any]:
        from robosteer.real.steering import simulators_imported

        c = self.counters
        return {
            **{k: c[k] for k in ("transitions", "updates", "episodes", "backlog")},
            "version": self.published[0],
            "updates_per_s": c["updates"] / max(time.monotonic() - self.started, 1e-9),
            "busy_updates_per_s": c["updates"] / self.busy_s if self.busy_s > 0 else None,
            "info": dict(self.info),
            "fault": self.fault,
            "simulators_imported": simulators_imported(),  # this process's: none, on a real arm
        }


def _cpu(state: Any) -> Any:
    """A (nested) state dict with its tensors copied to the CPU, so the actor's side can read it anywhere."""
    if isinstance(state, torch.Tensor):
        return state.detach().to("cpu", copy=True)
    if isinstance(state, dict):
        return {k: _cpu(v) for k, v in state.items()}
    if isinstance(state, list):
        return [_cpu(v) for v in state]
    return state


class RayLearner:
    """The actor's handle on a :class:`LearnerWorker` under Ray: episodes out, weights and figures back.

    Starts a local Ray instance when none is running and ``split.address`` is None; every failure of the
    learner's process (killed, a fault in its updates, no answer) is a :class:`LearnerError` naming it.
    """

    def __init__(self, split: LearnerConfig, learner: OnlineLearner, **worker: Any) -> None:
        import ray

        self.split, self._ray = split, ray
        self.started_ray = not ray.is_initialized()
        if self.started_ray:
            if split.address:
                _reachable(split.address)
            authenticate_ray(split)
            try:
                ray.init(
                    address=split.address,
                    include_dashboard=False,
                    logging_level="ERROR",
                    log_to_driver=False,
                    configure_logging=True,
                )
            except (ConnectionError, RuntimeError, ValueError) as e:
                where = (
                    f"learner.address={split.address!r}: no Ray cluster there"
                    if split.address
                    else ("Ray could not start on this machine")
                )
                raise LearnerError(f"{where} ({e})") from None
        remote = ray.remote(num_cpus=1, num_gpus=split.num_gpus, max_restarts=0)(LearnerWorker)
        self.worker = remote.remote(learner, **worker)
        self.version = -1  # the acting weights' version (the learner's update count when published)
        self.dead = False  # its process died or stopped answering: its state is gone
        self.last: dict[str, Any] = self._call("stats")

    def _call(self, method: str, *args: Any) -> Any:
        ray = self._ray
        try:
            return ray.get(getattr(self.worker, method).remote(*args), timeout=self.split.timeout_s)
        except ray.exceptions.GetTimeoutError:
            self.dead = True
            raise LearnerError(
                f"the learner did not answer {method} within learner.timeout_s={self.split.timeout_s} s"
            ) from None
        except ray.exceptions.RayActorError as e:
            self.dead = True
            raise LearnerError(f"the learner process died ({type(e).__name__})") from None
        except ray.exceptions.RayTaskError as e:
            cause = e.as_instanceof_cause()
            raise LearnerError(
                f"the learner failed in {method}: {str(cause).strip().splitlines()[-1]}"
            ) from None

    def _checked(self, stats: dict[str, Any]) -> dict[str, Any]:
        self.last = stats
        if stats["fault"]:
            raise LearnerError(stats["fault"])
        return stats

    def add_episode(self, index: int, arrays: dict[str, Any], held: list[bool] | None) -> dict[str, Any]:
        return self._checked(self._call("add_episode", index, arrays, held))

    def add_demos(self, arrays: dict[str, Any], held: list[bool] | None, seed: int) -> int:
        return int(self._call("add_demos", arrays, held, seed))

    def stats(self) -> dict[str, Any]:
        return self._checked(self._call("stats"))

    def newest_weights(self) -> dict[str, torch.Tensor] | None:
        """The published weights when newer than the acting ones (and their version becomes the acting one)."""
        version, state = self._call("weights", self.version)
        if state is None:
            return None
        self.version = int(version)
        return state

    def wait_backlog(self) -> float:
        """Wait until the learner's backlog is within ``max_backlog``; the seconds waited."""
        if self.split.max_backlog is None:
            return 0.0
        t0 = time.monotonic()
        while self.last["backlog"] > self.split.max_backlog:
            time.sleep(0.05)
            self.stats()
        return time.monotonic() - t0

    def snapshot(self) -> dict[str, Any]:
        snap = self._call("snapshot")
        self._checked(snap["stats"])
        return snap

    def pid(self) -> int:
        return int(self._call("pid"))

    def close(self) -> None:
        """Stop the learner's process (and the Ray instance this handle started); quiet if it is gone."""
        ray = self._ray
        with contextlib.suppress(Exception):  # already dead or stuck: it is killed below either way
            ray.get(self.worker.stop.remote(), timeout=30)
        with contextlib.suppress(Exception):
            ray.kill(self.worker, no_restart=True)
        if self.started_ray:
            ray.shutdown()


def _reachable(address: str, timeout_s: float = 5.0) -> None:
    """Refuse an unreachable ``learner.address`` in seconds (Ray itself retries for minutes)."""
    import socket

    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise LearnerError(f"learner.address={address!r} is not valid: expected HOST:PORT of a Ray head node")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise LearnerError(
            f"learner.address={address!r}: no Ray head answers there ({e}); start one with "
            f"`ray start --head --port={port}` on that machine"
        ) from None


def held_attr(held: list[bool] | None, steps: int) -> np.ndarray:
    """An episode's held steps as a compact recording attribute (bits); every step acted when None."""
    bits = np.zeros(steps, dtype=bool) if held is None else np.asarray(held, dtype=bool)
    return np.packbits(bits)


def held_from_attr(packed: Any, steps: int) -> list[bool]:
    return [bool(b) for b in np.unpackbits(np.asarray(packed, dtype=np.uint8))[:steps]]

"""The control-loop runtime: a policy (local or remote) drives a robot through the safety filter.

Why it is shaped this way (diffusion_policy's real-robot runner, LeRobot's async inference):
- The loop ticks at the robot's rate on the wall clock. Each tick it reads the latest observation, sends
  the one command scheduled for ``tick + lead`` (``lead`` = the link's command latency, so the command
  arrives when it is due) stamped with its execution time, and otherwise the safety filter's hold command.
- Chunks are planned in a worker thread, so the loop never blocks on inference or the network. The two
  modes are two small strategies behind one interface (:class:`Execution`: when to request, on what to
  condition, where the actions run); the tick itself (:class:`_Episode`) is the same for both. In
  ``sync`` mode the arm holds while the next chunk is planned from an observation taken after the previous
  chunk finished (stop-and-think). In ``async`` mode the next chunk is requested while the current one
  executes, when no more future actions remain than a request's measured round trip (in ticks, + 1; or
  ``async_threshold``) covers, so it lands as the current one runs out; each chunk contributes Ta actions
  after its stale ones; its actions are stamped from the observation's capture time, those whose time has
  passed are dropped (stale), and where two chunks overlap they are blended (``blend`` = the weight of the
  newer chunk).
- Async plans are made from an observation that is old by the time their first action can execute (link
  latency each way plus inference: 13 ticks at 150 ms and 80 Hz), and the arm meanwhile executes actions
  already committed. With ``inpaint`` (policies with ``supports_prefix``) each request passes those actions,
  the executed ones of the obs window and the in-flight and scheduled ones, as the chunk's prefix, and the
  policy samples the rest consistent with them (real-time chunking, Black et al. 2025, by inpainting), so a
  plan continues the motion the arm is making instead of the one it would have planned 13 ticks ago.
- Every failure (policy server gone, policy stalled or returning NaN, robot link lost, watchdog stop)
  stops the arm, keeps the steps recorded so far, and is reported as :class:`DeployError` with its cause.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

from robosteer.real.robot import Observation, Robot, SafetyStop
from robosteer.real.safety import SafetyFilter

MODES = ("sync", "async")
NOISE_MODES = ("episode", "random")


class DeployError(RuntimeError):
    """An episode was aborted: the arm was stopped; ``episode`` holds what was recorded up to then."""

    def __init__(self, message: str, episode: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.episode = episode


@dataclass
class RuntimeConfig:
    """Knobs of the control loop (see the module docstring)."""

    mode: str = "async"  # sync | async
    async_threshold: int | None = None  # async: request when <= this many future actions remain (None: auto)
    max_actions: int | None = None  # actions used per chunk (None: Ta in sync; Ta + measured delay in async)
    blend: float = (
        1.0  # weight of the newer chunk where chunks overlap (1.0: replace; < 1: temporal blending)
    )
    lead_s: float | None = None  # command lead; None: the robot's measured command latency
    policy_timeout_s: float = 2.0  # a chunk request still running after this aborts the episode
    max_steps: int | None = None  # control ticks per episode (None: the robot's episode end, else 1000)
    obs_timeout_s: float = 1.0  # the latest observation older than this aborts the episode
    noise: str = "random"  # random: fresh noise per chunk | episode: one sample reused by every chunk
    inpaint: bool = True  # async: condition each chunk on the committed actions (supports_prefix policies)

    def validate(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r} is not valid: expected one of {MODES}")
        if not 0.0 < self.blend <= 1.0:
            raise ValueError(f"blend={self.blend} is not valid: expected 0 < blend <= 1")
        if self.noise not in NOISE_MODES:
            raise ValueError(f"noise={self.noise!r} is not valid: expected one of {NOISE_MODES}")
        if self.async_threshold is not None and self.async_threshold < 1:
            raise ValueError(f"async_threshold={self.async_threshold} is not valid: expected >= 1")
        for name in ("policy_timeout_s", "obs_timeout_s"):
            if not getattr(self, name) > 0:  # NaN too: a watchdog that never fires is no watchdog
                raise ValueError(
                    f"{name}={getattr(self, name)} is not valid: expected a number of seconds > 0"
                )


@dataclass
class _Recording:
    obs: list[dict[str, np.ndarray]] = field(default_factory=list)  # per distinct observation
    seqs: list[int] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)  # the control slot each obs was captured in
    commanded: list[np.ndarray] = field(default_factory=list)  # the command sent when each obs arrived
    applied: dict[int, np.ndarray] = field(default_factory=dict)  # seq -> action the robot applied before it
    rewards: list[float] = field(default_factory=list)
    successes: list[bool] = field(default_factory=list)

    def add(self, ob: Observation, keys: list[str]) -> None:
        self.obs.append({k: np.asarray(ob.data[k]) for k in keys})
        self.seqs.append(ob.seq)
        self.rewards.append(float(ob.info.get("reward", 0.0)))
        self.successes.append(bool(ob.info.get("success", False)))
        if "applied_action" in ob.info:
            self.applied[ob.seq] = np.asarray(ob.info["applied_action"], dtype=np.float32)

    def arrays(self) -> dict[str, Any] | None:
        """robomimic arrays: obs[t] with the action applied right after it (the robot's report when the next
        observation arrived, else the command sent), and that step's reward and success."""
        n = min(len(self.obs), len(self.commanded))
        if n == 0:
            return None
        actions, rewards, dones = [], [], []
        for i in range(n):
            nxt = self.seqs[i] + 1
            actions.append(self.applied.get(nxt, self.commanded[i]))
            has_next = i + 1 < len(self.obs)
            rewards.append(self.rewards[i + 1] if has_next else self.rewards[i])
            dones.append(self.successes[i + 1] if has_next else self.successes[i])
        return {
            "obs": {k: np.stack([o[k] for o in self.obs[:n]]) for k in self.obs[0]},  # {key: (T, ...)}
            "actions": np.stack(actions).astype(np.float32),  # (T, A)
            "rewards": np.asarray(rewards, dtype=np.float32),  # (T,)
            "dones": np.asarray(dones, dtype=np.uint8),  # (T,)
        }


class ControlLoop:
    """Runs episodes of ``policy`` on ``robot``; the policy exposes ``sample`` and To/Tp/Ta + shape_meta."""

    def __init__(
        self,
        robot: Robot,
        policy: Any,
        safety: SafetyFilter,
        config: RuntimeConfig,
        obs_keys: list[str] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        record_keys: list[str] | None = None,
        teleop: Any = None,
    ) -> None:
        config.validate()
        self.robot, self.policy, self.safety, self.cfg = robot, policy, safety, config
        # a person's device (real/teleop.py): while it returns a command, that command is sent (through the
        # safety filter) instead of the policy's; on hand-back the next chunk is planned from the current obs
        self.teleop = teleop
        self.obs_keys = list(obs_keys or policy.shape_meta["obs"])
        # what each episode's recording keeps: the policy's keys, plus any a judge reads (a success
        # classifier's camera)
        self.record_keys = list(dict.fromkeys([*self.obs_keys, *(record_keys or [])]))
        for what, keys in (("the policy needs", self.obs_keys), ("the recording needs", self.record_keys)):
            missing = [k for k in keys if k not in robot.observation_spec]
            if missing:
                raise ValueError(
                    f"{what} observation keys {missing} that {type(robot).__name__} does not produce "
                    f"(it produces {sorted(robot.observation_spec)})"
                )
        self.sleep = sleep
        self.dt = 1.0 / float(robot.rate_hz)
        self.to = int(policy.n_obs_steps)
        self.ta = int(policy.n_action_steps)
        horizon = int(policy.horizon)
        self.horizon = horizon
        self.action_dim = int(robot.action_spec.shape[0])
        self.inpaint = (
            config.mode == "async" and config.inpaint and bool(getattr(policy, "supports_prefix", False))
        )
        self.max_chunk = horizon - self.to + 1  # actions from the current obs on
        self.max_actions = min(int(config.max_actions or self.ta), self.max_chunk)
        self.execution: Execution = EXECUTIONS[config.mode](self)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chunk-planner")
        safety.add_estop_hook(lambda reason: robot.stop())

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def wait_idle(self) -> None:
        """Return once no chunk is being planned (an episode that ended mid-plan leaves one running): the
        caller may then change the policy (a learner's update) without racing the planner thread."""
        self._executor.submit(lambda: None).result()

    def run_episode(self, seed: int | None = None) -> dict[str, Any]:
        """One episode; returns its summary (``success``, ``steps``, ``status``, latency figures) and
        ``arrays`` for the recorder. Raises :class:`DeployError` (with ``episode`` attached) on a fault."""
        self.safety.reset()
        return _Episode(self, seed).run()

    # ------------------------------------------------------------------ planning (in the worker thread)
    def _submit(
        self, hist: deque[dict[str, np.ndarray]], noise: np.ndarray | None, prefix: np.ndarray | None
    ) -> Future:
        """A chunk planned from the obs window ``hist`` by the planner thread: ``(chunk, infer_ms)``."""
        return self._executor.submit(self._plan, self._window(hist), noise, prefix)

    def _plan(
        self, window: dict[str, np.ndarray], noise: np.ndarray | None, prefix: np.ndarray | None = None
    ) -> tuple[np.ndarray, float]:
        t0 = time.perf_counter()
        if prefix is not None and len(prefix):
            out = self.policy.sample(window, noise=noise, prefix=prefix[None].astype(np.float32))
        else:
            out = self.policy.sample(window, noise=noise)
        chunk = np.asarray(out, dtype=np.float64)[0]  # (Tp, Da)
        return chunk, 1e3 * (time.perf_counter() - t0)

    def _window(self, hist: deque[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        frames = list(hist)
        frames = [frames[0]] * (self.to - len(frames)) + frames  # pad at the start, as the trainer does
        return {k: np.stack([f[k] for f in frames])[None] for k in self.obs_keys}  # {key: (1, To, ...)}


class _Request(NamedTuple):
    """A chunk being planned: its future, the observation it is planned from, the tick and time it was asked."""

    future: Future
    src: Observation
    tick: int
    at: float


class _Episode:
    """One episode on the wall clock: its schedule (slot -> action; slot time = t0 + slot * dt), the chunk in
    flight, the recording and figures, and the phases of a tick. ``loop.execution`` decides when a chunk is
    requested, on what it is conditioned and where its actions run; the rest is the same in both modes."""

    def __init__(self, loop: ControlLoop, seed: int | None) -> None:
        cfg, robot = loop.cfg, loop.robot
        self.loop, self.seed, self.cfg, self.robot, self.safety = loop, seed, cfg, robot, loop.safety
        self.rec = _Recording()
        self.stats: dict[str, Any] = {"chunks": 0, "stale_dropped": 0, "held_ticks": 0, "rejected_chunks": 0}
        self.infer_ms: list[float] = []
        self.obs_age_ms: list[float] = []
        self.late_ms: list[float] = []  # how late each tick woke past its slot: the control rate's jitter
        self.schedule: dict[int, np.ndarray] = {}  # slot -> action; slot time = t0 + slot * dt
        self.sent: dict[int, np.ndarray] = {}  # slot -> command sent for it (the last Tp slots; inpainting)
        self.acted: set[int] = set()  # slots a policy action (not a hold) was sent for
        self.person: set[int] = set()  # slots a person's command (teleop) was sent for
        self.safety_abort: str | None = None  # why a safety violation ended the episode
        self.commanded_ticks = (
            0  # ticks a command was sent in: the episode's steps on a robot that counts none
        )
        self.hist: deque[dict[str, np.ndarray]] = deque(maxlen=loop.to)
        self.pending: _Request | None = None
        latency = robot.command_latency_s() if cfg.lead_s is None else cfg.lead_s
        self.lead = max(0, math.ceil((latency - 1e-9) / loop.dt))
        self.last_slot = -1  # the last scheduled slot (sync: the last action of the executing chunk)
        self.rt_ticks: float | None = None  # smoothed ticks from a chunk request to its arrival
        self.success, self.status, self.last_seq = False, "timeout", -1
        self.noise = self._episode_noise()
        self.ob: Observation | None = None
        self.t0 = time.time()
        self.tick = 0

    def _episode_noise(self) -> np.ndarray | None:
        if self.cfg.noise != "episode":
            return None
        # One noise sample per episode: successive chunks decode the same latent, so overlapping plans
        # agree (a fresh sample per chunk can switch between modes of a multimodal policy mid-motion).
        rng = np.random.default_rng(None if self.seed is None else [int(self.seed), 7])
        return rng.standard_normal((1, *self.loop.policy.noise_shape)).astype(np.float32)  # (1, Tp, Da)

    # ------------------------------------------------------------------ the episode
    def run(self) -> dict[str, Any]:
        """Reset, then tick until the episode ends or max_steps; any fault stops the arm (DeployError)."""
        self._reset()
        try:
            for tick in range(int(self.cfg.max_steps or 1000)):
                self.tick = tick
                if not self._tick():
                    break
            else:
                self.status = "timeout"
                self.robot.stop()
        except DeployError:
            raise
        except BaseException as e:  # KeyboardInterrupt, a bug: stop the arm, keep the data
            raise self.abort(f"{type(e).__name__}: {e}", e) from e
        finally:
            if self.pending is not None:
                self.pending.future.cancel()
        return self.summary()

    def _reset(self) -> None:
        """Between episodes the policy server or the robot link can fail too: the same contract as mid-episode."""
        try:
            self.loop.policy.reset()
        except Exception as e:
            raise self.abort(f"policy reset failed ({type(e).__name__}: {e})", e) from e
        try:
            self.ob = self.robot.reset(self.seed)
        except Exception as e:
            raise self.abort(f"robot reset failed ({type(e).__name__}: {e})", e) from e
        self.t0 = time.time()
        if self.loop.teleop is not None:
            self.loop.teleop.reset()

    def _tick(self) -> bool:
        """One control period: observe, take a finished chunk, request the next (unless a person holds
        control), command. False: it ended (the robot's end, or a safety violation)."""
        now = self._wait_for_slot()
        try:
            ob, new_obs = self._observe(now)
        except SafetyStop as e:  # the arm stopped itself: this episode ends, not the run
            return self._abort_for_safety(f"the robot stopped for safety ({e})", self.ob)
        if ob.info.get("done"):
            self.success = bool(ob.info.get("success"))
            self.status = "success" if self.success else "truncated"
            self.rec.commanded.append(self.safety.hold_command(ob.data))
            return False
        violation = self.safety.violation(ob.data)
        if violation is not None:
            return self._abort_for_safety(violation, ob)
        self._collect(now)
        person = self._person(ob)
        if person is None and self.pending is None:
            self._request(ob, now)
        try:
            self._command(ob, now, new_obs, person)
        except SafetyStop as e:
            return self._abort_for_safety(f"the robot stopped for safety ({e})", ob)
        return True

    def _person(self, ob: Observation) -> np.ndarray | None:
        """The person's command while they hold control (the plan in flight and the schedule are dropped:
        after hand-back the next chunk is planned from the arm as it is then), else None."""
        teleop = self.loop.teleop
        if teleop is None:
            return None
        try:
            cmd = teleop.command(ob.data)
        except Exception as e:
            raise self.abort(f"teleoperation failed ({type(e).__name__}: {e})", e) from e
        if cmd is None:
            return None
        self.schedule.clear()
        self.pending = None  # its chunk was planned before the person took over: never executed
        return np.asarray(cmd, dtype=np.float64)

    def _abort_for_safety(self, reason: str, ob: Observation | None) -> bool:
        """A safety violation ends the episode (recorded, status ``safety_abort``) with the arm stopped."""
        self.status, self.safety_abort = "safety_abort", reason
        with contextlib.suppress(Exception):
            self.robot.stop()
        if len(self.rec.commanded) < len(self.rec.obs):  # the last observation's action: the stop's hold
            self.rec.commanded.append(self.safety.hold_command(None if ob is None else ob.data))
        return False

    # ------------------------------------------------------------------ the phases of a tick
    def _wait_for_slot(self) -> float:
        target = self.t0 + self.tick * self.loop.dt
        delay = target - time.time()
        if delay > 0:
            self.loop.sleep(delay)
        now = time.time()
        self.late_ms.append(1e3 * max(now - target, 0.0))
        return now

    def _observe(self, now: float) -> tuple[Observation, bool]:
        """The latest observation (aborts when the link is lost or it is stale), and whether it is new."""
        try:
            self.ob = ob = self.robot.get_observation()
        except SafetyStop:
            raise  # the tick ends the episode for safety
        except Exception as e:
            raise self.abort(f"robot link lost ({e})", e) from e
        timeout = self.cfg.obs_timeout_s
        if ob.age(now) > timeout:
            raise self.abort(f"no fresh observation for {ob.age(now):.2f} s (> obs_timeout_s={timeout})")
        new_obs = ob.seq != self.last_seq
        if new_obs:
            self.last_seq = ob.seq
            self.hist.append({k: np.asarray(ob.data[k]) for k in self.loop.obs_keys})
            self.obs_age_ms.append(1e3 * ob.age(now))
            self.rec.add(ob, self.loop.record_keys)
            self.rec.slots.append(self.slot_of(ob))
        return ob, new_obs

    def _collect(self, now: float) -> None:
        """A finished chunk joins the schedule (one holding NaN/Inf is discarded); a stalled one aborts."""
        req = self.pending
        if req is None:
            return
        if not req.future.done():
            if now - req.at > self.cfg.policy_timeout_s:
                raise self.abort(
                    f"policy stalled: no chunk within policy_timeout_s={self.cfg.policy_timeout_s} s"
                )
            return
        self.pending = None
        try:
            chunk, ms = req.future.result()
        except Exception as e:
            if getattr(e, "code", None) != "policy_nan":
                raise self.abort(f"policy failed: {type(e).__name__}: {e}", e) from e
            chunk, ms = np.full((1, self.loop.action_dim), np.nan), 0.0
        self.infer_ms.append(ms)
        if not np.isfinite(chunk).all():
            self.stats["rejected_chunks"] += 1
            self.safety._event("nan", f"chunk planned at tick {req.tick} holds NaN/Inf: discarded", now)
        else:
            self._schedule_chunk(chunk, req)

    def _schedule_chunk(self, chunk: np.ndarray, req: _Request) -> None:
        """The chunk's actions into their slots: past ones dropped (stale), overlapping ones blended."""
        self.stats["chunks"] += 1
        rt = self.tick - req.tick
        self.rt_ticks = rt if self.rt_ticks is None else 0.7 * self.rt_ticks + 0.3 * rt
        n, first = self.loop.execution.place(self, req.src)
        to, blend = self.loop.to, self.cfg.blend
        for j, a in enumerate(chunk[to - 1 : to - 1 + n]):  # (n, Da) from the current obs on
            s = first + j
            if s < self.tick + self.lead:
                self.stats["stale_dropped"] += 1
            elif s in self.schedule:
                self.schedule[s] = (1.0 - blend) * self.schedule[s] + blend * a
            else:
                self.schedule[s] = a
        self.last_slot = max(self.schedule) if self.schedule else self.last_slot

    def _request(self, ob: Observation, now: float) -> None:
        """Ask the planner for the next chunk when the execution strategy wants one."""
        execution = self.loop.execution
        if execution.wants_chunk(self, ob):
            prefix = execution.prefix(self, ob)
            self.pending = _Request(self.loop._submit(self.hist, self.noise, prefix), ob, self.tick, now)

    def _command(self, ob: Observation, now: float, new_obs: bool, person: np.ndarray | None = None) -> None:
        """Send the person's command, else the action due at tick + lead, through the safety filter, or hold
        (the watchdog may stop)."""
        safety = self.safety
        for s in [s for s in self.schedule if s < self.tick + self.lead]:
            del self.schedule[s]
        slot = self.tick + self.lead
        action = self.schedule.pop(slot, None)
        if person is not None:
            cmd = safety.filter(person, ob.data, now)
            self.acted.add(slot)
            self.person.add(slot)
        elif action is not None:
            cmd = safety.filter(action, ob.data, now)
            self.acted.add(slot)
        else:
            if safety.watchdog(now) == "stop":
                raise self.abort(
                    f"watchdog: no fresh action for {safety.config.stop_after_s} s (policy request in "
                    f"flight: {self.pending is not None}; safety events {safety.counts})"
                )
            self.stats["held_ticks"] += 1
            cmd = safety.hold(ob.data)
        if self.loop.teleop is not None:  # a takeover keeps the gripper as the last command left it
            self.loop.teleop.note_command(cmd)
        self.sent[slot] = np.asarray(cmd, dtype=np.float64)
        self.sent.pop(slot - self.loop.horizon - self.lead, None)
        try:
            self.robot.send_action(cmd, self.t0 + slot * self.loop.dt)
            self.commanded_ticks += 1
        except SafetyStop:
            raise  # the caller's tick ends the episode for safety
        except Exception as e:
            raise self.abort(f"robot link lost while commanding ({e})", e) from e
        if new_obs:
            self.rec.commanded.append(cmd.astype(np.float32))

    # ------------------------------------------------------------------ bookkeeping
    def slot_of(self, o: Observation) -> int:
        """The control slot an observation was captured in (its action ran in that slot)."""
        return round((o.timestamp - self.t0) / self.loop.dt)

    def round_trip(self) -> int:
        """Ticks a chunk request takes to come back (measured, smoothed; 1 before the first)."""
        return math.ceil(self.rt_ticks if self.rt_ticks is not None else 1)

    def remaining(self) -> int:
        """Scheduled actions not yet due (from the slot this tick commands on)."""
        return sum(1 for s in self.schedule if s >= self.tick + self.lead)

    def summary(self) -> dict[str, Any]:
        ob, rec, infer_ms, late_ms = self.ob, self.rec, self.infer_ms, self.late_ms
        return {
            "seed": self.seed,
            "started": ob is not None,  # False: the reset failed, nothing ran
            "success": self.success,
            "status": self.status,
            "steps": int(ob.info.get("step", self.commanded_ticks)) if ob is not None else 0,
            "ticks": self.tick,
            "lead_ticks": self.lead,
            "infer_ms_mean": float(np.mean(infer_ms)) if infer_ms else None,
            "infer_ms_p99": float(np.percentile(infer_ms, 99)) if infer_ms else None,
            "obs_age_ms_mean": float(np.mean(self.obs_age_ms)) if self.obs_age_ms else None,
            "tick_late_ms_mean": float(np.mean(late_ms)) if late_ms else None,
            "tick_late_ms_p99": float(np.percentile(late_ms, 99)) if late_ms else None,
            **self.stats,
            "safety_abort": self.safety_abort,
            "intervention_steps": sum(1 for s in self._step_slots() if s + 1 in self.person),
            "arrays": rec.arrays(),
            # per recorded step: the arm held after it (no policy action was due in the next slot)
            "held_steps": [s + 1 not in self.acted for s in self._step_slots()],
            # per recorded step: the action after it was a person's (teleop), not the policy's
            "interventions": [s + 1 in self.person for s in self._step_slots()],
        }

    def _step_slots(self) -> list[int]:
        """The control slot of each recorded step."""
        rec = self.rec
        return rec.slots[: min(len(rec.obs), len(rec.commanded))]

    def abort(self, reason: str, cause: BaseException | None = None) -> DeployError:
        """Stop the arm and return the episode's :class:`DeployError` (what was recorded attached)."""
        self.status = "error"
        with contextlib.suppress(Exception):  # the link is already gone: nothing more reaches the arm
            self.robot.stop()
        err = DeployError(
            f"episode seed={self.seed} aborted at tick {self.tick}: {reason}; the arm was stopped",
            self.summary(),
        )
        err.__cause__ = cause
        return err


# ---------------------------------------------------------------------- execution strategies
class Execution(Protocol):
    """How chunks are executed (the module docstring): when the next one is requested, on which committed
    actions it is conditioned, and in which slots its actions run."""

    def wants_chunk(self, ep: _Episode, ob: Observation) -> bool:
        """Whether to request the next chunk now (none is in flight), from ``ob``."""
        ...

    def prefix(self, ep: _Episode, ob: Observation) -> np.ndarray | None:
        """The committed actions a chunk planned from ``ob`` continues (inpainting), or None."""
        ...

    def place(self, ep: _Episode, src: Observation) -> tuple[int, int]:
        """``(n, first)``: a chunk planned from ``src`` runs its n actions from the obs on in slots first, ..."""
        ...


class SyncExecution:
    """Stop-and-think: the arm holds while the next chunk is planned from an obs taken after the last one ran."""

    def __init__(self, loop: ControlLoop) -> None:
        self.loop = loop

    def wants_chunk(self, ep: _Episode, ob: Observation) -> bool:
        # the previous chunk has executed and this obs was taken after it
        return ep.remaining() == 0 and (
            ep.last_slot < 0 or ob.timestamp >= ep.t0 + (ep.last_slot - 0.5) * self.loop.dt
        )

    def prefix(self, ep: _Episode, ob: Observation) -> np.ndarray | None:
        return None  # the arm is at rest: nothing is committed

    def place(self, ep: _Episode, src: Observation) -> tuple[int, int]:
        # the arm held still since the obs, so the plan is still current when it lands; it starts at the
        # first slot reachable
        return self.loop.max_actions, ep.tick + ep.lead


class AsyncExecution:
    """The next chunk is planned while the current one runs, stamped from its obs's capture time."""

    def __init__(self, loop: ControlLoop) -> None:
        self.loop = loop

    def wants_chunk(self, ep: _Episode, ob: Observation) -> bool:
        # auto: request when what is left just covers a request's round trip, so the next chunk lands as
        # this one runs out (each chunk then runs indices ~delay .. delay + Ta - 1)
        threshold = self.loop.cfg.async_threshold or ep.round_trip() + 1
        return ep.remaining() <= threshold

    def prefix(self, ep: _Episode, ob: Observation) -> np.ndarray | None:
        if not self.loop.inpaint:
            return None
        src_slot = ep.slot_of(ob)
        # the new chunk takes over where it lands (the first one: right after its obs, since it is placed
        # where the arm, still at rest, can first execute it)
        until = ep.tick + ep.lead + ep.round_trip() if ep.stats["chunks"] else src_slot + 1
        return self._prefix({**ep.sent, **ep.schedule}, src_slot, until, ep.safety.hold_command(ob.data))

    def _prefix(
        self, known: dict[int, np.ndarray], src_slot: int, until: int, hold: np.ndarray
    ) -> np.ndarray:
        """The committed actions of a chunk planned from the obs of ``src_slot``, up to slot ``until`` (where
        its own actions take over): chunk index i executes at slot src_slot + 2 - To + i (index To - 1 right
        after the obs); a slot with nothing sent or scheduled is a hold (the robot holds when no command is
        due). At most Tp - 1 long, so at least one action is sampled. (P, Da)."""
        loop = self.loop
        first = src_slot + 2 - loop.to
        n = max(0, min(until - first, loop.horizon - 1))
        out = [known.get(first + i, hold) for i in range(n)]
        return np.asarray(out, dtype=np.float64).reshape(n, loop.action_dim)  # (P, Da)

    def place(self, ep: _Episode, src: Observation) -> tuple[int, int]:
        loop, n = self.loop, self.loop.max_actions
        if loop.cfg.max_actions is None:
            # ticks from the chunk's observation to its first executable action: the delay to beat
            delay = ep.tick + ep.lead - ep.slot_of(src) - 1
            n = min(loop.ta + max(delay, 0), loop.max_chunk)  # Ta actions after the stale ones
        if ep.stats["chunks"] == 1:
            # an episode's first chunk: the arm held still since the obs, as in sync mode
            return n, ep.tick + ep.lead
        # action j is due one control period after the obs it was planned from, plus j periods
        return n, ep.slot_of(src) + 1


EXECUTIONS: dict[str, Callable[[ControlLoop], Execution]] = {"sync": SyncExecution, "async": AsyncExecution}


def run_episodes(
    loop: ControlLoop,
    episodes: int,
    seeds: list[int],
    writer: Any = None,
    on_episode: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run episodes, recording each into ``writer`` (a ``DatasetWriter``) as it ends, aborted ones too.

    Stops at the first fault (the arm is already stopped) and returns the summary with ``error`` set, so the
    caller can write metrics and the data before reporting it.
    """
    start = time.perf_counter()
    results: list[dict[str, Any]] = []
    error: str | None = None
    for i in range(episodes):
        try:
            ep = loop.run_episode(seeds[i])
        except DeployError as e:
            ep, error = dict(e.episode or {}), str(e)
        except Exception as e:  # anything run_episode did not turn into a DeployError: same contract
            with contextlib.suppress(Exception):
                loop.robot.stop()
            ep = {"seed": seeds[i], "started": False, "success": False, "status": "error", "steps": 0}
            error = f"episode seed={seeds[i]} failed: {type(e).__name__}: {e}; the arm was stopped"
        arrays = ep.pop("arrays", None)
        ep.pop("held_steps", None)  # per step, for a learner (real/steering.py); not a figure
        if writer is not None and arrays is not None:
            try:
                ep["demo"] = writer.add_episode(**arrays, attrs=episode_attrs(ep))
            except Exception as e:  # a full disk: stop here rather than run episodes nobody records
                error = error or f"recording episode seed={seeds[i]} failed: {type(e).__name__}: {e}"
        if ep.get("started", True):  # an episode whose reset failed is reported by ``error``, not counted
            results.append(ep)
        if on_episode is not None:
            on_episode(ep)
        if error is not None:
            break
    return episode_metrics(results, error, time.perf_counter() - start, loop.safety.counts)


def episode_attrs(ep: dict[str, Any]) -> dict[str, Any]:
    """An episode summary's scalar figures (seed, status, steps, latency...), as its recording's attributes."""
    return {k: v for k, v in ep.items() if v is not None and not isinstance(v, dict | list)}


def episode_metrics(
    results: list[dict[str, Any]], error: str | None, wall_time_s: float, safety_counts: dict[str, int]
) -> dict[str, Any]:
    """The figures of a deploy run from its per-episode summaries (none when it failed before one ran)."""
    finished = [r for r in results if r.get("status") != "error"]
    n = len(results)
    successes = sum(bool(r.get("success")) for r in results)

    def mean(key: str) -> float | None:
        vals = [r[key] for r in results if r.get(key) is not None]
        return float(np.mean(vals)) if vals else None

    return {
        "episodes": n,
        "episodes_finished": len(finished),
        "success_rate": successes / n if n else 0.0,
        "env_steps": int(sum(int(r.get("steps", 0)) for r in results)),
        "wall_time_s": wall_time_s,
        "mean_steps": mean("steps"),
        "infer_ms_mean": mean("infer_ms_mean"),
        "obs_age_ms_mean": mean("obs_age_ms_mean"),
        "stale_dropped": int(sum(r.get("stale_dropped", 0) for r in results)),
        "held_ticks": int(sum(r.get("held_ticks", 0) for r in results)),
        "rejected_chunks": int(sum(r.get("rejected_chunks", 0) for r in results)),
        "safety_events": dict(safety_counts),
        "error": error,
        "per_episode": results,
    }

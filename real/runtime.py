"""The control-loop runtime: a policy (local or remote) drives a robot through the safety filter.

Why it is shaped this way (diffusion_policy's real-robot runner, LeRobot's async inference):
- The loop ticks at the robot's rate on the wall clock. Each tick it reads the latest observation, sends
  the one command scheduled for ``tick + lead`` (``lead`` = the link's command latency, so the command
  arrives when it is due) stamped with its execution time, and otherwise the safety filter's hold command.
- Chunks are planned in a worker thread, so the loop never blocks on inference or the network. In
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
from typing import Any

import numpy as np

from robosteer.real.robot import Observation, Robot
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
    ) -> None:
        config.validate()
        self.robot, self.policy, self.safety, self.cfg = robot, policy, safety, config
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
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chunk-planner")
        safety.add_estop_hook(lambda reason: robot.stop())

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def wait_idle(self) -> None:
        """Return once no chunk is being planned (an episode that ended mid-plan leaves one running): the
        caller may then change the policy (a learner's update) without racing the planner thread."""
        self._executor.submit(lambda: None).result()

    # ------------------------------------------------------------------ planning
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

    def _prefix(
        self, known: dict[int, np.ndarray], src_slot: int, until: int, hold: np.ndarray
    ) -> np.ndarray:
        """The committed actions of a chunk planned from the obs of ``src_slot``, up to slot ``until`` (where
        its own actions take over): chunk index i executes at slot src_slot + 2 - To + i (index To - 1 right
        after the obs); a slot with nothing sent or scheduled is a hold (the robot holds when no command is
        due). At most Tp - 1 long, so at least one action is sampled. (P, Da)."""
        first = src_slot + 2 - self.to
        n = max(0, min(until - first, self.horizon - 1))
        out = [known.get(first + i, hold) for i in range(n)]
        return np.asarray(out, dtype=np.float64).reshape(n, self.action_dim)  # (P, Da)

    def _window(self, hist: deque[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        frames = list(hist)
        frames = [frames[0]] * (self.to - len(frames)) + frames  # pad at the start, as the trainer does
        return {k: np.stack([f[k] for f in frames])[None] for k in self.obs_keys}  # {key: (1, To, ...)}

    # ------------------------------------------------------------------ one episode
    def run_episode(self, seed: int | None = None) -> dict[str, Any]:
        """One episode; returns its summary (``success``, ``steps``, ``status``, latency figures) and
        ``arrays`` for the recorder. Raises :class:`DeployError` (with ``episode`` attached) on a fault."""
        cfg, robot, safety = self.cfg, self.robot, self.safety
        safety.reset()
        rec = _Recording()
        stats: dict[str, Any] = {"chunks": 0, "stale_dropped": 0, "held_ticks": 0, "rejected_chunks": 0}
        infer_ms: list[float] = []
        obs_age_ms: list[float] = []
        late_ms: list[float] = []  # how late each tick woke past its slot: the control rate's jitter
        schedule: dict[int, np.ndarray] = {}  # slot -> action; slot time = t0 + slot * dt
        sent: dict[int, np.ndarray] = {}  # slot -> command sent for it (the last Tp slots; inpainting)
        acted: set[int] = set()  # slots a policy action (not a hold) was sent for
        hist: deque[dict[str, np.ndarray]] = deque(maxlen=self.to)
        pending: tuple[Future, Observation, int, float] | None = None
        lead = max(
            0, math.ceil(((robot.command_latency_s() if cfg.lead_s is None else cfg.lead_s) - 1e-9) / self.dt)
        )
        last_slot_sent = -1  # sync: slot of the last action of the executing chunk
        rt_ticks: float | None = None  # async: smoothed ticks from a chunk request to its arrival
        success, status, last_seq = False, "timeout", -1
        noise = None
        if cfg.noise == "episode":
            # One noise sample per episode: successive chunks decode the same latent, so overlapping plans
            # agree (a fresh sample per chunk can switch between modes of a multimodal policy mid-motion).
            rng = np.random.default_rng(None if seed is None else [int(seed), 7])
            noise = rng.standard_normal((1, *self.policy.noise_shape)).astype(np.float32)  # (1, Tp, Da)
        ob: Observation | None = None
        t0 = time.time()
        max_steps = int(cfg.max_steps or 1000)
        tick = 0

        def slot_of(o: Observation) -> int:
            """The control slot an observation was captured in (its action ran in that slot)."""
            return round((o.timestamp - t0) / self.dt)

        def round_trip() -> int:
            """Ticks a chunk request takes to come back (measured, smoothed; 1 before the first)."""
            return math.ceil(rt_ticks if rt_ticks is not None else 1)

        def summary() -> dict[str, Any]:
            return {
                "seed": seed,
                "started": ob is not None,  # False: the reset failed, nothing ran
                "success": success,
                "status": status,
                "steps": int(ob.info.get("step", tick)) if ob is not None else 0,
                "ticks": tick,
                "lead_ticks": lead,
                "infer_ms_mean": float(np.mean(infer_ms)) if infer_ms else None,
                "infer_ms_p99": float(np.percentile(infer_ms, 99)) if infer_ms else None,
                "obs_age_ms_mean": float(np.mean(obs_age_ms)) if obs_age_ms else None,
                "tick_late_ms_mean": float(np.mean(late_ms)) if late_ms else None,
                "tick_late_ms_p99": float(np.percentile(late_ms, 99)) if late_ms else None,
                **stats,
                "arrays": rec.arrays(),
                # per recorded step: the arm held after it (no policy action was due in the next slot)
                "held_steps": [
                    s + 1 not in acted for s in rec.slots[: min(len(rec.obs), len(rec.commanded))]
                ],
            }

        def abort(reason: str, cause: BaseException | None = None) -> DeployError:
            nonlocal status
            status = "error"
            with contextlib.suppress(Exception):  # the link is already gone: nothing more reaches the arm
                robot.stop()
            err = DeployError(
                f"episode seed={seed} aborted at tick {tick}: {reason}; the arm was stopped", summary()
            )
            err.__cause__ = cause
            return err

        # Between episodes the policy server or the robot link can fail too: the same contract as mid-episode.
        try:
            self.policy.reset()
        except Exception as e:
            raise abort(f"policy reset failed ({type(e).__name__}: {e})", e) from e
        try:
            ob = robot.reset(seed)
        except Exception as e:
            raise abort(f"robot reset failed ({type(e).__name__}: {e})", e) from e
        t0 = time.time()

        try:
            for tick in range(max_steps):
                target = t0 + tick * self.dt
                delay = target - time.time()
                if delay > 0:
                    self.sleep(delay)
                now = time.time()
                late_ms.append(1e3 * max(now - target, 0.0))
                try:
                    ob = robot.get_observation()
                except Exception as e:
                    raise abort(f"robot link lost ({e})", e) from e
                if ob.age(now) > cfg.obs_timeout_s:
                    raise abort(
                        f"no fresh observation for {ob.age(now):.2f} s (> obs_timeout_s={cfg.obs_timeout_s})"
                    )
                new_obs = ob.seq != last_seq
                if new_obs:
                    last_seq = ob.seq
                    hist.append({k: np.asarray(ob.data[k]) for k in self.obs_keys})
                    obs_age_ms.append(1e3 * ob.age(now))
                    rec.add(ob, self.record_keys)
                    rec.slots.append(slot_of(ob))
                if ob.info.get("done"):
                    success = bool(ob.info.get("success"))
                    status = "success" if success else "truncated"
                    rec.commanded.append(safety.hold_command(ob.data))
                    break

                # -- a finished chunk joins the schedule
                if pending is not None and pending[0].done():
                    fut, src, req_tick, _ = pending
                    pending = None
                    try:
                        chunk, ms = fut.result()
                    except Exception as e:
                        if getattr(e, "code", None) == "policy_nan":
                            chunk, ms = np.full((1, robot.action_spec.shape[0]), np.nan), 0.0
                        else:
                            raise abort(f"policy failed: {type(e).__name__}: {e}", e) from e
                    infer_ms.append(ms)
                    if not np.isfinite(chunk).all():
                        stats["rejected_chunks"] += 1
                        safety._event(
                            "nan", f"chunk planned at tick {req_tick} holds NaN/Inf: discarded", now
                        )
                    else:
                        stats["chunks"] += 1
                        # ticks from the chunk's observation to its first executable action: the delay to beat
                        delay = tick + lead - slot_of(src) - 1
                        rt = tick - req_tick
                        rt_ticks = rt if rt_ticks is None else 0.7 * rt_ticks + 0.3 * rt
                        n_use = self.max_actions
                        if cfg.mode == "async" and cfg.max_actions is None:
                            n_use = min(
                                self.ta + max(delay, 0), self.max_chunk
                            )  # Ta actions after the stale ones
                        chunk = chunk[self.to - 1 : self.to - 1 + n_use]  # (n, Da) from the current obs on
                        if cfg.mode == "sync" or stats["chunks"] == 1:
                            # sync, or an episode's first chunk: the arm held still since the obs, so the
                            # plan is still current when it lands; it starts at the first slot reachable
                            first = tick + lead
                            slots = [first + j for j in range(len(chunk))]
                        else:
                            # action j is due one control period after the obs it was planned from, plus j periods
                            slots = [slot_of(src) + 1 + j for j in range(len(chunk))]
                        for s, a in zip(slots, chunk):
                            if s < tick + lead:
                                stats["stale_dropped"] += 1
                            elif s in schedule:
                                schedule[s] = (1.0 - cfg.blend) * schedule[s] + cfg.blend * a
                            else:
                                schedule[s] = a
                        last_slot_sent = max(schedule) if schedule else last_slot_sent
                elif pending is not None and now - pending[3] > cfg.policy_timeout_s:
                    raise abort(f"policy stalled: no chunk within policy_timeout_s={cfg.policy_timeout_s} s")

                # -- request the next chunk
                if pending is None:
                    remaining = sum(1 for s in schedule if s >= tick + lead)
                    if cfg.mode == "async":
                        # auto: request when what is left just covers a request's round trip, so the next
                        # chunk lands as this one runs out (each chunk then runs indices ~delay .. delay + Ta - 1)
                        threshold = cfg.async_threshold or round_trip() + 1
                        want = remaining <= threshold
                    else:  # sync: the previous chunk has executed and this obs was taken after it
                        want = remaining == 0 and (
                            last_slot_sent < 0 or ob.timestamp >= t0 + (last_slot_sent - 0.5) * self.dt
                        )
                    if want:
                        prefix = None
                        if self.inpaint:
                            src_slot = slot_of(ob)
                            # the new chunk takes over where it lands (the first one: right after its obs,
                            # since it is placed where the arm, still at rest, can first execute it)
                            until = tick + lead + round_trip() if stats["chunks"] else src_slot + 1
                            prefix = self._prefix(
                                {**sent, **schedule}, src_slot, until, safety.hold_command(ob.data)
                            )
                        pending = (
                            self._executor.submit(self._plan, self._window(hist), noise, prefix),
                            ob,
                            tick,
                            now,
                        )

                # -- command: the action due at tick + lead, or hold
                for s in [s for s in schedule if s < tick + lead]:
                    del schedule[s]
                slot = tick + lead
                action = schedule.pop(slot, None)
                if action is not None:
                    cmd = safety.filter(action, ob.data, now)
                    acted.add(slot)
                else:
                    state = safety.watchdog(now)
                    if state == "stop":
                        raise abort(
                            f"watchdog: no fresh action for {safety.config.stop_after_s} s "
                            f"(policy request in flight: {pending is not None}; safety events {safety.counts})"
                        )
                    stats["held_ticks"] += 1
                    cmd = safety.hold(ob.data)
                sent[slot] = np.asarray(cmd, dtype=np.float64)
                sent.pop(slot - self.horizon - lead, None)
                try:
                    robot.send_action(cmd, t0 + slot * self.dt)
                except Exception as e:
                    raise abort(f"robot link lost while commanding ({e})", e) from e
                if new_obs:
                    rec.commanded.append(cmd.astype(np.float32))
            else:
                status = "timeout"
                robot.stop()
        except DeployError:
            raise
        except BaseException as e:  # KeyboardInterrupt, a bug: stop the arm, keep the data
            raise abort(f"{type(e).__name__}: {e}", e) from e
        finally:
            if pending is not None:
                pending[0].cancel()
        return summary()


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

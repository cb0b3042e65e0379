"""The safety filter between any policy and any arm: on by default, every command passes through it.

Why a separate layer: a policy (local or remote, trained or steered) is a black box that can return NaN,
jump, stall or aim outside the workspace; the filter is small enough to audit and is the only code that
decides what reaches the arm. It enforces, in order: finite values (NaN/Inf -> the hold command), per-dim
command bounds (joint limits for position control), the gripper range, the per-step change limit, the
velocity limit, and the Cartesian workspace (delta control) or joint limits (position control). A
watchdog turns "no fresh action within ``hold_after_s``" into the hold command and "none within
``stop_after_s``" into a stop; an e-stop latches until ``reset()``. Every intervention is a
:class:`SafetyEvent` in ``events`` (the runtime writes them to ``safety_events.jsonl``).

No input makes the filter emit a non-finite command: a non-finite action or a non-finite position in the
observation becomes the hold command plus a ``nan`` event (the limits would otherwise propagate a NaN
position into the command), and the output is checked once more before it leaves. The one case without a
finite hold (absolute control, no finite position and no previous command) raises instead, so the runtime
stops the arm. ``enabled=False`` switches the limits off, not this check.

Two command kinds:
- ``delta``: the command moves the arm by ``command[pos_dims] * delta_scale`` metres per step
  (Meta-World's mocap deltas, Cartesian velocity control). The workspace box bounds the position the
  command leads to, read from ``obs[position_key][position_slice]``.
- ``absolute``: the command is a target (joint angles for ``servoJ``), read against the current
  ``obs[position_key][position_slice]`` for the velocity limit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

WATCHDOG_STATES = ("ok", "hold", "stop")


@dataclass
class SafetyConfig:
    """Limits, each ``None`` to switch it off. Lists are per command dimension (or per position dim)."""

    enabled: bool = True  # false turns every limit off (NaN rejection stays): needs unsafe_ack=true
    kind: str = "delta"  # "delta" | "absolute"
    command_low: list[float] | None = None  # per-dim bounds of the command (joint limits when absolute)
    command_high: list[float] | None = None  # per-dim upper bounds of the command
    gripper_index: int | None = None  # which command dim is the gripper (bounded by gripper_low/high)
    gripper_low: float = -1.0  # lowest gripper command
    gripper_high: float = 1.0  # highest gripper command
    max_delta: float | list[float] | None = None  # per-step change of the command, per dim
    max_velocity: float | None = None  # delta: |command[pos_dims]| bound; absolute: |target - current| / dt
    pos_dims: list[int] = field(default_factory=lambda: [0, 1, 2])  # command dims that move the position
    delta_scale: float = 1.0  # delta: metres moved per unit command per step
    workspace_low: list[float] | None = None  # delta: Cartesian box for the position the command leads to
    workspace_high: list[float] | None = None  # delta: the Cartesian box's upper corner
    position_key: str = "state"  # obs key holding the current position (delta) / joint angles (absolute)
    position_slice: list[int] = field(default_factory=lambda: [0, 3])  # [start, stop] of the position in it
    hold_after_s: float = 0.25  # watchdog: hold position when no fresh action arrived for this long
    stop_after_s: float = 1.0  # watchdog: stop the arm after this long
    # ours: the measured position (delta: the hand's xyz; absolute: the joints) beyond the workspace box /
    # command bounds by more than this aborts the episode (None: never; the limits alone bound the commands)
    abort_margin: float | None = None
    # ours (robosteer-steer on a robot): this many safety-aborted episodes in a row stop the run
    max_consecutive_aborts: int = 3

    def validate(self) -> None:
        """Refuse configs the filter cannot enforce (a NaN limit would let every command through)."""
        numbers: list[float] = []
        for name in ("command_low", "command_high", "workspace_low", "workspace_high", "max_delta"):
            value = getattr(self, name)
            if value is not None:
                numbers += [float(v) for v in np.atleast_1d(np.asarray(value, dtype=np.float64))]
        for name in (
            "gripper_low",
            "gripper_high",
            "max_velocity",
            "delta_scale",
            "hold_after_s",
            "stop_after_s",
        ):
            value = getattr(self, name)
            if value is not None:
                numbers.append(float(value))
        if any(math.isnan(v) for v in numbers):
            raise ValueError("safety limits must not be NaN (a NaN bound disables the check it belongs to)")
        if not (math.isfinite(self.delta_scale) and self.delta_scale > 0):
            raise ValueError(
                f"safety.delta_scale={self.delta_scale} is not valid: expected a finite value > 0"
            )
        if self.kind not in ("delta", "absolute"):
            raise ValueError(f"safety.kind={self.kind!r} is not valid: expected 'delta' or 'absolute'")
        if (self.workspace_low is None) != (self.workspace_high is None):
            raise ValueError("safety.workspace_low and safety.workspace_high must be given together")
        if (self.command_low is None) != (self.command_high is None):
            raise ValueError("safety.command_low and safety.command_high must be given together")
        if self.abort_margin is not None and not (
            math.isfinite(self.abort_margin) and self.abort_margin >= 0
        ):
            raise ValueError(
                f"safety.abort_margin={self.abort_margin} is not valid: expected a finite value >= 0"
            )
        if int(self.max_consecutive_aborts) < 1:
            raise ValueError(
                f"safety.max_consecutive_aborts={self.max_consecutive_aborts} is not valid: expected >= 1"
            )
        if not 0 < self.hold_after_s <= self.stop_after_s:
            raise ValueError(
                f"safety watchdog needs 0 < hold_after_s <= stop_after_s, got {self.hold_after_s}, {self.stop_after_s}"
            )

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> SafetyConfig:
        """Build from a config mapping; unknown keys raise naming the nearest valid key."""
        import difflib

        values = dict(values or {})
        names = set(cls.__dataclass_fields__)
        for key in values:
            if key not in names:
                near = difflib.get_close_matches(key, sorted(names), n=1)
                hint = f"; did you mean {near[0]!r}?" if near else ""
                raise ValueError(f"unknown safety key {key!r}{hint} (valid: {sorted(names)})")
        cfg = cls(**{k: list(v) if isinstance(v, tuple) else v for k, v in values.items()})
        cfg.validate()
        return cfg


@dataclass
class SafetyEvent:
    """One intervention: what happened, when, and the values involved."""

    kind: str  # nan | shape | clip | gripper | delta | velocity | workspace | hold | stop | estop | stale
    time: float
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class SafetyFilter:
    """Filters commands for one arm; ``filter()`` per command, ``watchdog()`` per control tick."""

    def __init__(self, config: SafetyConfig, action_dim: int, dt: float) -> None:
        config.validate()
        self.config = config
        self.action_dim = int(action_dim)
        self.dt = float(dt)
        self.events: list[SafetyEvent] = []
        self.counts: dict[str, int] = {}
        self._estop_hooks: list[Callable[[str], None]] = []
        self.reset()

    def reset(self) -> None:
        """New episode: forget the previous command and the watchdog clock, release an e-stop."""
        self.last_command: np.ndarray | None = None
        self.last_fresh_time: float | None = None
        self.estopped = False
        self.stopped = False

    # ------------------------------------------------------------------ events and e-stop
    def _event(self, kind: str, detail: str, now: float | None = None) -> None:
        self.events.append(SafetyEvent(kind, time.time() if now is None else now, detail))
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def add_estop_hook(self, hook: Callable[[str], None]) -> None:
        """``hook(reason)`` runs on every e-stop (the runtime registers ``robot.stop``)."""
        self._estop_hooks.append(hook)

    def estop(self, reason: str = "e-stop") -> None:
        """Latch the e-stop: stop the arm now; every later command is refused until ``reset()``."""
        self.estopped = True
        self._event("estop", reason)
        for hook in self._estop_hooks:
            hook(reason)

    # ------------------------------------------------------------------ the filter
    def _position(self, obs: Mapping[str, np.ndarray] | None) -> np.ndarray | None:
        c = self.config
        if obs is None or c.position_key not in obs:
            return None
        lo, hi = c.position_slice
        return np.asarray(obs[c.position_key], dtype=np.float64).reshape(-1)[lo:hi]

    def _finite_position(self, obs: Mapping[str, np.ndarray] | None) -> tuple[np.ndarray | None, bool]:
        """(position or None, whether it is usable): a position holding NaN/Inf is not."""
        try:
            pos = self._position(obs)
        except (TypeError, ValueError):  # not numeric: as unusable as NaN
            return None, False
        return pos, pos is None or bool(np.isfinite(pos).all())

    def hold_command(self, obs: Mapping[str, np.ndarray] | None) -> np.ndarray:
        """The command that keeps the arm where it is: zero motion (delta) or the current position
        (absolute; the previous command when the position is missing or not finite); the gripper keeps its
        last command. Always finite: raises when absolute control has no finite position and no previous
        command to hold (the caller stops the arm)."""
        c = self.config
        if c.kind == "delta":
            cmd = np.zeros(self.action_dim)
        else:
            pos, ok = self._finite_position(obs)
            if pos is None or not ok:
                if self.last_command is None:
                    raise RuntimeError(
                        "safety: no finite current position and no previous command to hold: stop the arm"
                    )
                cmd = self.last_command.copy()
            else:
                cmd = np.zeros(self.action_dim)
                cmd[: len(pos)] = pos
        if c.gripper_index is not None and self.last_command is not None:
            cmd[c.gripper_index] = self.last_command[c.gripper_index]
        return cmd

    def filter(
        self, action: Any, obs: Mapping[str, np.ndarray] | None, now: float | None = None
    ) -> np.ndarray:
        """A safe command (float64, (A,)) for ``action``; records an event for every change made."""
        now = self._clock(now)
        a = _as_vector(action)
        if self.estopped or self.stopped:
            raise RuntimeError(
                "safety: the arm is stopped (e-stop or watchdog); reset() before commanding it"
            )
        if not self.config.enabled:
            return self._unlimited(a, obs, now)
        pos, refusal = self._refusal(a, obs)
        if refusal is not None:
            self._event(*refusal, now)
            return self._hold(obs)
        assert a is not None  # _refusal refuses a missing action
        out = self._limited(a, pos, now)
        if not np.isfinite(out).all():  # the last line of defence: nothing above may have made a NaN
            self._event("nan", f"limits produced a non-finite command {out.tolist()}: held", now)
            return self._hold(obs)
        return self._fresh(out, now)

    def _clock(self, now: float | None) -> float:
        """The command's time; a missing or non-finite one is the wall clock's (a NaN clock would keep the
        watchdog from ever firing)."""
        if now is None or not math.isfinite(now):
            if now is not None:
                self._event("nan", f"non-finite time {now}: the wall clock is used", time.time())
            now = time.time()
        return now

    def _fresh(self, command: np.ndarray, now: float) -> np.ndarray:
        """``command`` accepted as the policy's: it is the previous command, and it feeds the watchdog."""
        self.last_command = command
        self.last_fresh_time = now
        return command

    def _unlimited(
        self, a: np.ndarray | None, obs: Mapping[str, np.ndarray] | None, now: float
    ) -> np.ndarray:
        """``enabled=False``: no limits, but a wrong shape still raises and a NaN still holds; the watchdog
        still runs."""
        if a is None or a.shape != (self.action_dim,):
            raise ValueError(
                f"action has shape {None if a is None else a.shape}, expected ({self.action_dim},)"
            )
        if not np.isfinite(a).all():
            self._event("nan", f"non-finite action {a.tolist()}: held (filter disabled)", now)
            return self._hold(obs)
        return self._fresh(a, now)

    def _refusal(
        self, a: np.ndarray | None, obs: Mapping[str, np.ndarray] | None
    ) -> tuple[np.ndarray | None, tuple[str, str] | None]:
        """(the current position, the event that turns this action into a hold, or None): a wrong shape, a
        non-finite action, a non-finite position (the limits would carry its NaN into the command)."""
        c = self.config
        if a is None or a.shape != (self.action_dim,):
            shape = None if a is None else a.shape
            return None, ("shape", f"action shape {shape} != ({self.action_dim},): held")
        if not np.isfinite(a).all():
            return None, ("nan", f"non-finite action {a.tolist()}: held")
        pos, pos_ok = self._finite_position(obs)
        if not pos_ok:
            return pos, ("nan", f"non-finite position in obs[{c.position_key!r}]: held")
        return pos, None

    def _limited(self, a: np.ndarray, pos: np.ndarray | None, now: float) -> np.ndarray:
        """``a`` through the limits, in the module docstring's order."""
        c = self.config
        out = a.copy()
        if c.command_low is not None and c.command_high is not None:
            out = self._clip(out, np.asarray(c.command_low), np.asarray(c.command_high), "clip", now)
        if c.gripper_index is not None:
            g = out[c.gripper_index]
            out[c.gripper_index] = min(max(g, c.gripper_low), c.gripper_high)
            if out[c.gripper_index] != g:
                self._event("gripper", f"gripper {g:.4g} -> {out[c.gripper_index]:.4g}", now)
        if c.max_delta is not None and self.last_command is not None:
            md = np.broadcast_to(np.asarray(c.max_delta, dtype=np.float64), out.shape)
            out = self._clip(out, self.last_command - md, self.last_command + md, "delta", now)
        if c.max_velocity is not None:
            out = self._velocity_limited(out, pos, now)
        if (
            c.kind == "delta"
            and c.workspace_low is not None
            and c.workspace_high is not None
            and pos is not None
        ):
            out = self._inside_workspace(out, pos, now)
        return out

    def _velocity_limited(self, out: np.ndarray, pos: np.ndarray | None, now: float) -> np.ndarray:
        """Delta: the position dims' norm scaled down to ``max_velocity``; absolute: the target within
        ``max_velocity * dt`` of the current position."""
        c = self.config
        assert c.max_velocity is not None
        if c.kind == "delta":
            dims = np.asarray(c.pos_dims, dtype=int)
            v = np.linalg.norm(out[dims])
            if v > c.max_velocity:
                out[dims] *= c.max_velocity / v
                self._event("velocity", f"|delta| {v:.4g} > {c.max_velocity}: scaled", now)
        elif pos is not None:
            step = c.max_velocity * self.dt
            n = min(len(pos), self.action_dim)
            lo, hi = pos[:n] - step, pos[:n] + step
            out[:n] = self._clip(out[:n], lo, hi, "velocity", now)
        return out

    def _inside_workspace(self, out: np.ndarray, pos: np.ndarray, now: float) -> np.ndarray:
        """Delta: the command range that keeps (pos + command * scale) inside the box; outside it, only
        inward motion."""
        c = self.config
        dims = np.asarray(c.pos_dims, dtype=int)
        wlo, whi = np.asarray(c.workspace_low), np.asarray(c.workspace_high)
        lo = np.minimum((wlo - pos) / c.delta_scale, 0.0)
        hi = np.maximum((whi - pos) / c.delta_scale, 0.0)
        lo = np.where(pos < wlo, 0.0, lo)
        hi = np.where(pos > whi, 0.0, hi)
        out[dims] = self._clip(out[dims], lo, hi, "workspace", now)
        return out

    def _clip(self, x: np.ndarray, lo: np.ndarray, hi: np.ndarray, kind: str, now: float) -> np.ndarray:
        y = np.clip(x, lo, hi)
        if not np.array_equal(x, y):
            self._event(kind, f"{np.round(x, 4).tolist()} -> {np.round(y, 4).tolist()}", now)
        return y

    def _hold(self, obs: Mapping[str, np.ndarray] | None) -> np.ndarray:
        cmd = self.hold_command(obs)
        if not np.isfinite(cmd).all():  # hold_command builds from finite values only; never send otherwise
            raise RuntimeError(f"safety: hold command {cmd.tolist()} is not finite: stop the arm")
        self.last_command = cmd
        return cmd

    # ------------------------------------------------------------------ watchdog
    def violation(self, obs: Mapping[str, np.ndarray] | None) -> str | None:
        """Why the episode must be aborted now, or None: the measured position past the workspace box
        (delta) / command bounds (absolute) by more than ``abort_margin``. (An e-stop stops the run.)"""
        c = self.config
        pos, finite = self._finite_position(obs)
        if c.abort_margin is None or not c.enabled or pos is None or not finite:
            return None
        if c.kind == "delta" and c.workspace_low is not None:
            lo, hi = np.asarray(c.workspace_low), np.asarray(c.workspace_high)
        elif c.kind == "absolute" and c.command_low is not None:
            n = len(pos)
            lo, hi = np.asarray(c.command_low)[:n], np.asarray(c.command_high)[:n]
        else:
            return None
        past = np.maximum(lo - c.abort_margin - pos, pos - hi - c.abort_margin)  # > 0: outside
        if np.any(past > 0):
            where = "workspace" if c.kind == "delta" else "joint limits"
            return (
                f"measured position {np.round(pos, 4).tolist()} is outside the {where} by "
                f"{float(np.max(past)) + c.abort_margin:.4g} (> safety.abort_margin={c.abort_margin})"
            )
        return None

    def watchdog(self, now: float | None = None) -> str:
        """``ok`` / ``hold`` / ``stop`` given the time since the last fresh (policy) command."""
        now = time.time() if now is None else now
        if self.estopped or self.stopped:
            return "stop"
        if self.last_fresh_time is None:
            self.last_fresh_time = now  # the clock starts at the first tick of the episode
            return "ok"
        idle = now - self.last_fresh_time
        if idle >= self.config.stop_after_s:
            self.stopped = True
            self._event(
                "stop", f"no fresh action for {idle:.3f} s (>= {self.config.stop_after_s} s): stopped", now
            )
            return "stop"
        if idle >= self.config.hold_after_s:
            self._event(
                "hold", f"no fresh action for {idle:.3f} s (>= {self.config.hold_after_s} s): holding", now
            )
            return "hold"
        return "ok"

    def hold(self, obs: Mapping[str, np.ndarray] | None) -> np.ndarray:
        """The hold command (the watchdog's, or the runtime's when nothing is scheduled)."""
        if not self._finite_position(obs)[1]:
            self._event("nan", f"non-finite position in obs[{self.config.position_key!r}] while holding")
        return self._hold(obs)


def _as_vector(action: Any) -> np.ndarray | None:
    """``action`` as a float64 vector, or None when it is missing or not numeric (ragged, strings)."""
    if action is None:
        return None
    try:
        return np.asarray(action, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        return None

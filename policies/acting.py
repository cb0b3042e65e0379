"""Per-step acting over any chunk planner: the one action queue every policy acts through.

A chunk policy predicts Tp actions from a To-step observation window and executes Ta of them before it
plans again (diffusion_policy's ``MultiStepWrapper``, LeRobot's ``select_action`` queue). That bookkeeping
is the same whoever plans the chunk (a trained policy's sampler, DSRL, EXPO, V-GPS: each a
:class:`ChunkPlanner`), so it lives here once. Rows are independent: each keeps its own history and queue,
and only the rows whose queue ran out are re-planned, so vectorised evaluation and serving share one object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import torch


class ChunkPlanner(Protocol):
    """Whatever plans action chunks: ``plan`` and (optionally stateful) ``reset_rows``."""

    def plan(self, obs: dict[str, torch.Tensor], rows: torch.Tensor | None) -> torch.Tensor:
        """Raw action chunks (n, Tp, Da) for obs windows {key: (n, To, ...)} of ``rows`` (None = all rows)."""
        ...

    def reset_rows(self, rows: torch.Tensor | None) -> None:
        """Forget per-episode planning state of ``rows`` (None = all; e.g. SDP's stream buffer)."""
        ...


class ActionQueue:
    """``act(obs)`` one step at a time: keep each row's To-step history, execute Ta actions of each planned
    chunk (from index To-1, the current step's row), re-plan the rows whose queue is empty.

    ``device``: where observations are put, and so history and queue (None: where each observation is).
    """

    def __init__(
        self,
        planner: ChunkPlanner,
        n_obs_steps: int,
        n_action_steps: int,
        device: torch.device | str | None = None,
    ) -> None:
        if n_obs_steps < 1 or n_action_steps < 1:
            raise ValueError(f"n_obs_steps={n_obs_steps} and n_action_steps={n_action_steps} must be >= 1")
        self.planner = planner
        self.n_obs_steps = int(n_obs_steps)
        self.n_action_steps = int(n_action_steps)
        self.device = None if device is None else torch.device(device)
        self.clear()

    def clear(self) -> None:
        """Drop every row's history and queue (the next ``act`` starts afresh, whatever its batch size)."""
        self.batch = 0
        self.hist: dict[str, torch.Tensor] | None = None  # {key: (B, To, ...)}
        self.queue: torch.Tensor | None = None  # (B, Ta, Da) raw units
        self.qpos: torch.Tensor | None = None  # (B,) next index into the queue; Ta = empty
        self.restart: torch.Tensor | None = None  # (B,) rows whose history restarts at the next obs

    def fork(self, planner: ChunkPlanner) -> ActionQueue:
        """An empty queue with this one's To, Ta and device over ``planner`` (the server's per-connection
        state: the planner is a shallow copy of the policy, or the same one when it keeps no state)."""
        return ActionQueue(planner, self.n_obs_steps, self.n_action_steps, self.device)

    def reset(self, env_ids: Sequence[int] | np.ndarray | torch.Tensor | None = None) -> None:
        """Clear per-episode state for all rows, or only for ``env_ids`` (their queue and history restart)."""
        if env_ids is None or self.hist is None:
            self.clear()
            self.planner.reset_rows(None)
            return
        assert self.qpos is not None and self.restart is not None
        ids = torch.as_tensor(env_ids, dtype=torch.long, device=self.qpos.device).reshape(-1)
        if ids.numel() == 0:
            return
        self.qpos[ids] = self.n_action_steps
        self.restart[ids] = True
        self.planner.reset_rows(ids)

    def act(self, obs: Mapping[str, Any]) -> torch.Tensor | np.ndarray:
        """Next action (B, Da) for the current single-step obs {key: (B, ...)}; numpy in -> numpy out."""
        to_numpy = any(isinstance(v, np.ndarray) for v in obs.values())
        cur = {k: torch.as_tensor(v, device=self.device) for k, v in obs.items()}
        first = next(iter(cur.values()))
        b, dev = first.shape[0], first.device
        to, ta = self.n_obs_steps, self.n_action_steps
        with torch.no_grad():
            if self.hist is None or b != self.batch:
                self.planner.reset_rows(None)  # a batch-size change re-initialises everything
                self.batch = b
                self.hist = {k: v.unsqueeze(1).repeat_interleave(to, dim=1) for k, v in cur.items()}
                self.queue = None
                self.qpos = torch.full((b,), ta, dtype=torch.long, device=dev)
                self.restart = torch.zeros(b, dtype=torch.bool, device=dev)
            else:
                assert self.restart is not None
                restart = bool(self.restart.any())
                for k, v in cur.items():
                    h = torch.cat([self.hist[k][:, 1:], v.unsqueeze(1)], dim=1)  # (B, To, ...)
                    if restart:
                        h[self.restart] = v[self.restart].unsqueeze(1).repeat_interleave(to, dim=1)
                    self.hist[k] = h
                if restart:
                    self.restart.zero_()
            assert self.qpos is not None
            empty = self.qpos >= ta  # (B,)
            n_empty = int(empty.sum())
            if n_empty:
                rows = None if n_empty == b else empty.nonzero().squeeze(1)
                window = self.hist if rows is None else {k: v[rows] for k, v in self.hist.items()}
                plan = torch.as_tensor(self.planner.plan(window, rows))  # (n, Tp, Da)
                start = self._first_row(plan)
                chunk = plan[:, start : start + ta]  # (n, Ta, Da)
                if self.queue is None:
                    self.queue = torch.zeros(b, ta, plan.shape[-1], device=dev)  # float32, beside the history
                if rows is None:
                    self.queue.copy_(chunk)
                    self.qpos.zero_()
                else:
                    self.queue[empty] = chunk.to(device=dev, dtype=self.queue.dtype)
                    self.qpos[empty] = 0
            assert self.queue is not None
            if b == 1:
                action = self.queue.select(1, int(self.qpos[0])).clone()  # (1, Da), not a view
            else:
                action = self.queue[torch.arange(b, device=dev), self.qpos]  # (B, Da)
            self.qpos += 1
        return action.cpu().numpy() if to_numpy else action

    def _first_row(self, plan: torch.Tensor) -> int:
        """Index To-1 of the chunk's current step, after checking that all Ta executed rows exist."""
        start, tp = self.n_obs_steps - 1, int(plan.shape[1]) if plan.dim() == 3 else 0
        if start + self.n_action_steps > tp:
            raise ValueError(
                f"{type(self.planner).__name__} planned chunks of shape {tuple(plan.shape)}: executing "
                f"n_action_steps={self.n_action_steps} after n_obs_steps-1={start} needs (n, >= "
                f"{start + self.n_action_steps}, Da); expected n_action_steps <= {max(tp - start, 0)}"
            )
        return start


class ChunkPolicy:
    """A policy made of a chunk planner and the action queue: what DSRL, EXPO and the server act through.

    ``base`` (the frozen generative policy) lends its To, Ta, device, ``shape_meta`` and ``task``;
    ``n_action_steps`` overrides Ta (EXPO's single-step mode re-plans every step). ``sample(obs)`` is the
    planner's chunk for full obs windows, so a steered policy serves chunks like any policy.
    """

    def __init__(self, planner: Any, base: Any, n_action_steps: int | None = None) -> None:
        self.planner, self.base = planner, base
        ta = base.config.n_action_steps if n_action_steps is None else n_action_steps
        self.acting = ActionQueue(planner, base.config.n_obs_steps, ta, device=base.device)
        self.n_obs_steps, self.n_action_steps = self.acting.n_obs_steps, self.acting.n_action_steps
        self.shape_meta = base.shape_meta
        self.task = getattr(base, "task", None)

    def sample(self, obs: Mapping[str, Any]) -> torch.Tensor:
        """The planner's raw chunks (B, Tp, Da) for obs windows {key: (B, To, ...)}."""
        with torch.no_grad():
            window = {k: torch.as_tensor(v, device=self.base.device) for k, v in obs.items()}
            return self.planner.plan(window, None)

    def act(self, obs: Mapping[str, Any]) -> torch.Tensor | np.ndarray:
        return self.acting.act(obs)

    def reset(self, env_ids: Sequence[int] | np.ndarray | torch.Tensor | None = None) -> None:
        self.acting.reset(env_ids)

    def eval(self) -> ChunkPolicy:
        """Inference mode for every module the planner holds (the base is frozen anyway)."""
        self.base.eval()
        self.planner.eval()
        return self

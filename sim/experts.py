"""Meta-World's scripted experts, batched: the demonstrators behind every collected dataset.

They read only ``obs["state"]`` (Meta-World's 39-d vector) and are stateless, so one instance serves a
whole batch and ``reset`` has nothing to clear (it exists to satisfy the policy protocol).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np

from robosteer.sim.tasks import expert_policy_class, get_task

# Meta-World's move() warns on every policy whose gain saturates the action; the actions are clipped anyway.
warnings.filterwarnings("ignore", message=r"Constant\(s\) may be too high", category=UserWarning)


class ScriptedExpert:
    """Scripted expert of ``task``: ``act(obs) -> (B, 4)`` float32 actions in ``[-1, 1]``."""

    def __init__(self, task: str) -> None:
        self.task = get_task(task).name
        self._policy = expert_policy_class(self.task)()

    def reset(self, env_ids: Sequence[int] | None = None) -> None:
        """No per-episode state to clear: the experts are functions of the current observation."""

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        """Actions for a batch of observations; ``obs["state"]`` is (B, 39) (or a single (39,) state)."""
        if "state" not in obs:
            raise KeyError(
                f"ScriptedExpert needs obs['state'] (B, 39); got keys {sorted(obs)}: use obs='state', 'state+image' or 'state+pixels'"
            )
        states = np.asarray(obs["state"], dtype=np.float64)
        single = states.ndim == 1
        states = np.atleast_2d(states)  # (B, 39)
        actions = np.stack([self._policy.get_action(s) for s in states])  # (B, 4)
        actions = np.clip(actions, -1.0, 1.0).astype(np.float32)
        return actions[0] if single else actions

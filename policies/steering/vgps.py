"""V-GPS: value-guided policy steering at deployment (Nakamoto et al.).

At every re-plan, draw K action chunks from a frozen generalist, score each with a frozen offline critic
(the *target* network, min over heads), and execute one chosen by softmax(Q/β) (β > 0) or argmax (β = 0).
Neither the policy nor the critic is ever updated: both are only called under ``torch.no_grad()``.

The policy is a black box with ``sample(obs, noise=None) -> (B, Tp, Da)`` (and ``reset()`` if present), so a
local ``GenerativePolicy`` and a remote policy-server client wrap alike; the K candidates are one ``sample``
call on the batch repeated K times. The wrapper acts through its own ``ActionQueue`` (a client's ``act``
would execute the client's own chunk).

What is scored (``score=``): ``first`` — the first executed action (the reference: a per-step critic), or
``chunk`` — all Ta executed actions (a chunk critic). The critic's ``action_steps`` must match. The critic
sees actions in its *own* normalisation (``NormalizedCritic``), never the policy's. SDP note: candidates
come from ``sample`` (independent full denoising), not from SDP's streaming buffer, which holds one chunk.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import torch

from robosteer.policies.acting import ActionQueue

SCORES = ("first", "chunk")


class ChunkSampler(Protocol):
    """All V-GPS needs of a policy (local or remote)."""

    def sample(self, obs: Mapping[str, Any], noise: Any = None) -> Any: ...


def select(q: torch.Tensor, temperature: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """Index (B,) of the chosen candidate from scores (B, K): argmax for β = 0, else a draw from softmax(Q/β)."""
    if temperature < 0:
        raise ValueError(f"temperature={temperature} must be >= 0 (0 = argmax)")
    if temperature == 0:
        return q.argmax(dim=1)
    probs = torch.softmax(q.double() / temperature, dim=1)  # (B, K)
    return torch.multinomial(probs.float().cpu(), 1, generator=generator).squeeze(1).to(q.device)


def _attr(policy: Any, name: str) -> Any:
    value = getattr(getattr(policy, "config", None), name, None)
    return value if value is not None else getattr(policy, name, None)


class VGPSPolicy:
    """``sample``/``act``/``reset`` of ``policy`` steered by ``critic`` (see the module docstring).

    Args:
        policy: anything with ``sample(obs, noise=None) -> (B, Tp, Da)``.
        critic: a frozen ``NormalizedCritic`` (``score(obs, action, task_id) -> (B,)``) or any callable
            ``critic(obs, action, task_id) -> (B,)`` (tests plant one).
        samples: K candidates per re-plan; K = 1 returns the policy's chunk untouched (the critic is not called).
        temperature: β; 0 = argmax. score: ``first`` or ``chunk`` (see above).
        n_obs_steps / n_action_steps: To / Ta; default: the policy's ``config`` (a client must pass them).
            A smaller Ta re-plans sooner (the reference re-selects every step, through Octo's ensembler).
        task_id: the task index of a multi-task critic, or None. seed: seeds the selection draws.
    """

    def __init__(
        self,
        policy: ChunkSampler,
        critic: Any,
        samples: int = 16,  # ours (V-GPS's K): K base samples per re-plan on a CPU; reference eval_vgps.sh 50
        temperature: float = 0.0,  # ours (V-GPS's β): argmax, as every run measured here; reference 1.0
        score: str = "first",
        n_obs_steps: int | None = None,
        n_action_steps: int | None = None,
        task_id: int | None = None,
        seed: int = 0,
    ) -> None:
        if samples < 1:
            raise ValueError(f"samples={samples} must be >= 1 (K = 1 is the base policy)")
        if temperature < 0:
            raise ValueError(f"temperature={temperature} must be >= 0 (0 = argmax)")
        if score not in SCORES:
            raise ValueError(f"score={score!r} is not known: expected one of {SCORES}")
        self.policy, self.critic = policy, critic
        self.samples, self.temperature, self.score = int(samples), float(temperature), score
        own_to, own_ta = _attr(policy, "n_obs_steps"), _attr(policy, "n_action_steps")
        to = own_to if n_obs_steps is None else n_obs_steps
        ta = own_ta if n_action_steps is None else n_action_steps
        name = type(policy).__name__
        if to is None or ta is None:
            raise ValueError(
                f"{name} exposes no config.n_obs_steps / n_action_steps: pass n_obs_steps= and "
                "n_action_steps= (a remote client reports them in its metadata)"
            )
        if own_to is not None and int(to) != int(own_to):
            raise ValueError(
                f"n_obs_steps={to} differs from {name}'s own n_obs_steps={own_to} (its observation window is "
                "fixed by training): leave n_obs_steps unset"
            )
        if not 1 <= int(ta) <= int(own_ta if own_ta is not None else ta):
            bound = f"1..{own_ta} (at most {name}'s own n_action_steps)" if own_ta is not None else ">= 1"
            raise ValueError(f"n_action_steps={ta} is not valid: expected {bound}")
        self.n_obs_steps, self.n_action_steps = int(to), int(ta)
        steps = getattr(critic, "action_steps", None)
        want = 1 if score == "first" else self.n_action_steps
        if steps is not None and int(steps) != want:
            raise ValueError(
                f"score={score!r} needs a critic over {want} action(s), this critic scores {steps}: "
                f"use score={'chunk' if int(steps) > 1 else 'first'} or train the critic with that span"
            )
        self.task_id = task_id
        self.generator = torch.Generator().manual_seed(seed)
        self.shape_meta = getattr(policy, "shape_meta", None)
        self.task = getattr(policy, "task", None)
        self.timing = {"plans": 0, "sample_s": 0.0, "score_s": 0.0}
        self.acting = ActionQueue(self, self.n_obs_steps, self.n_action_steps)

    # ------------------------------------------------------------------------------------------ planning
    def _score(self, obs: Mapping[str, torch.Tensor], executed: torch.Tensor) -> torch.Tensor:
        """Critic scores of executed actions (N, Ta, Da) → (N,), only the span the critic was trained on."""
        action = executed[:, :1] if self.score == "first" else executed
        fn = getattr(self.critic, "score", self.critic)
        task_id = self.task_id if self.task_id is not None else obs.get("task_id")
        with torch.no_grad():
            return torch.as_tensor(fn(obs, action, task_id)).float().reshape(-1)

    def sample(self, obs: Mapping[str, Any], noise: Any = None) -> torch.Tensor:
        """Steered chunk (B, Tp, Da): the chosen one of K base chunks per row.

        ``noise``: None, (B, Tp, Da) when K = 1, or (B, K, Tp, Da) (candidate k of row b from noise[b, k]).
        """
        k = self.samples
        if k == 1:
            t0 = time.perf_counter()
            out = torch.as_tensor(self.policy.sample(obs, noise=noise))
            self.timing["sample_s"] += time.perf_counter() - t0
            self.timing["plans"] += 1
            return out
        b = int(np.shape(next(iter(obs.values())))[0])
        # every key (histories, task ids) repeated K times, candidate-major within a row: (B·K, ...)
        rep = {key: torch.as_tensor(v).repeat_interleave(k, dim=0) for key, v in obs.items()}
        flat_noise = None
        if noise is not None:
            n = torch.as_tensor(noise)
            if n.dim() < 2 or tuple(n.shape[:2]) != (b, k):
                raise ValueError(
                    f"noise has shape {tuple(n.shape)}: with samples={k} expected (B, K, Tp, Da)"
                )
            flat_noise = n.reshape(b * k, *n.shape[2:])
        t0 = time.perf_counter()
        with torch.no_grad():
            chunks = torch.as_tensor(self.policy.sample(rep, noise=flat_noise))  # (B·K, Tp, Da)
        t1 = time.perf_counter()
        start = self._check_rows(chunks)
        q = self._score(rep, chunks[:, start : start + self.n_action_steps]).reshape(b, k)  # (B, K)
        idx = select(q, self.temperature, self.generator)  # (B,)
        self.timing["sample_s"] += t1 - t0
        self.timing["score_s"] += time.perf_counter() - t1
        self.timing["plans"] += 1
        self.last_q = q
        return chunks.reshape(b, k, *chunks.shape[1:])[torch.arange(b), idx.to(chunks.device)]

    def _check_rows(self, chunks: torch.Tensor) -> int:
        """First executed row (To-1) of chunks (N, Tp, Da), after checking that all Ta executed rows exist."""
        start, tp = self.n_obs_steps - 1, int(chunks.shape[1])
        if start + self.n_action_steps > tp:
            raise ValueError(
                f"{type(self.policy).__name__} returned chunks of {tp} rows: executing n_action_steps="
                f"{self.n_action_steps} after n_obs_steps-1={start} needs {start + self.n_action_steps}; "
                f"expected n_action_steps <= {max(tp - start, 0)}"
            )
        return start

    # ------------------------------------------------------------------------------------------ acting
    def plan(self, obs: dict[str, torch.Tensor], rows: torch.Tensor | None) -> torch.Tensor:
        """The action queue's planner: the steered chunk (n, Tp, Da) for the rows whose queue ran out."""
        return self.sample(obs)

    def reset_rows(self, rows: torch.Tensor | None) -> None:
        """No per-row planning state: each re-plan scores fresh candidates."""

    def reset(self, env_ids: Sequence[int] | np.ndarray | None = None) -> None:
        """Clear all rows' (or ``env_ids``') history and queue; a full reset resets the policy too."""
        reset = getattr(self.policy, "reset", None)
        if (env_ids is None or self.acting.hist is None) and reset is not None:
            reset()
        self.acting.reset(env_ids)

    def act(self, obs: Mapping[str, Any]) -> np.ndarray | torch.Tensor:
        """Next action (B, Da) for the current single-step obs {key: (B, ...)}; numpy in → numpy out."""
        return self.acting.act(obs)

    def eval(self) -> VGPSPolicy:
        """Inference mode for local modules (no-op for remote clients)."""
        for part in (self.policy, self.critic):
            if hasattr(part, "eval"):
                part.eval()
        return self

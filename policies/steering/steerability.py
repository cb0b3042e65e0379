"""Can DSRL steer this base? How far its executed chunk moves with the latent, measured before training.

DSRL only chooses among the chunks the frozen base produces for different noise; a policy trained on clean
scripted demos barely depends on its noise, and DSRL silently changes nothing. This check decodes N(0, I)
latents at a sample of states and compares two spreads of the executed chunk (std per entry, averaged):

- ``over_noise``: at a fixed state, across latents (what the actor can choose among);
- ``over_states``: across states, of the chunk averaged over latents (how much the task asks it to move).

``ratio = over_noise / over_states`` is the verdict's figure; thresholds in :data:`THRESHOLDS`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch

# ratio below "weak": not steerable; below "steerable": weakly steerable. Calibration (push-v3, Diffusion
# Policy, 3,000 steps, 64 dataset states x 16 latents): measured figures in the README's DSRL section.
THRESHOLDS = {"weak": 0.25, "steerable": 0.5}

ADVICE = (
    "its executed chunk hardly depends on the latent, so DSRL has nothing to choose among: retrain the base "
    "on the same demos with robosteer-train action_noise_std=auto (the smallest augmentation this check calls "
    "steerable), or on demos collected with action noise (robosteer-collect action_noise_std=0.3, failures "
    "kept), or steer another base"
)
# The advice when the base's own training command is known (its checkpoint's record): that command, fixed.
RETRAIN = (
    "its executed chunk hardly depends on the latent, so DSRL has nothing to choose among: retrain it with "
    "the augmentation this check chooses: {command}"
)


@dataclass(frozen=True)
class Steerability:
    over_noise: float  # mean over states of the executed chunk's std across latents
    over_states: float  # std across states of the latent-averaged executed chunk
    ratio: float  # over_noise / over_states
    verdict: str  # "steerable" | "weakly steerable" | "not steerable"
    states: int
    latents: int
    direction_success: tuple[float, ...] = ()  # success of the base held at each of a few fixed latents

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "direction_success": list(self.direction_success)}

    def line(self, advice: str = ADVICE) -> str:
        """One line for the console and the run's log (``advice`` follows a verdict short of steerable)."""
        text = (
            f"steerability: executed-chunk std over latents {self.over_noise:.3f} vs over states "
            f"{self.over_states:.3f} (ratio {self.ratio:.2f}, {self.states} states x {self.latents} latents)"
        )
        if self.direction_success:
            rates = ", ".join(f"{x:.2f}" for x in self.direction_success)
            text += f", success at {len(self.direction_success)} fixed latents: {rates}"
        text += f": {self.verdict}"
        return text if self.verdict == "steerable" else f"{text}: {advice}"


def executed_rows(base: Any) -> slice:
    """The rows of the base's (Tp, Da) chunk the env executes: Ta of them from the last observed step
    (diffusion_policy's convention; DSRL's ``exec_slice``)."""
    to, ta = int(base.config.n_obs_steps), int(base.config.n_action_steps)
    return slice(to - 1, to - 1 + ta)


class BaseDecoder:
    """What :func:`measure` reads of DSRL (``latent_dim``, ``decode``, ``device``) over a bare base: robosteer-train
    checks the base it is training without building DSRL's networks or any environment."""

    def __init__(self, base: Any) -> None:
        self.base, self.exec_slice = base, executed_rows(base)
        self.noise_shape = tuple(base.noise_shape)  # (Tp, Da)
        self.latent_dim = math.prod(self.noise_shape)
        weight = next(base.parameters(), None) if isinstance(base, torch.nn.Module) else None
        self.device = weight.device if weight is not None else torch.device("cpu")

    @torch.no_grad()
    def decode(self, obs: dict[str, torch.Tensor], latent: torch.Tensor) -> torch.Tensor:
        """Executed chunk (B, Ta, Da) for latent (B, latent_dim), as :meth:`DSRL.decode` gives it."""
        noise = latent.reshape(latent.shape[0], *self.noise_shape)
        return torch.as_tensor(self.base.sample(obs, noise=noise))[:, self.exec_slice]


class FixedLatentPlanner:
    """The base decoded at one fixed latent at every state: what an actor that always picked it would do."""

    def __init__(self, agent: Any, latent: torch.Tensor) -> None:
        self.agent, self.latent = agent, latent  # latent: (latent_dim,)

    def plan(self, obs: dict[str, torch.Tensor], rows: torch.Tensor | None) -> torch.Tensor:
        noise = self.agent.to_noise(self.latent.expand(next(iter(obs.values())).shape[0], -1))
        return self.agent.base.sample(self.agent.embed(obs), noise=noise)  # (n, Tp, Da)

    def reset_rows(self, rows: torch.Tensor | None) -> None:
        """Stateless: every chunk depends on the current obs window only."""

    def eval(self) -> FixedLatentPlanner:
        return self


def fixed_latent_policies(agent: Any, count: int, generator: torch.Generator | None = None) -> list[Any]:
    """``count`` policies, each the base held at one N(0, I) latent (the success spread among them is the
    check's outcome-level figure: a base the latent cannot move scores the same at every one)."""
    from robosteer.policies.acting import ChunkPolicy

    latents = torch.randn(count, agent.latent_dim, generator=generator, device=agent.device)
    return [ChunkPolicy(FixedLatentPlanner(agent, w), agent.frozen_base).eval() for w in latents]


def verdict(ratio: float) -> str:
    if ratio >= THRESHOLDS["steerable"]:
        return "steerable"
    return "weakly steerable" if ratio >= THRESHOLDS["weak"] else "not steerable"


@torch.no_grad()
def measure(
    agent: Any, obs: dict[str, torch.Tensor], latents: int = 16, generator: torch.Generator | None = None
) -> Steerability:
    """Decode ``latents`` N(0, I) latents at every state of ``obs`` ({key: (S, To, D)}) through ``agent``
    (a :class:`~policies.steering.dsrl.DSRL`: its latent layout and executed rows) and compare the spreads."""
    S = next(iter(obs.values())).shape[0]
    if S < 2 or latents < 2:
        raise ValueError(f"steerability needs at least 2 states and 2 latents, got {S} and {latents}")
    device = agent.device
    tiled = {k: v.to(device).repeat_interleave(latents, dim=0) for k, v in obs.items()}  # (S·K, To, D)
    w = torch.randn(S * latents, agent.latent_dim, generator=generator, device=device)  # (S·K, latent_dim)
    chunks = agent.decode(tiled, w).reshape(S, latents, -1).double()  # (S, K, Ta·Da)
    over_noise = float(chunks.std(dim=1).mean())
    over_states = float(chunks.mean(dim=1).std(dim=0).mean())
    ratio = over_noise / max(over_states, 1e-12)
    return Steerability(over_noise, over_states, ratio, verdict(ratio), S, latents)


def sample_states(
    offline: dict[str, torch.Tensor] | None,
    env: Any,
    keys: tuple[str, ...],
    count: int,
    seed: int,
) -> dict[str, torch.Tensor]:
    """``count`` observation histories {key: (count, To, D)}: drawn from the offline transitions when there
    are any (the states the task visits), else the initial states of ``env`` reset with seeds from ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    if offline is not None:
        n = len(offline["reward"])
        idx = torch.randperm(n, generator=gen)[: min(count, n)]
        return {k: offline[f"obs/{k}"][idx].float().cpu() for k in keys}
    parts: dict[str, list[torch.Tensor]] = {k: [] for k in keys}
    for i in range(-(-count // env.num_envs)):  # ⌈count / num_envs⌉ resets
        obs = env.reset(seed=seed + 7919 * i)
        for k in keys:
            parts[k].append(torch.as_tensor(obs[k], dtype=torch.float32))
    return {k: torch.cat(v)[:count] for k, v in parts.items()}

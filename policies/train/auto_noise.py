"""``action_noise_std=auto``: the smallest demo-action augmentation whose base DSRL can steer, measured.

Clean demos give a base whose chunk hardly moves with its noise, which leaves DSRL nothing to choose among;
N(0, σ²) on the demonstrated actions spreads it, and more σ than needed costs imitation. The σ a task needs
is not one constant (0.3 made push-v3's base steerable; another task's stayed weakly steerable at it, issue
61), so the steerability check robosteer-steer runs before steering (policies/steering/steerability.py)
picks it: each candidate σ, smallest first, trains a *probe*, the first ``probe_steps`` steps of the very run
(same seed, same LR schedule spanning ``steps``), and the check decodes latents at the training dataset's own
observation windows (no simulator: a robot's own data works the same). The first probe called steerable is
resumed to ``steps`` (its steps are not lost); the rejected probes are the extra training, at most
``probe_steps`` x (len(candidates) - 1) gradient steps. No steerable probe: a one-line reason, no base.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from robosteer.policies.steering.steerability import THRESHOLDS, BaseDecoder, Steerability, measure


@dataclass(frozen=True)
class AutoNoiseConfig:
    """What ``action_noise_std=auto`` tries, and how much it may spend on trying (the Python API sets it)."""

    # ours: σ tried smallest first, in env units like action_noise_std; 0 for demos already varied (a
    # human's), then steps that take a clean-demo base to steerable (docs/experiments/imitation.md)
    candidates: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.5)
    # ours: gradient steps of each probe (capped at the run's steps): the extra training is at most this
    # times len(candidates) - 1; a third of the README's 3k-step recipe, past the 500-step LR warm-up
    probe_steps: int = 1000
    states: int = 128  # ours: dataset observation windows decoded at (robosteer-steer's steerability.states)
    latents: int = 16  # ours: N(0, I) latents decoded at each (robosteer-steer's steerability.latents)

    def __post_init__(self) -> None:
        c = tuple(float(x) for x in self.candidates)
        if not c or any(not (math.isfinite(x) and x >= 0) for x in c) or list(c) != sorted(set(c)):
            raise ValueError(
                f"AutoNoiseConfig.candidates={self.candidates}: expected distinct σ >= 0, ascending"
            )
        if self.probe_steps < 1 or self.states < 2 or self.latents < 2:
            raise ValueError(
                f"AutoNoiseConfig: probe_steps={self.probe_steps} >= 1, states={self.states} and "
                f"latents={self.latents} >= 2 expected"
            )


@dataclass(frozen=True)
class Probe:
    """One candidate's outcome: the check on its probe base and, with ``task=`` given, its success."""

    sigma: float
    check: Steerability
    success: float | None = None  # the probe's evaluation (None: no task, not measured)

    def as_dict(self) -> dict[str, Any]:
        c = self.check
        return {
            "sigma": self.sigma,
            "ratio": c.ratio,
            "verdict": c.verdict,
            "over_noise": c.over_noise,
            "over_states": c.over_states,
            "success_rate": self.success,
        }


@dataclass
class AutoNoiseChoice:
    """The σ chosen (None: no candidate was steerable) and every probe trained on the way."""

    sigma: float | None
    probes: list[Probe]
    probe_steps: int
    candidates: tuple[float, ...]
    final: Steerability | None = None  # the check on the finished base (set by the command)

    @property
    def extra_steps(self) -> int:
        """Training spent on rejected candidates (the chosen probe is the start of the run itself)."""
        return self.probe_steps * sum(p.sigma != self.sigma for p in self.probes)

    def reason(self) -> str:
        """Why no base was kept, in one line: the best ratio reached and what to try instead."""
        best = max(self.probes, key=lambda p: p.check.ratio)
        tried = ", ".join(f"{s:g}" for s in self.candidates)
        return (
            f"no action_noise_std in [{tried}] made the base steerable after {self.probe_steps}-step probes "
            f"(best ratio {best.check.ratio:.2f} at {best.sigma:g}, {best.check.verdict}; steerable needs "
            f"{THRESHOLDS['steerable']}): collect demos with action noise (robosteer-collect "
            "action_noise_std=0.3 keep=all), or set a larger action_noise_std yourself"
        )

    def as_dict(self) -> dict[str, Any]:
        final = None if self.final is None else {"ratio": self.final.ratio, "verdict": self.final.verdict}
        return {
            "chosen": self.sigma,
            "candidates": list(self.candidates),
            "probe_steps": self.probe_steps,
            "extra_steps": self.extra_steps,
            "probes": [p.as_dict() for p in self.probes],
            "final": final,
            "reason": None if self.sigma is not None else self.reason(),
        }


def choose(config: AutoNoiseConfig, probe: Callable[[float], Probe], probe_steps: int) -> AutoNoiseChoice:
    """Probe ``config.candidates`` in order and keep the first σ whose check says "steerable" (the larger
    ones are never trained); none: ``sigma`` is None and :meth:`AutoNoiseChoice.reason` says why."""
    probes: list[Probe] = []
    for sigma in config.candidates:
        probes.append(probe(float(sigma)))
        if probes[-1].check.verdict == "steerable":
            return AutoNoiseChoice(float(sigma), probes, probe_steps, tuple(config.candidates))
    return AutoNoiseChoice(None, probes, probe_steps, tuple(config.candidates))


def dataset_states(dataset: Any, count: int, seed: int) -> dict[str, torch.Tensor]:
    """``count`` observation windows {key: (count, To, ...)} of the training dataset, drawn by ``seed``."""
    n = len(dataset)
    idx = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[: min(count, n)]
    get = getattr(dataset, "get_batch", None)
    if callable(get):
        return dict(get(idx.numpy())["obs"])
    items = [dataset[int(i)]["obs"] for i in idx]
    return {k: torch.stack([torch.as_tensor(it[k]) for it in items]) for k in items[0]}


@torch.no_grad()
def check_base(policy: Any, dataset: Any, config: AutoNoiseConfig, seed: int) -> Steerability:
    """The steerability check on ``policy`` (its inference weights) at the dataset's own states; the RNG
    streams of training are untouched (a private generator)."""
    was_training = policy.training
    policy.eval()
    try:
        decoder = BaseDecoder(policy)
        states = dataset_states(dataset, config.states, seed)
        gen = torch.Generator(device=decoder.device).manual_seed(seed)
        return measure(decoder, states, config.latents, gen)
    finally:
        policy.train(was_training)
        if hasattr(policy, "reset"):
            policy.reset()

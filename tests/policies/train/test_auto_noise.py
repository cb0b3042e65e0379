"""action_noise_std=auto's choice (policies/train/auto_noise.py) on planted bases: the smallest σ whose check
says steerable wins and the larger ones are never trained; none crossing gives one line that says why; the
bare-base decoder the check reads is DSRL's own decode."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from robosteer.policies.steering.dsrl import DSRL
from robosteer.policies.steering.steerability import (
    THRESHOLDS,
    BaseDecoder,
    Steerability,
    executed_rows,
    verdict,
)
from robosteer.policies.train.auto_noise import AutoNoiseConfig, Probe, check_base, choose

CANDIDATES = AutoNoiseConfig().candidates


def _planted(ratio_of: dict[float, float], trained: list[float]):
    """A probe whose check reports ``ratio_of[σ]`` (a planted base), recording which σ were trained."""

    def probe(sigma: float) -> Probe:
        trained.append(sigma)
        r = ratio_of[sigma]
        return Probe(sigma, Steerability(r, 1.0, r, verdict(r), 128, 16), success=0.5)

    return probe


@pytest.mark.parametrize("crossing", range(len(CANDIDATES)))
def test_the_smallest_steerable_sigma_is_chosen_and_no_larger_one_is_trained(crossing: int):
    """The ratio crosses "steerable" at candidate ``crossing`` (weakly steerable just below it)."""
    steerable = THRESHOLDS["steerable"]
    ratio_of = {s: steerable * (1.2 if i >= crossing else 0.9) for i, s in enumerate(CANDIDATES)}
    trained: list[float] = []
    choice = choose(AutoNoiseConfig(), _planted(ratio_of, trained), probe_steps=1000)
    assert choice.sigma == CANDIDATES[crossing]
    assert trained == list(CANDIDATES[: crossing + 1])  # stops at the first steerable probe
    assert choice.extra_steps == 1000 * crossing  # the chosen probe is the run's own start, not extra
    d = choice.as_dict()
    assert d["chosen"] == CANDIDATES[crossing] and d["reason"] is None
    assert [p["sigma"] for p in d["probes"]] == trained
    assert [p["verdict"] for p in d["probes"]][-1] == "steerable"
    assert all(p["verdict"] == "weakly steerable" for p in d["probes"][:-1])


def test_no_candidate_crossing_gives_one_line_naming_the_best_ratio():
    ratio_of = dict(zip(CANDIDATES, (0.02, 0.1, 0.3, 0.42, 0.45), strict=True))
    trained: list[float] = []
    choice = choose(AutoNoiseConfig(), _planted(ratio_of, trained), probe_steps=700)
    assert choice.sigma is None and trained == list(CANDIDATES)
    reason = choice.reason()
    assert "\n" not in reason and choice.as_dict()["reason"] == reason
    assert "best ratio 0.45 at 0.5, weakly steerable" in reason and "700-step probes" in reason
    assert f"steerable needs {THRESHOLDS['steerable']}" in reason
    assert choice.extra_steps == 700 * len(CANDIDATES)  # nothing kept: every probe was extra


@pytest.mark.parametrize(
    "kw", [{"candidates": ()}, {"candidates": (0.3, 0.1)}, {"candidates": (-0.1, 0.2)}, {"probe_steps": 0}]
)
def test_a_bad_candidate_list_or_budget_is_refused(kw: dict):
    with pytest.raises(ValueError, match="AutoNoiseConfig"):
        AutoNoiseConfig(**kw)


class ShiftBase(nn.Module):
    """chunk = last state's first entry + c · noise; To = 2, Ta = 2 of Tp = 4 executed."""

    noise_shape = (4, 1)

    class config:
        n_obs_steps, n_action_steps = 2, 2

    def __init__(self, c: float) -> None:
        super().__init__()
        self.c = c
        self.w = nn.Parameter(torch.zeros(()))

    def sample(self, obs: dict[str, torch.Tensor], noise: torch.Tensor | None = None) -> torch.Tensor:
        assert noise is not None
        return obs["state"][:, -1, :1].unsqueeze(1) + self.c * noise  # (B, 4, 1)


class WindowDataset:
    """Observation windows as SequenceDataset.get_batch gives them (no get_batch: the item path)."""

    def __init__(self, n: int) -> None:
        self.states = torch.linspace(-1.7, 1.7, n).view(n, 1, 1).repeat(1, 2, 1)  # (n, To=2, 1)

    def __len__(self) -> int:
        return len(self.states)

    def __getitem__(self, i: int) -> dict:
        return {"obs": {"state": self.states[i]}}


def test_the_check_decodes_the_executed_rows_as_dsrl_does():
    base = ShiftBase(0.7)
    obs = {"state": torch.randn(5, 2, 1)}
    w = torch.randn(5, 4)
    agent = DSRL(base, obs_dim=2, exec_slice=executed_rows(base))
    assert executed_rows(base) == slice(1, 3)
    assert torch.equal(BaseDecoder(base).decode(obs, w), agent.decode(obs, w))


@pytest.mark.parametrize(("c", "expected"), [(0.01, "not steerable"), (1.0, "steerable")])
def test_check_base_reads_the_dataset_windows(c: float, expected: str):
    check = check_base(ShiftBase(c), WindowDataset(64), AutoNoiseConfig(states=32), seed=0)
    assert check.verdict == expected and check.states == 32 and check.latents == 16

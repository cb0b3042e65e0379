"""Run directories written by an older version still load and act the same (tests/fixtures/make_runs.py).

The fixture was written at the commit in its name, before the run-engine refactor: a DP policy, DSRL-NA and
EXPO runs on it, and a Cal-QL critic, each with the actions (or Q values) that version computed on fixed
observations under fixed seeds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

FIXTURES = sorted((Path(__file__).resolve().parents[1] / "fixtures").glob("runs_*"))
KINDS = ("dp", "dsrl", "expo", "calql")


def _expected(fixture: Path) -> dict:
    return json.loads((fixture / "expected.json").read_text())["runs"]


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f.name for f in FIXTURES])
@pytest.mark.parametrize("kind", KINDS)
def test_old_run_loads_and_acts_as_it_did(fixture: Path, kind: str) -> None:
    want = _expected(fixture)[kind]
    obs = np.asarray(want["obs"], dtype=np.float32)  # (N, 39)
    from robosteer.policies.loading import load

    loaded = load(fixture / kind, which="latest")  # one loader, whatever the run's kind
    if kind == "calql":
        acts = torch.tensor(want["actions"], dtype=torch.float32)  # (N, Ta, Da)
        with torch.no_grad():
            q = loaded.score({"state": torch.from_numpy(obs)[:, None]}, acts)
        np.testing.assert_allclose(q.numpy(), want["q"], rtol=0, atol=1e-5)
        return
    policy = loaded
    for o, a in zip(obs, want["actions"], strict=True):
        policy.reset()
        torch.manual_seed(0)
        got = np.asarray(policy.act({"state": o[None]}), dtype=np.float64).reshape(-1)
        np.testing.assert_allclose(got, a, rtol=0, atol=1e-5)


def test_fixtures_exist() -> None:
    """The compatibility test above must have something to load (a renamed folder would skip it silently)."""
    assert FIXTURES, "tests/fixtures/runs_* is missing"
    for fixture in FIXTURES:
        assert set(_expected(fixture)) == set(KINDS)

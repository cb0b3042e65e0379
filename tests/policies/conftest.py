"""Fixtures of the policy tests (shape_meta, stats of the tiny low-dim setting)."""

from __future__ import annotations

import numpy as np
import pytest
from policy_testkit import ACTION_DIM, STATE_DIM


@pytest.fixture
def shape_meta() -> dict:
    return {"obs": {"state": {"shape": [STATE_DIM], "type": "low_dim"}}, "action": {"shape": [ACTION_DIM]}}


@pytest.fixture
def stats() -> dict:
    def s(d: int, lo: float, hi: float) -> dict:
        return {"min": np.full(d, lo), "max": np.full(d, hi), "mean": np.zeros(d), "std": np.ones(d)}

    return {"state": s(STATE_DIM, -1.0, 2.0), "action": s(ACTION_DIM, -1.0, 1.0)}

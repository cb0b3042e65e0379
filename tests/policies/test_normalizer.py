"""Normaliser: min-max round trip, constant dims, images, unfitted errors, state-dict round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from policy_testkit import TINY, obs_window

from robosteer.policies import make_policy
from robosteer.policies.normalizer import Normalizer, NormalizerNotFittedError

torch.set_num_threads(1)


def test_round_trip_and_range(shape_meta: dict, stats: dict) -> None:
    norm = Normalizer(shape_meta, stats)
    x = torch.rand(64, 5) * 3 - 1  # within [-1, 2]
    y = norm.normalize("state", x)
    assert y.min() >= -1 - 1e-6 and y.max() <= 1 + 1e-6
    torch.testing.assert_close(
        norm.normalize("state", torch.tensor([[-1.0] * 5, [2.0] * 5])), torch.tensor([[-1.0] * 5, [1.0] * 5])
    )
    torch.testing.assert_close(norm.unnormalize("state", y), x, atol=1e-6, rtol=0)


def test_constant_dim_does_not_blow_up(shape_meta: dict, stats: dict) -> None:
    stats["action"]["min"] = np.array([-1.0, 0.5, -2.0])
    stats["action"]["max"] = np.array([1.0, 0.5, 2.0])  # dim 1 constant
    norm = Normalizer(shape_meta, stats)
    a = torch.tensor([[0.0, 0.5, 1.0]])
    y = norm.normalize("action", a)
    assert torch.isfinite(y).all() and y[0, 1] == 0.0
    torch.testing.assert_close(norm.unnormalize("action", y), a)


def test_images_scaled_without_stats() -> None:
    meta = {"obs": {"image/cam": {"shape": [8, 8, 3], "type": "rgb"}}, "action": {"shape": [2]}}
    img = torch.tensor([0, 255], dtype=torch.uint8).reshape(1, 2, 1, 1).expand(1, 2, 8, 3)
    y = Normalizer(meta, None).normalize("image/cam", img)
    assert y.min() == -1.0 and y.max() == 1.0
    y01 = Normalizer(meta, None, image_range="0_1").normalize("image/cam", img)
    assert y01.min() == 0.0 and y01.max() == 1.0


def test_unfitted_raises_clear_error(shape_meta: dict) -> None:
    policy = make_policy("diffusion", shape_meta, None, **TINY)
    with pytest.raises(NormalizerNotFittedError, match="not fitted"):
        policy.sample(obs_window(2))


def test_missing_stats_key(shape_meta: dict, stats: dict) -> None:
    del stats["state"]
    with pytest.raises(KeyError, match="state"):
        Normalizer(shape_meta, stats)


@pytest.mark.parametrize("name", ["diffusion", "flow", "streaming"])
def test_state_dict_round_trip(name: str, shape_meta: dict, stats: dict) -> None:
    policy = make_policy(name, shape_meta, stats, **TINY)
    cfg = json.loads(json.dumps(policy.get_config()))  # JSON-serialisable and sufficient to rebuild
    restored = make_policy(name, json.loads(json.dumps(policy.shape_meta)), None, **cfg)
    restored.load_state_dict(policy.state_dict())
    assert any("normalizer" in k for k in policy.state_dict())
    obs = obs_window(3, policy.config.n_obs_steps)
    noise = torch.randn(3, *policy.noise_shape)
    assert torch.equal(policy.sample(obs, noise), restored.sample(obs, noise))


def test_config_errors(shape_meta: dict) -> None:
    with pytest.raises(ValueError, match=r"unknown config key 'horizn'.*did you mean 'horizon'"):
        make_policy("diffusion", shape_meta, None, horizn=8)
    with pytest.raises(ValueError, match=r"unknown policy 'difusion'.*did you mean 'diffusion'.*flow"):
        make_policy("difusion", shape_meta)
    with pytest.raises(ValueError, match="prediction_type"):
        make_policy("diffusion", shape_meta, prediction_type="x0")
    with pytest.raises(ValueError, match="horizon"):
        make_policy("diffusion", shape_meta, horizon=4, n_action_steps=8)


def test_list_policies() -> None:
    from robosteer.policies import list_policies

    assert list_policies() == ["diffusion", "flow", "streaming"]

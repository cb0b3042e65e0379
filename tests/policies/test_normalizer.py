"""Normaliser: min-max round trip, constant dims, images, unfitted errors, state-dict round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from policy_testkit import TINY, obs_window

from robosteer.policies import make_policy
from robosteer.policies.normalizer import Normalizer, NormalizerNotFittedError, buffer_key

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


META2 = {
    "obs": {
        "image/cam": {"shape": [2, 2, 3], "type": "rgb"},
        "state": {"shape": [3], "type": "low_dim"},
        "goal.pos": {"shape": [2]},
    },
    "action": {"shape": [3]},
}
STATS2 = {
    "state": {"min": [-1.0, 0.0, 10.0], "max": [1.0, 4.0, 20.0]},
    "goal.pos": {"min": [0.0, 5.0], "max": [2.0, 5.3]},  # dim 1: range 0.3 < range_eps 0.5 → constant
    "action": {"min": [0.0, 0.0, 0.0], "max": [0.5, 1.0, 0.4]},  # 0.5 is not below range_eps, 0.4 is
    "unused": {"min": [0.0], "max": [1.0]},
}


def test_min_max_and_constant_dims_by_hand() -> None:
    """(x − min)/(max − min)·2 − 1 per dimension; a range below range_eps maps x to x − min (0 at min)."""
    norm = Normalizer(META2, STATS2, range_eps=0.5)
    assert norm.fitted and norm.lowdim_keys == ["state", "goal.pos"] and norm.rgb_keys == ["image/cam"]
    x = torch.tensor([[-1.0, 1.0, 15.0], [0.5, 4.0, 10.0]])
    want = torch.tensor([[-1.0, -0.5, 0.0], [0.5, 1.0, -1.0]])
    torch.testing.assert_close(norm.normalize("state", x), want)
    torch.testing.assert_close(norm.unnormalize("state", want), x)
    g = torch.tensor([[1.0, 5.0], [2.0, 6.0]])
    torch.testing.assert_close(norm.normalize("goal.pos", g), torch.tensor([[0.0, 0.0], [1.0, 1.0]]))
    torch.testing.assert_close(
        norm.unnormalize("goal.pos", torch.tensor([[0.0, 0.5]])), torch.tensor([[1.0, 5.5]])
    )
    a = torch.tensor([[0.25, 0.0, 0.1]])  # range 0.5 equals range_eps: scaled; 0.4 is below it: x − min
    torch.testing.assert_close(norm.normalize("action", a), torch.tensor([[0.0, -1.0, 0.1]]))
    assert Normalizer(META2, STATS2).range_eps == 1e-4  # the default keeps 0.3 a real range
    torch.testing.assert_close(
        Normalizer(META2, STATS2).normalize("goal.pos", g),
        torch.tensor([[0.0, -1.0], [1.0, 2.0 / 0.3 - 1.0]]),
    )


def test_images_by_hand_and_normalize_obs_per_key() -> None:
    img = torch.tensor([0, 51, 255, 102], dtype=torch.uint8).view(1, 2, 2, 1).expand(1, 2, 2, 3)
    norm = Normalizer(META2, STATS2, range_eps=0.5)
    want = torch.tensor([0.0, 51.0, 255.0, 102.0]).view(1, 2, 2, 1).expand(1, 2, 2, 3) / 255.0
    torch.testing.assert_close(norm.normalize("image/cam", img), want * 2 - 1)
    torch.testing.assert_close(Normalizer(META2, STATS2, image_range="0_1").normalize("image/cam", img), want)
    obs = {
        "image/cam": img,
        "state": torch.tensor([[1.0, 2.0, 20.0]]),
        "goal.pos": torch.tensor([[0.0, 5.0]]),
    }
    out = norm.normalize_obs(obs)
    assert list(out) == ["state", "goal.pos", "image/cam"]
    torch.testing.assert_close(out["state"], torch.tensor([[1.0, 0.0, 1.0]]))
    torch.testing.assert_close(out["goal.pos"], torch.tensor([[-1.0, 0.0]]))
    torch.testing.assert_close(out["image/cam"], want * 2 - 1)


def test_refusals_and_fitting_state() -> None:
    with pytest.raises(ValueError, match="image_range"):
        Normalizer(META2, None, image_range="0_255")
    bad_type = {"obs": {"depth": {"shape": [2], "type": "depth"}}, "action": {"shape": [1]}}
    with pytest.raises(ValueError, match="unknown type 'depth'"):
        Normalizer(bad_type)
    with pytest.raises(ValueError, match=r"stats\['state'\] has 2 dims, shape_meta says 3"):
        Normalizer(META2, {**STATS2, "state": {"min": [0.0, 0.0], "max": [1.0, 1.0]}})
    empty = Normalizer(META2)
    assert not empty.fitted
    with pytest.raises(NormalizerNotFittedError, match="'state' is not fitted"):
        empty.normalize("state", torch.zeros(1, 3))
    with pytest.raises(NormalizerNotFittedError, match="'action' is not fitted"):
        empty.unnormalize("action", torch.zeros(1, 3))
    with pytest.raises(KeyError, match="nope"):
        empty.normalize("nope", torch.zeros(1, 3))
    assert sorted(empty.state_dict()) == sorted(
        f"affine.{k}.{b}" for k in ("state", "goal_pos", "action") for b in ("scale", "offset", "fitted")
    )
    assert all(v.dtype == torch.bool for k, v in empty.state_dict().items() if k.endswith("fitted"))
    empty.load_state_dict(Normalizer(META2, STATS2).state_dict())  # loading marks every key fitted
    assert empty.fitted
    torch.testing.assert_close(empty.normalize("state", torch.tensor([[0.0, 2.0, 15.0]])), torch.zeros(1, 3))
    assert buffer_key("image/corner2") == "image__corner2" and buffer_key("a.b/c") == "a_b__c"

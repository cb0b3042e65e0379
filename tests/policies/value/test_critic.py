"""The offline critic's own normalisation, multi-task features, the Monte-Carlo returns of the value data."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robosteer.policies.registry import make_policy
from robosteer.policies.rl import NormalizedCritic, chunk_transitions
from robosteer.policies.value import value_transitions

META = {"obs": {"state": {"shape": [2], "type": "low_dim"}}, "action": {"shape": [2]}}


def _stats(lo: float, hi: float) -> dict:
    s = {"min": np.full(2, lo), "max": np.full(2, hi), "mean": np.zeros(2), "std": np.ones(2)}
    return {"state": s, "action": s}


def test_action_normalizer_round_trips_a_known_action_through_both_normalisers() -> None:
    """Policy units → raw → critic units: the critic sees its own min/max scaling, not the policy's."""
    critic = NormalizedCritic(META, n_obs_steps=1, action_steps=1, stats=_stats(-4.0, 4.0), hidden=[8])
    policy = make_policy("flow", META, _stats(-1.0, 1.0), mlp_hidden_dim=16, mlp_n_blocks=1, time_embed_dim=8)
    raw = torch.tensor([[[2.0, -1.0]]])  # (B, 1, A) raw env units
    in_critic = critic.normalize_action(raw)
    assert torch.allclose(in_critic, torch.tensor([[0.5, -0.25]]))  # (x - min) / (max - min) * 2 - 1
    assert torch.allclose(critic.unnormalize_action(in_critic), raw)
    via_policy = policy.normalizer.unnormalize("action", policy.normalizer.normalize("action", raw))
    assert torch.allclose(critic.normalize_action(via_policy), in_critic)
    assert not torch.allclose(policy.normalizer.normalize("action", raw).flatten(1), in_critic)


def test_features_use_the_latest_steps_and_one_hot_task() -> None:
    critic = NormalizedCritic(
        META, n_obs_steps=1, action_steps=2, num_tasks=3, stats=_stats(0.0, 2.0), hidden=[8]
    )
    obs = {"state": torch.tensor([[[9.0, 9.0], [2.0, 0.0]]])}  # To=2 window: only the last step is used
    f = critic.features(obs, task_id=torch.tensor([2]))
    assert f.tolist() == [[1.0, -1.0, 0.0, 0.0, 1.0]]
    with pytest.raises(ValueError, match="pass task_id"):
        critic.features(obs)
    with pytest.raises(ValueError, match="expected \\(B, 2, 2\\)"):
        critic.normalize_action(torch.zeros(1, 1, 2))
    rebuilt = NormalizedCritic(**critic.get_config())
    rebuilt.load_state_dict(critic.state_dict())
    a = torch.zeros(1, 2, 2)
    assert torch.equal(rebuilt.score(obs, a, 2), critic.score(obs, a, 2))


def test_mc_returns_hand_checked(tmp_path) -> None:
    from robosteer.policies.data import DatasetWriter

    path = tmp_path / "d.hdf5"
    with DatasetWriter(path, {"env_name": "t"}, valid_fraction=0.0) as w:
        for dones in ([0, 0, 1], [0, 0, 0]):
            w.add_episode(
                obs={"state": np.zeros((3, 2), np.float32)},
                next_obs={"state": np.zeros((3, 2), np.float32)},
                actions=np.zeros((3, 2), np.float32),
                rewards=np.zeros(3, np.float32),
                dones=np.asarray(dones, np.uint8),
            )
    g = 0.5
    tr = chunk_transitions(path, ["state"], 1, 1, discount=g)
    # success: r = -1, -1, 0 -> R = -1.5, -1, 0; time-out: the last reward forever: -1/(1-g) = -2 after step 2
    assert tr["mc_return"].tolist() == pytest.approx([-1.5, -1.0, 0.0, -2.0, -2.0, -2.0])
    chunked = chunk_transitions(path, ["state"], 1, 2, discount=g)  # chunks start every step, stride Ta
    assert chunked["mc_return"][:3].tolist() == pytest.approx([-1.0, 0.0, 0.0])
    data, meta, stats, tasks = value_transitions([path, path], ["state"], 1, 1, g)
    assert data["task_id"].tolist() == [0] * 12 and tasks == ["t"]  # one task in two files
    assert meta["action"]["shape"] == [2] and set(stats) == {"state", "action"}

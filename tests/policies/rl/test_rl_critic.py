"""The Q ensemble and the offline critic (NormalizedCritic) pinned where mutation testing found them unpinned:
defaults, subset draws (by hand, without a generator, without touching the RNG when all heads are used), the
target as an independent copy, and the critic's features, action units, score and config by hand on batches
whose rows, steps, keys and dimensions all differ."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from robosteer.policies.rl import CriticEnsemble, NormalizedCritic, polyak_update

torch.set_num_threads(1)

META = {
    "obs": {"state": {"shape": [2], "type": "low_dim"}, "goal": {"shape": [3]}},
    "action": {"shape": [2]},
}
STATS = {
    "state": {"min": np.array([0.0, -1.0]), "max": np.array([2.0, 1.0])},
    "goal": {"min": np.zeros(3), "max": np.full(3, 4.0)},
    "action": {"min": np.array([-2.0, 0.0]), "max": np.array([2.0, 4.0])},
}


def _minmax(x: np.ndarray, key: str) -> np.ndarray:
    lo, hi = STATS[key]["min"], STATS[key]["max"]
    return (x - lo) / (hi - lo) * 2.0 - 1.0


def _critic(**kw) -> NormalizedCritic:
    torch.manual_seed(0)
    args = {"n_obs_steps": 2, "action_steps": 2, "num_tasks": 3, "stats": STATS, "hidden": [8]}
    return NormalizedCritic(META, **{**args, **kw})


def _obs() -> dict[str, np.ndarray]:
    """B = 2 windows of To = 3 steps; every entry distinct."""
    return {
        "state": np.arange(12, dtype=np.float64).reshape(2, 3, 2) / 10.0,
        "goal": np.arange(18, dtype=np.float64).reshape(2, 3, 3) / 5.0,
    }


# ---------------------------------------------------------------------------------------------- ensemble
def test_ensemble_defaults_are_two_heads_with_layer_norm() -> None:
    torch.manual_seed(0)
    default = CriticEnsemble(3, 2)
    torch.manual_seed(0)
    spelled = CriticEnsemble(3, 2, hidden=(256, 256), num_critics=2, layer_norm=True, act="relu")
    a, b = default.state_dict(), spelled.state_dict()
    assert default.num_critics == 2 and a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    x, u = torch.randn(4, 3), torch.randn(4, 2)
    assert default(x, u).shape == (2, 4) and torch.equal(default(x, u), spelled(x, u))
    q = torch.tensor([[3.0, -1.0], [2.0, 5.0]])
    assert torch.equal(default.reduce(q), torch.tensor([2.0, -1.0]))  # "min" by default


@pytest.mark.parametrize("batch", [1, 3])
def test_subset_min_by_hand_for_any_batch_size(batch: int) -> None:
    """Head i holds value i: the min of a subset is the smallest of the heads randperm(E)[:subset] drew."""
    critic = CriticEnsemble(1, 1, num_critics=10)
    q = torch.arange(10.0).unsqueeze(1).repeat(1, batch)
    for seed in range(6):
        heads = torch.randperm(10, generator=torch.Generator().manual_seed(seed))[:2]
        got = critic.reduce(q, "min", subset=2, generator=torch.Generator().manual_seed(seed))
        assert got.tolist() == [float(heads.min())] * batch
        got = critic.reduce(q, "mean", subset=3, generator=torch.Generator().manual_seed(seed))
        want = torch.randperm(10, generator=torch.Generator().manual_seed(seed))[:3].float().mean()
        torch.testing.assert_close(got, want.repeat(batch))


def test_subsets_draw_without_a_generator_and_ignore_the_default_device() -> None:
    critic = CriticEnsemble(2, 1, hidden=(4,), num_critics=5)
    q = torch.arange(5.0).unsqueeze(1)
    with torch.device("meta"):  # indices come from the CPU, not from torch's default device
        drawn = {float(critic.reduce(q, "min", subset=2)[0]) for _ in range(40)}
        got = critic.subset_min(torch.zeros(1, 2), torch.zeros(1, 1), 2)
    assert drawn <= {0.0, 1.0, 2.0, 3.0} and len(drawn) > 1
    assert got.shape == (1,) and got.device.type == "cpu"


def test_all_heads_use_no_random_numbers() -> None:
    """subset = E takes every head without a draw: the caller's generator is left as it was."""
    torch.manual_seed(0)
    critic = CriticEnsemble(2, 1, hidden=(4,), num_critics=4)
    obs, act = torch.randn(3, 2), torch.randn(3, 1)
    g = torch.Generator().manual_seed(9)
    before = g.get_state()
    q = critic(obs, act)
    assert torch.equal(critic.reduce(q, "min", subset=4, generator=g), q.min(0).values)
    assert torch.equal(critic.subset_min(obs, act, 4, g), q.min(0).values)
    assert torch.equal(g.get_state(), before)


def test_target_is_an_independent_frozen_copy() -> None:
    online = CriticEnsemble(2, 1, hidden=(4,))
    target = online.make_target()
    assert all(p.requires_grad for p in online.parameters())
    assert not any(p.requires_grad for p in target.parameters())
    with torch.no_grad():
        next(target.parameters()).add_(1.0)
    assert not torch.equal(next(target.parameters()), next(online.parameters()))
    other = CriticEnsemble(2, 1, hidden=(4,))
    polyak_update(target, other, 1.0)  # τ = 1: the target becomes ``other``; ``online`` is untouched
    assert all(torch.equal(t, o) for t, o in zip(target.parameters(), other.parameters()))
    assert not torch.equal(next(online.parameters()), next(other.parameters()))


# ----------------------------------------------------------------------------------------- NormalizedCritic
def test_features_by_hand_latest_steps_each_key_and_task_per_row() -> None:
    critic = _critic()
    obs = _obs()
    f = critic.features(obs, task_id=torch.tensor([2, 0]))
    state = _minmax(obs["state"][:, 1:], "state").reshape(2, 4)
    goal = _minmax(obs["goal"][:, 1:], "goal").reshape(2, 6)
    onehot = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    want = np.concatenate([state, goal, onehot], axis=1)
    assert f.dtype == torch.float32 and critic.obs_dim == 13
    np.testing.assert_allclose(f.numpy(), want, rtol=1e-6, atol=1e-6)
    one = critic.features(obs, task_id=1)  # one id for the whole batch
    np.testing.assert_allclose(one[:, 10:].numpy(), [[0.0, 1.0, 0.0]] * 2)


def test_features_refuse_bad_windows_tasks_and_keys() -> None:
    critic = _critic()
    obs = _obs()
    with pytest.raises(ValueError, match="out of range"):
        critic.features(obs, task_id=3)
    with pytest.raises(ValueError, match="out of range"):
        critic.features(obs, task_id=torch.tensor([0, -1]))
    assert critic.features(obs, task_id=torch.tensor([0, 2])).shape == (2, 13)
    with pytest.raises(ValueError, match="pass task_id"):
        critic.features(obs)
    with pytest.raises(KeyError, match="goal"):
        critic.features({"state": obs["state"]}, task_id=0)
    with pytest.raises(ValueError, match="expected"):
        critic.features({**obs, "state": obs["state"][:, -1]}, task_id=0)  # (B, D): no window
    with pytest.raises(ValueError, match="expected"):
        critic.features({**obs, "state": obs["state"][:, -1:]}, task_id=0)  # To = 1 < 2
    exact = critic.features({k: v[:, 1:] for k, v in obs.items()}, task_id=0)
    torch.testing.assert_close(exact, critic.features(obs, task_id=0))


@pytest.mark.parametrize("num_tasks", [0, 1])
def test_one_task_has_no_one_hot(num_tasks: int) -> None:
    critic = _critic(num_tasks=num_tasks, n_obs_steps=1)
    f = critic.features(_obs())
    assert critic.obs_dim == 5 and f.shape == (2, 5)
    assert critic.q.net[0].weight.shape == (2, 5 + 2 * 2, 8)


def test_action_units_by_hand_both_ways() -> None:
    critic = _critic()
    raw = np.array([[[-2.0, 1.0], [0.0, 3.0]], [[1.0, 4.0], [2.0, 0.0]]])  # (B, steps, A), float64
    flat = critic.normalize_action(raw)
    want = _minmax(raw, "action").reshape(2, 4)
    assert flat.dtype == torch.float32
    np.testing.assert_allclose(flat.numpy(), want, atol=1e-6)
    back = critic.unnormalize_action(flat)
    assert back.shape == (2, 2, 2)
    np.testing.assert_allclose(back.numpy(), raw, atol=1e-6)
    with pytest.raises(ValueError, match="expected"):
        critic.normalize_action(raw[:, :1])
    with pytest.raises(ValueError, match="expected"):
        critic.normalize_action(np.zeros((2, 2, 3)))


def test_score_is_the_min_over_target_heads_without_a_graph() -> None:
    critic = _critic(num_critics=3)
    obs = _obs()
    action = torch.tensor([[[-2.0, 1.0], [0.0, 3.0]], [[1.0, 4.0], [2.0, 0.0]]], requires_grad=True)
    tid = torch.tensor([1, 2])
    with torch.no_grad():
        for p in critic.q.parameters():  # the online heads move; the target's do not
            p.add_(0.5)
    got = critic.score(obs, action, tid)
    with torch.no_grad():
        q = critic.q_target(critic.features(obs, tid), critic.normalize_action(action))
        q_online = critic.q(critic.features(obs, tid), critic.normalize_action(action))
    assert q.shape == (3, 2) and not got.requires_grad
    assert torch.equal(got, q.min(0).values) and not torch.equal(got, q_online.min(0).values)


def test_config_rebuilds_the_same_critic() -> None:
    critic = _critic(hidden=[8, 6], num_critics=3, layer_norm=False, act="tanh")
    cfg = critic.get_config()
    assert cfg == {
        "shape_meta": META,
        "n_obs_steps": 2,
        "action_steps": 2,
        "num_tasks": 3,
        "hidden": [8, 6],
        "num_critics": 3,
        "layer_norm": False,
        "act": "tanh",
    }
    rebuilt = NormalizedCritic(**cfg)
    rebuilt.load_state_dict(critic.state_dict())
    action = torch.zeros(2, 2, 2)
    assert torch.equal(rebuilt.score(_obs(), action, 1), critic.score(_obs(), action, 1))
    default = NormalizedCritic(META, n_obs_steps=1, action_steps=1, stats=STATS).get_config()
    assert (default["num_tasks"], default["hidden"], default["num_critics"]) == (0, [256, 256], 2)
    assert (default["layer_norm"], default["act"]) == (True, "relu")


def test_only_low_dim_observations() -> None:
    meta = {"obs": {"image": {"shape": [8, 8, 3], "type": "rgb"}}, "action": {"shape": [2]}}
    with pytest.raises(ValueError, match="low_dim"):
        NormalizedCritic(meta, n_obs_steps=1, action_steps=1)


def test_two_tasks_get_a_one_hot_and_task_ids_of_any_integer_dtype() -> None:
    critic = _critic(num_tasks=2, n_obs_steps=1)
    f = critic.features(_obs(), task_id=np.array([1, 0], np.int32))
    assert critic.obs_dim == 7 and f[:, 5:].tolist() == [[0.0, 1.0], [1.0, 0.0]]
    assert critic.score(_obs(), np.zeros((2, 2, 2)), np.array([1, 0], np.int32)).shape == (2,)


def test_polyak_update_refuses_networks_of_different_shapes() -> None:
    """A target with fewer parameters than the online net is refused, not silently half-updated."""
    small, large = (
        torch.nn.Sequential(torch.nn.Linear(2, 2)),
        torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)),
    )
    with pytest.raises(ValueError):
        polyak_update(small, large, 0.5)

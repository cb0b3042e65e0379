"""Multi-task generalists: task id → learned embedding fused into the condition; files of one task share an
id; single-task policies (and their checkpoints) are unchanged."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from policy_testkit import STATE_DIM, TINY, obs_window

from robosteer.policies.data import DatasetWriter, SequenceDataset
from robosteer.policies.registry import make_policy


def _write(path, env_name: str, episodes: int = 2) -> None:
    with DatasetWriter(path, {"env_name": env_name}, valid_fraction=0.0) as w:
        for _ in range(episodes):
            w.add_episode(
                obs={"state": np.random.rand(6, STATE_DIM).astype(np.float32)},
                actions=np.random.rand(6, 3).astype(np.float32),
                rewards=np.zeros(6, np.float32),
                dones=np.zeros(6, np.uint8),
            )


def test_single_task_policy_is_unchanged(shape_meta, stats) -> None:
    policy = make_policy("diffusion", shape_meta, stats, **TINY)
    assert not any("task_embedding" in k for k in policy.state_dict())
    assert policy.obs_encoder.out_dim == 2 * STATE_DIM
    old_config = {k: v for k, v in policy.get_config().items() if k not in ("task_names", "task_embed_dim")}
    again = make_policy("diffusion", shape_meta, None, **old_config)  # a checkpoint written before multi-task
    again.load_state_dict(policy.state_dict())
    noise = torch.randn(2, *policy.noise_shape)
    assert torch.equal(again.sample(obs_window(2), noise), policy.sample(obs_window(2), noise))


@pytest.mark.parametrize("name", ["diffusion", "flow", "streaming"])
def test_task_embedding_conditions_every_policy(name, shape_meta, stats) -> None:
    torch.manual_seed(0)
    policy = make_policy(name, shape_meta, stats, **TINY, task_names=["a-v3", "b-v3"], task_embed_dim=4)
    with torch.no_grad():
        policy.obs_encoder.task_embedding.weight.mul_(10)
    obs, noise = obs_window(2), torch.randn(2, *policy.noise_shape)
    with pytest.raises(ValueError, match="set_task"):
        policy.sample(obs, noise)
    with pytest.raises(ValueError, match="nearest: 'a-v3'"):
        policy.set_task("a-v4")
    policy.set_task("a-v3")
    a = policy.sample(obs, noise)
    assert torch.equal(a, policy.sample({**obs, "task_id": torch.zeros(2, dtype=torch.long)}, noise))
    assert not torch.allclose(a, policy.sample({**obs, "task_id": torch.ones(2, dtype=torch.long)}, noise))
    batch = {
        "obs": obs_window(4, seed=1),
        "action": torch.rand(4, *policy.noise_shape),
        "task_id": torch.tensor([0, 1, 0, 1]),
    }
    loss, _ = policy.loss(batch)
    loss.backward()
    assert policy.obs_encoder.task_embedding.weight.grad.abs().sum() > 0


def test_files_of_one_task_share_its_id(tmp_path) -> None:
    paths = [tmp_path / "a_clean.hdf5", tmp_path / "b.hdf5", tmp_path / "a_noisy.hdf5"]
    for p, env in zip(paths, ["a-v3", "b-v3", "a-v3"], strict=True):
        _write(p, env)
    ds = SequenceDataset(paths, ["state"], n_obs_steps=2, horizon=4, n_action_steps=2)
    assert ds.task_names == ["a-v3", "b-v3"]
    per_file = len(ds) // 3
    assert (
        ds.get_batch(np.arange(len(ds)))["task_id"].tolist()
        == [0] * per_file + [1] * per_file + [0] * per_file
    )

"""The scratch base: the identity latent -> chunk map that turns DSRL-SAC into plain chunked SAC."""

from __future__ import annotations

import pytest
import torch

from robosteer.policies.steering.dsrl import DSRL, DSRLConfig
from robosteer.policies.steering.scratch import make_scratch_base


def test_identity_map_clips_to_the_action_box_and_has_nothing_to_train():
    base = make_scratch_base(state_dim=39, action_dim=4, n_action_steps=8)
    assert base.noise_shape == (8, 4) and base.config.n_obs_steps == 1
    obs = {"state": torch.randn(3, 1, 39)}
    w = torch.randn(3, 8, 4) * 2
    assert torch.equal(base.sample(obs, noise=w), w.clamp(-1, 1))
    assert not list(base.parameters())
    with pytest.raises(TypeError, match="no parameters to train"):
        base.loss({"obs": obs, "action": w})


def test_dsrl_sac_over_scratch_executes_its_latent_exactly():
    base = make_scratch_base(39, 4, 8)
    agent = DSRL(base, obs_dim=39, exec_slice=slice(0, 8), config=DSRLConfig(variant="sac", hidden=[32, 32]))
    obs = {"state": torch.randn(5, 1, 39)}
    latent, chunk = agent.act(obs, generator=torch.Generator().manual_seed(0))
    assert chunk.shape == (5, 8, 4)
    assert torch.equal(chunk, latent.reshape(5, 8, 4))  # |latent| < 1 from tanh: the chunk is the latent

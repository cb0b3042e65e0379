"""Streaming Diffusion Policy: level invariants, NFE count, resets, train/test coverage, reduction to DP."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from diffusers import DDIMScheduler
from policy_testkit import ACTION_DIM, STATE_DIM, TINY, obs_window, randomize

from robosteer.policies import make_policy

torch.set_num_threads(1)


class CountingModel(torch.nn.Module):
    """Wraps the denoiser to count calls and record the (B, Tp) train-timestep levels it sees."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner, self.levels = inner, []

    def forward(self, x, t, cond):
        self.levels.append(t.clone())
        return self.inner(x, t, cond)


def make_sdp(shape_meta: dict, stats: dict, **cfg):
    policy = make_policy("streaming", shape_meta, stats, **{**TINY, **cfg})
    randomize(policy, scale=0.1)
    policy.model = CountingModel(policy.model)
    return policy


def test_defaults_and_indexing(shape_meta: dict, stats: dict) -> None:
    p = make_sdp(shape_meta, stats)
    assert (p.config.horizon, p.config.n_obs_steps, p.config.n_action_steps, p.h) == (20, 2, 8, 2)
    # c(i): positions < To and the tail go to chunks 0 and h-1; k(i) = floor(N (c+1)/h) - 1 with N = 10
    assert p.chunk_index.tolist() == [0] * 9 + [1] * 11
    assert p.init_levels.tolist() == [4] * 9 + [9] * 11
    assert p.train_chunk_levels.tolist() == [49] * 9 + [99] * 11


def test_level_invariants_and_nfe_count(shape_meta: dict, stats: dict) -> None:
    p = make_sdp(shape_meta, stats)
    n, top = p.config.num_inference_steps, p.config.num_inference_steps - 1
    obs = obs_window(3)
    for call in range(4):
        before = len(p.model.levels)
        chunk = p.stream_step(obs)
        assert chunk.shape == (3, 20, ACTION_DIM)
        assert len(p.model.levels) - before == n // p.h == 5  # exactly N/h denoiser calls
        lv = p.last_call_levels  # levels at return
        assert (lv[:, : p.exec_pos + 1] == -1).all(), f"call {call}: executed positions not clean"
        assert (lv[:, 1:] >= lv[:, :-1]).all()  # non-decreasing along the horizon
        assert (p._levels[:, p.keep :] == top).all()  # appended positions at N-1
        assert (p._levels >= 0).all()
        for t in p.model.levels[before:]:
            assert (t >= 0).all()


def test_renoise_is_applied(shape_meta: dict, stats: dict) -> None:
    """The first To-1 positions after the shift must hold a noised version of the executed action (§4.5.1)."""
    p = make_sdp(shape_meta, stats)
    chunk = p.stream_step(obs_window(64))
    last_exec = p.normalizer.normalize(
        "action", chunk[:, p.exec_pos]
    )  # (B, Da) the clean value that moved to 0
    residual = p._buffer[:, 0] - last_exec
    assert residual.std() > 0.5  # level 4 of 10 -> substantial noise; the reference's bug leaves it at 0


def test_reset_and_batch_size_change(shape_meta: dict, stats: dict) -> None:
    p = make_sdp(shape_meta, stats)
    p.stream_step(obs_window(2))
    assert p._buffer is not None
    p.reset()
    assert p._buffer is None and p._levels is None
    noise = torch.randn(2, *p.noise_shape)
    a = p.stream_step(obs_window(2), init_noise=noise)
    p.reset()
    assert torch.equal(a, p.stream_step(obs_window(2), init_noise=noise))  # fresh buffer after reset
    p.stream_step(obs_window(5))  # batch-size change re-initialises
    assert p._buffer.shape[0] == 5 and (p._levels == p.init_levels).all()


def test_act_nfe_and_per_row_reset(shape_meta: dict, stats: dict) -> None:
    p = make_sdp(shape_meta, stats)
    for _ in range(9):
        a = p.act({"state": np.zeros((3, STATE_DIM), np.float32)})
    assert a.shape == (3, ACTION_DIM) and len(p.model.levels) == 2 * 5  # refills at steps 0 and 8
    p.reset(env_ids=[2])
    assert p._needs_init.tolist() == [False, False, True]
    p.act({"state": np.zeros((3, STATE_DIM), np.float32)})  # row 2 re-initialised and planned alone
    assert p.model.levels[-1].shape[0] == 1 and not p._needs_init.any()
    assert (p._levels == p.init_levels).all()
    p.reset()
    assert p._buffer is None


@pytest.mark.parametrize("sample_levels", ["streaming", "constant"])
def test_train_test_coverage(shape_meta: dict, stats: dict, sample_levels: str) -> None:
    p = make_sdp(shape_meta, stats, sample_levels=sample_levels)
    support = p.train_level_support()
    seen = set()
    obs = obs_window(2)
    for _ in range(3):
        p.stream_step(obs)
    p.sample(obs)
    for t in p.model.levels:
        seen |= {tuple(row) for row in t.tolist()}
    assert seen <= support and seen == p.inference_level_vectors()
    # the training sampler really draws both regimes, inside the support
    draws = {tuple(r) for r in p.sample_train_levels(4000).tolist()}
    assert draws <= support and any(len(set(d)) > 1 for d in draws) and any(len(set(d)) == 1 for d in draws)


def test_config_validation(shape_meta: dict) -> None:
    with pytest.raises(ValueError, match="divisible by h=3"):
        make_policy("streaming", shape_meta, horizon=16, n_action_steps=5, num_inference_steps=10)
    with pytest.raises(ValueError, match="scheduler"):
        make_policy("streaming", shape_meta, scheduler="ddpm")
    with pytest.raises(ValueError, match=r"sample_levels.*'streaming'"):
        make_policy("streaming", shape_meta, sample_levels="stream")
    p = make_policy("streaming", shape_meta)
    with pytest.raises(ValueError, match=r"sample_levels.*'constant'"):
        p.set_sample_levels("const")
    p.set_sample_levels("constant")
    assert p.config.sample_levels == "constant"


def test_three_chunks(shape_meta: dict, stats: dict) -> None:
    """The reference's pusht layout (Tp=16, To=2, Ta=5 -> h=3) with N_inf divisible by h."""
    p = make_sdp(
        shape_meta, stats, horizon=16, n_action_steps=5, num_train_timesteps=120, num_inference_steps=12
    )
    assert p.h == 3 and p.nfe_per_call == 4
    assert p.init_levels.tolist() == [3] * 6 + [7] * 5 + [11] * 5
    for _ in range(3):
        before = len(p.model.levels)
        p.stream_step(obs_window(2))
        assert len(p.model.levels) - before == 4
        assert (p.last_call_levels[:, :6] == -1).all() and (p._levels == p.init_levels).all()
    before = len(p.model.levels)
    p.sample(obs_window(2))  # the cold-start streaming sample: 8 constant levels, then one streaming call
    seen = {tuple(t[0].tolist()) for t in p.model.levels[before:]}
    assert len(p.model.levels) - before == 12 and seen <= p.train_level_support()


def test_per_position_conditioning(shape_meta: dict, stats: dict) -> None:
    p = make_sdp(shape_meta, stats)
    x, cond = torch.randn(1, 20, ACTION_DIM), p.encode_obs(obs_window(1))
    levels = (p.init_levels * 10)[None]
    base = p.model(x, levels, cond)
    changed = levels.clone()
    changed[0, 15] = 20
    assert not torch.allclose(
        p.model(x, changed, cond)[0, :5], base[0, :5]
    )  # global FiLM reaches other positions


def test_h1_reduces_to_dp_sampling(shape_meta: dict, stats: dict) -> None:
    """h = 1 (Ta = Tp - To + 1): one streaming call is a full DDIM denoise = DP sampling with the same noise."""
    p = make_sdp(shape_meta, stats, horizon=16, n_action_steps=15)
    assert p.h == 1
    obs, noise = obs_window(3), torch.randn(3, 16, ACTION_DIM)
    streamed = p.stream_step(obs, init_noise=noise)
    assert torch.equal(streamed, p.sample(obs, noise))
    torch.testing.assert_close(streamed, diffusers_ddim(p, obs, noise), atol=1e-6, rtol=0)


def diffusers_ddim(p, obs: dict, noise: torch.Tensor) -> torch.Tensor:
    """The reference: diffusers' DDIMScheduler over all positions at one level, raw units."""
    c = p.config
    sched = DDIMScheduler(
        num_train_timesteps=c.num_train_timesteps,
        beta_schedule=c.beta_schedule,
        clip_sample=c.clip_sample,
        set_alpha_to_one=True,
        steps_offset=0,
        prediction_type=c.prediction_type,
    )
    sched.set_timesteps(c.num_inference_steps)
    with torch.no_grad():
        cond, x = p.encode_obs(obs), noise.clone()
        for t in sched.timesteps:
            x = sched.step(p.model(x, t.expand(*noise.shape[:2]), cond), t, x).prev_sample
    return p.normalizer.unnormalize("action", x)


def test_sample_constant_is_dp_ddim(shape_meta: dict, stats: dict) -> None:
    """sample_levels=constant: one level for every position, exactly DP's DDIM with this network."""
    p = make_sdp(shape_meta, stats, sample_levels="constant")
    obs, noise = obs_window(3), torch.randn(3, 20, ACTION_DIM)
    torch.testing.assert_close(p.sample(obs, noise), diffusers_ddim(p, obs, noise), atol=1e-6, rtol=0)


def test_sample_streaming_is_a_cold_start_streaming_call(shape_meta: dict, stats: dict) -> None:
    """The default sample(): constant levels N-1 .. 5, chunk 1 set back to the noise, then exactly one streaming
    call from that buffer (N_inf = 10 denoiser calls in all); deterministic in noise, unlike constant levels."""
    p = make_sdp(shape_meta, stats)
    assert p.config.sample_levels == "streaming"
    obs, noise = obs_window(3), torch.randn(3, 20, ACTION_DIM)
    chunk = p.sample(obs, noise)
    ratio = p.ddim_table().ratio
    seen = [t[0].tolist() for t in p.model.levels]
    constant = [[k * ratio] * 20 for k in (9, 8, 7, 6, 5)]
    streaming = [((p.init_levels - i) * ratio).tolist() for i in range(p.nfe_per_call)]
    assert seen == constant + streaming
    assert torch.equal(chunk, p.sample(obs, noise))
    with torch.no_grad():  # the buffer built by hand, then the policy's own streaming call
        cond = p.encode_obs(obs)
        buf = p.denoise_levels(noise, torch.full((3, 20), 9), cond, 5)[0]
        later = p.init_levels == 9  # chunk 1's positions
        buf[:, later] = noise[:, later]
    p._buffer, p._levels = buf, p.init_levels.expand(3, -1).clone()
    p._needs_init = torch.zeros(3, dtype=torch.bool)
    assert torch.equal(chunk, p.stream_step(obs))
    executed = slice(p.config.n_obs_steps - 1, p.exec_pos + 1)
    assert not torch.allclose(chunk[:, executed], diffusers_ddim(p, obs, noise)[:, executed], atol=1e-3)


def test_level_schedule_validated_once(shape_meta: dict, stats: dict) -> None:
    """The streaming schedule is validated when built; each call checks the buffer's level vector once."""
    p = make_sdp(shape_meta, stats)
    with pytest.raises(AssertionError, match="negative level"):
        p.level_schedule(p.init_levels, p.nfe_per_call + 1, torch.device("cpu"))  # chunk 0 would pass -1
    sched = p.level_schedule(p.init_levels, p.nfe_per_call, torch.device("cpu"))
    assert sched is p.level_schedule(p.init_levels.clone(), p.nfe_per_call, torch.device("cpu"))  # cached
    assert (sched.final_levels[: p.exec_pos + 1] == -1).all()
    p.stream_step(obs_window(2))
    p._levels[1, 3] = 2  # a corrupted buffer level vector is caught by the per-call check
    with pytest.raises(AssertionError, match="init_levels"):
        p.stream_step(obs_window(2))


def test_denoise_levels_mixed_rows(shape_meta: dict, stats: dict) -> None:
    """Rows at different level vectors take the per-row path and agree with denoising each row alone."""
    p = make_sdp(shape_meta, stats)
    cond, x = p.encode_obs(obs_window(2)).detach(), torch.randn(2, 20, ACTION_DIM)
    levels = torch.stack([p.init_levels, torch.full_like(p.init_levels, 9)])
    with torch.no_grad():
        both, lv = p.denoise_levels(x, levels, cond, 3)
        for r in range(2):
            alone, lv_r = p.denoise_levels(x[r : r + 1], levels[r : r + 1], cond[r : r + 1], 3)
            torch.testing.assert_close(both[r : r + 1], alone, atol=1e-6, rtol=0)
            assert torch.equal(lv[r : r + 1], lv_r)


def test_loss_backward(shape_meta: dict, stats: dict) -> None:
    p = make_policy("streaming", shape_meta, stats, **TINY)
    loss, _ = p.loss({"obs": obs_window(8), "action": torch.rand(8, 20, ACTION_DIM) * 2 - 1})
    loss.backward()
    assert torch.isfinite(loss)

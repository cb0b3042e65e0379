"""Diffusion policy: DDIM determinism and equality with diffusers' loop, act() queue semantics, resets."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from diffusers import DDIMScheduler, DDPMScheduler
from policy_testkit import ACTION_DIM, STATE_DIM, TINY, obs_window, randomize

from robosteer.policies import make_policy

torch.set_num_threads(1)


def diffusers_ddim_reference(policy, obs: dict, noise: torch.Tensor) -> torch.Tensor:
    """The stock diffusers DDIMScheduler loop (eta=0) on the same grid, written independently of the policy."""
    c = policy.config
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
        cond = policy.encode_obs(obs)
        x = noise.clone()
        for t in sched.timesteps:
            out = policy.model(x, t.expand(x.shape[0]), cond)
            x = sched.step(out, t, x, eta=0.0).prev_sample
        return policy.normalizer.unnormalize("action", x)


@pytest.mark.parametrize("prediction_type", ["epsilon", "sample", "v_prediction"])
@pytest.mark.parametrize("clip_sample", [True, False])
def test_ddim_matches_diffusers(
    prediction_type: str, clip_sample: bool, shape_meta: dict, stats: dict
) -> None:
    policy = make_policy(
        "diffusion", shape_meta, stats, prediction_type=prediction_type, clip_sample=clip_sample, **TINY
    )
    randomize(policy, scale=0.1)
    obs = obs_window(4)
    for noise in (torch.zeros(4, *policy.noise_shape), torch.randn(4, *policy.noise_shape)):
        ours = policy.sample(obs, noise)
        ref = diffusers_ddim_reference(policy, obs, noise)
        torch.testing.assert_close(ours, ref, atol=1e-6, rtol=0)
    assert policy.ddim_table().timesteps == [90, 80, 70, 60, 50, 40, 30, 20, 10, 0]


def test_ddim_deterministic_and_noise_sensitive(shape_meta: dict, stats: dict) -> None:
    policy = make_policy("diffusion", shape_meta, stats, **TINY)
    randomize(policy)
    obs = obs_window(2)
    n1, n2 = torch.randn(2, *policy.noise_shape), torch.randn(2, *policy.noise_shape)
    a = policy.sample(obs, n1)
    assert a.shape == (2, 16, ACTION_DIM)
    assert torch.equal(a, policy.sample(obs, n1.clone()))  # bit-identical
    assert torch.equal(a, policy.sample({"state": obs["state"].numpy()}, n1.numpy()))  # numpy accepted
    assert not torch.allclose(a, policy.sample(obs, n2), atol=1e-4)
    assert not torch.allclose(
        policy.sample(obs), policy.sample(obs), atol=1e-4
    )  # fresh noise when none given
    with pytest.raises(ValueError, match="noise has shape"):
        policy.sample(obs, torch.randn(2, 8, ACTION_DIM))


def test_ddpm_scheduler_option(shape_meta: dict, stats: dict) -> None:
    policy = make_policy("diffusion", shape_meta, stats, scheduler="ddpm", **TINY)
    randomize(policy)
    obs = obs_window(2)
    noise = torch.randn(2, *policy.noise_shape)
    assert torch.equal(
        policy.sample(obs, noise), policy.sample(obs, noise)
    )  # noise given -> DDIM, deterministic
    assert policy.sample(obs).shape == (2, 16, ACTION_DIM)


def diffusers_ddpm_reference(
    policy, cond: torch.Tensor, noise: torch.Tensor, generator: torch.Generator | None
) -> torch.Tensor:
    """The stock diffusers DDPMScheduler ancestral loop (fixed_small), written independently of the policy."""
    c = policy.config
    sched = DDPMScheduler(
        num_train_timesteps=c.num_train_timesteps,
        beta_schedule=c.beta_schedule,
        variance_type="fixed_small",
        clip_sample=c.clip_sample,
        clip_sample_range=c.clip_sample_range,
        prediction_type=c.prediction_type,
    )
    sched.set_timesteps(c.num_inference_steps)
    with torch.no_grad():
        x = noise.clone()
        for t in sched.timesteps:
            out = policy.model(x, t.expand(x.shape[0]), cond)
            x = sched.step(out, t, x, generator=generator).prev_sample
        return x


@pytest.mark.parametrize("prediction_type", ["epsilon", "sample", "v_prediction"])
@pytest.mark.parametrize("clip_sample", [True, False])
@pytest.mark.parametrize("steps", [100, 10])
def test_ddpm_matches_diffusers(
    prediction_type: str, clip_sample: bool, steps: int, shape_meta: dict, stats: dict
) -> None:
    """The vectorised DDPM sampler equals diffusers' DDPMScheduler loop given the same per-step noise."""
    policy = make_policy(
        "diffusion",
        shape_meta,
        stats,
        scheduler="ddpm",
        num_inference_steps=steps,
        prediction_type=prediction_type,
        clip_sample=clip_sample,
        **TINY,
    )
    randomize(policy, scale=0.1)
    with torch.no_grad():
        cond = policy.encode_obs(obs_window(3))
    noise = torch.randn(3, *policy.noise_shape)
    with torch.no_grad():  # same generator seed -> the same variance noise at every step in both loops
        ours = policy.ddpm_sample(cond, noise, generator=torch.Generator().manual_seed(11))
    ref = diffusers_ddpm_reference(policy, cond, noise, torch.Generator().manual_seed(11))
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=0)
    with torch.no_grad():  # and the noise really matters (a different seed gives another sample)
        other = policy.ddpm_sample(cond, noise, generator=torch.Generator().manual_seed(12))
    assert not torch.allclose(ours, other, atol=1e-4)
    # sample(obs) without noise draws x_T and every step's noise from the global RNG, in diffusers' order
    obs = obs_window(3)
    torch.manual_seed(5)
    a = policy.sample(obs)
    torch.manual_seed(5)
    x_t = torch.randn(3, *policy.noise_shape)
    ref = policy.normalizer.unnormalize("action", diffusers_ddpm_reference(policy, cond, x_t, None))
    torch.testing.assert_close(a, ref, atol=1e-5, rtol=0)
    assert policy.ddpm_table().timesteps == sorted(range(0, 100, 100 // steps), reverse=True)


def test_device_cache_follows_to(shape_meta: dict, stats: dict) -> None:
    """``policy.device`` is cached; ``.to()`` and ``load_state_dict`` refresh it."""
    policy = make_policy("diffusion", shape_meta, stats, **TINY)
    assert policy.device == torch.device("cpu")
    moved = copy.deepcopy(policy).to("meta")
    assert moved.device == torch.device("meta") and policy.device == torch.device("cpu")
    policy.load_state_dict(copy.deepcopy(policy).state_dict())
    assert policy.device == torch.device("cpu")


def test_act_returns_fresh_tensor(shape_meta: dict, stats: dict) -> None:
    """The batch-1 fast path returns a copy, not a view into the action queue."""
    policy = make_policy("diffusion", shape_meta, stats, **TINY)
    first = policy.act({"state": torch.zeros(1, STATE_DIM)})
    kept = first.clone()
    policy.acting.queue.fill_(123.0)
    assert torch.equal(first, kept)


@pytest.mark.parametrize("backbone", ["mlp", "unet"])
def test_loss_backward(backbone: str, shape_meta: dict, stats: dict) -> None:
    cfg = {**TINY, "unet_down_dims": (16, 32), "time_embed_dim": 16} if backbone == "unet" else TINY
    policy = make_policy("diffusion", shape_meta, stats, backbone=backbone, **cfg)
    batch = {"obs": obs_window(8), "action": torch.rand(8, 16, ACTION_DIM) * 2 - 1}
    loss, info = policy.loss(batch)
    loss.backward()
    assert torch.isfinite(loss) and info["loss"] == pytest.approx(loss.item())
    assert all(p.grad is not None for p in policy.model.parameters())


class CountingSample:
    """Wraps policy.sample to count calls and record the obs windows it received."""

    def __init__(self, policy) -> None:
        self.policy, self.inner, self.calls = policy, policy.sample, []
        policy.sample = self

    def __call__(self, obs, noise=None):
        self.calls.append({k: v.clone() for k, v in obs.items()})
        return self.inner(obs, noise)


def test_act_queue_and_history_padding(shape_meta: dict, stats: dict) -> None:
    policy = make_policy("diffusion", shape_meta, stats, **TINY)
    counter = CountingSample(policy)
    policy.reset()
    obs_seq = [np.full((2, STATE_DIM), float(i), np.float32) for i in range(17)]
    actions = [policy.act({"state": o}) for o in obs_seq]
    assert isinstance(actions[0], np.ndarray) and actions[0].shape == (2, ACTION_DIM)
    assert len(counter.calls) == 3  # steps 0, 8, 16 with Ta = 8
    first = counter.calls[0]["state"]  # (B, To, D): first obs repeated (episode-start padding)
    assert torch.equal(first[:, 0], first[:, 1]) and float(first[0, 0, 0]) == 0.0
    second = counter.calls[1]["state"]
    assert float(second[0, 0, 0]) == 7.0 and float(second[0, 1, 0]) == 8.0  # history = obs t-1, t


def test_act_serves_executed_slice(shape_meta: dict, stats: dict) -> None:
    policy = make_policy("diffusion", shape_meta, stats, **TINY)
    chunk = torch.arange(16 * ACTION_DIM, dtype=torch.float32).reshape(1, 16, ACTION_DIM)
    policy.sample = lambda obs, noise=None: chunk.expand(obs["state"].shape[0], -1, -1)
    out = torch.stack([policy.act({"state": torch.zeros(1, STATE_DIM)}) for _ in range(8)], dim=1)
    torch.testing.assert_close(out, chunk[:, 1:9])  # indices To-1 .. To-1+Ta-1


def test_per_row_reset(shape_meta: dict, stats: dict) -> None:
    policy = make_policy("diffusion", shape_meta, stats, **TINY)
    counter = CountingSample(policy)
    for i in range(3):
        policy.act({"state": np.full((3, STATE_DIM), float(i), np.float32)})
    policy.reset(env_ids=[1])
    policy.act({"state": np.full((3, STATE_DIM), 10.0, np.float32)})
    assert len(counter.calls) == 2 and counter.calls[1]["state"].shape[0] == 1  # only row 1 re-planned
    assert torch.equal(
        counter.calls[1]["state"], torch.full((1, 2, STATE_DIM), 10.0)
    )  # its history restarted
    for i in range(5):
        policy.act({"state": np.full((3, STATE_DIM), 11.0 + i, np.float32)})
    # at step 8 rows 0 and 2 have served 8 actions and are re-planned together, row 1 keeps its queue
    assert len(counter.calls) == 3 and counter.calls[2]["state"].shape[0] == 2
    assert torch.equal(counter.calls[2]["state"][:, 0], torch.full((2, STATE_DIM), 14.0))
    policy.reset()
    policy.act({"state": np.zeros((5, STATE_DIM), np.float32)})  # batch size change after a full reset
    assert counter.calls[-1]["state"].shape[0] == 5


def test_deepcopy_and_config(shape_meta: dict, stats: dict) -> None:
    policy = make_policy("diffusion", shape_meta, stats, **TINY)
    policy.act({"state": np.zeros((2, STATE_DIM), np.float32)})
    ema = copy.deepcopy(policy)
    obs = obs_window(2)
    noise = torch.randn(2, *policy.noise_shape)
    assert torch.equal(ema.sample(obs, noise), policy.sample(obs, noise))
    cfg = policy.get_config()
    assert cfg["prediction_type"] == "sample" and cfg["num_inference_steps"] == 10 and cfg["horizon"] == 16
    assert policy.noise_shape == (16, ACTION_DIM)


def test_image_policy(stats: dict) -> None:
    meta = {
        "obs": {
            "state": {"shape": [STATE_DIM], "type": "low_dim"},
            "image/a": {"shape": [24, 24, 3], "type": "rgb"},
            "image/b": {"shape": [24, 24, 3], "type": "rgb"},
        },
        "action": {"shape": [ACTION_DIM]},
    }
    policy = make_policy(
        "diffusion", meta, stats, rgb_channels=(8, 16), rgb_num_kp=4, rgb_feature_dim=8, **TINY
    )
    img = torch.randint(0, 256, (2, 2, 24, 24, 3), dtype=torch.uint8)
    obs = {"state": torch.randn(2, 2, STATE_DIM), "image/a": img, "image/b": img.flip(2)}
    loss, _ = policy.loss({"obs": obs, "action": torch.zeros(2, 16, ACTION_DIM)})
    loss.backward()
    assert policy.sample(obs).shape == (2, 16, ACTION_DIM)
    act = policy.act({k: v[:, 0].numpy() for k, v in obs.items()})
    assert act.shape == (2, ACTION_DIM)


@pytest.mark.slow
def test_sampler_overhead_at_batch_1() -> None:
    """DDIM-10 sample() with the default 1M MLP costs at most 20% more than 10 bare denoiser forwards."""
    import time

    meta = {"obs": {"state": {"shape": [39], "type": "low_dim"}}, "action": {"shape": [4]}}
    st = {
        "state": {"min": -np.ones(39), "max": np.ones(39)},
        "action": {"min": -np.ones(4), "max": np.ones(4)},
    }
    policy = make_policy("diffusion", meta, st).eval()
    obs = {"state": torch.randn(1, 2, 39)}
    cond, x, t = policy.encode_obs(obs).detach(), torch.randn(1, 16, 4), torch.tensor([50])

    def forwards() -> None:
        with torch.no_grad():
            for _ in range(10):
                policy.model(x, t, cond)

    def best(fn) -> float:
        times = []
        for _ in range(7):
            t0 = time.perf_counter()
            for _ in range(30):
                fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    forwards(), policy.sample(obs)
    ratio = best(lambda: policy.sample(obs)) / best(forwards)
    assert ratio < 1.2, ratio

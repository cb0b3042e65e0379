"""Steering from pixels: the frozen base's observation embedding as the learner's observation."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch
from gymnasium import spaces

from robosteer.policies import make_policy
from robosteer.policies.rl.offline import _history, chunk_transitions
from robosteer.policies.steering.dsrl import DSRL, SAVED_BEFORE, SteeredPolicy
from robosteer.policies.steering.dsrl import DSRLConfig as CLIDefaults
from robosteer.policies.steering.embedding import (
    EMBED_KEY,
    BaseEmbedding,
    EmbeddedObsEnv,
    embed_windows,
    reads_images,
)

# The hand computations below were written for the reference's values (the defaults before the CLI's became
# them): every test builds on those, a test that means another value says so.
DSRLConfig = partial(CLIDefaults, **{**SAVED_BEFORE, "normalize_obs": True, "noise_bank": 0})

SIZE, PROPRIO, ACTION = 16, 4, 4


def pixel_base(to: int = 2) -> torch.nn.Module:
    """A tiny diffusion base on proprio + one 16 px camera (obs=pixels' inputs), random but fixed weights."""
    meta = {
        "obs": {
            "proprio": {"shape": [PROPRIO], "type": "low_dim"},
            "image/corner": {"shape": [SIZE, SIZE, 3], "type": "rgb"},
        },
        "action": {"shape": [ACTION]},
    }
    stats = {
        k: {"min": -np.ones(d), "max": np.ones(d), "mean": np.zeros(d), "std": np.ones(d)}
        for k, d in (("proprio", PROPRIO), ("action", ACTION))
    }
    torch.manual_seed(0)
    base = make_policy(
        "diffusion",
        meta,
        stats,
        n_obs_steps=to,
        horizon=8,
        n_action_steps=4,
        mlp_hidden_dim=32,
        mlp_n_blocks=1,
        num_inference_steps=2,
        rgb_channels=(8,),
        rgb_num_kp=4,
        rgb_feature_dim=6,
    )
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # non-trivial outputs, so that a wrong condition changes the chunk
        for p in base.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return base.eval()


def windows(b: int, to: int = 2, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "proprio": torch.randn(b, to, PROPRIO, generator=g),
        "image/corner": torch.randint(0, 256, (b, to, SIZE, SIZE, 3), generator=g, dtype=torch.uint8),
    }


def test_decoding_from_the_embedding_is_the_base_sampling_from_its_raw_window() -> None:
    base = pixel_base()
    emb = BaseEmbedding(base)
    obs, noise = windows(5), torch.randn(5, 8, ACTION, generator=torch.Generator().manual_seed(2))
    e = emb.embed(obs)
    assert reads_images(base.shape_meta) and set(e) == {EMBED_KEY}
    assert e[EMBED_KEY].shape == (5, 1, emb.dim) and emb.dim == 2 * (6 + PROPRIO)  # To·(CNN + proprio)
    torch.testing.assert_close(emb.sample(e, noise), base.sample(obs, noise=noise), rtol=0, atol=0)
    other = windows(5, seed=9)  # and it does depend on the window: another one decodes elsewhere
    assert not torch.allclose(emb.sample(emb.embed(other), noise), base.sample(obs, noise=noise))


def test_a_state_base_has_no_images_and_a_missing_key_is_named() -> None:
    from policy_testkit import tiny_steering_base

    assert not reads_images(tiny_steering_base().shape_meta)
    with pytest.raises(KeyError, match="missing \\['image/corner'\\]"):
        BaseEmbedding(pixel_base()).embed({"proprio": torch.zeros(1, 2, PROPRIO)})


def _demos(path: object) -> None:
    """Two proprio-only episodes (11 and 7 steps, the second unfinished)."""
    from robosteer.policies.data import DatasetWriter

    rng = np.random.default_rng(0)
    with DatasetWriter(path, {"env_name": "push-v3"}, valid_fraction=0.0) as w:
        for t_len, success in ((11, True), (7, False)):
            dones = np.zeros(t_len, dtype=np.uint8)
            dones[-1] = success
            obs = rng.normal(size=(t_len + 1, PROPRIO)).astype(np.float32)
            w.add_episode(
                obs={"proprio": obs[:-1]},
                next_obs={"proprio": obs[1:]},
                actions=rng.uniform(-1, 1, size=(t_len, ACTION)).astype(np.float32),
                rewards=rng.uniform(0, 1, size=t_len).astype(np.float32),
                dones=dones,
            )


def test_offline_transform_sees_every_state_window_once_and_is_gathered_like_the_plain_windows(
    tmp_path,
) -> None:
    """chunk_transitions(obs_transform=f) holds f of exactly the windows the plain call returns."""
    path = tmp_path / "demos.hdf5"
    _demos(path)
    calls: list[int] = []

    def f(w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:  # a window → one number per row
        calls.append(len(w["proprio"]))
        return {"score": (w["proprio"] * np.arange(1, 3)[None, :, None]).sum(axis=(1, 2))[:, None]}

    plain = chunk_transitions(path, ["proprio"], 2, 4)
    mapped = chunk_transitions(path, ["proprio"], 2, 4, obs_transform=f)
    assert calls == [12, 8]  # T + 1 windows per episode: each state's once
    for head in ("obs", "next_obs"):
        want = f({"proprio": plain[f"{head}/proprio"].numpy()})["score"]
        np.testing.assert_allclose(mapped[f"{head}/score"].numpy(), want, rtol=1e-6)
    for key in ("action", "reward", "done"):
        torch.testing.assert_close(mapped[key], plain[key])
    assert _history(np.arange(3), np.arange(3), 2).tolist() == [[0, 0], [0, 1], [1, 2]]


class _WindowEnv:
    """A batched env stand-in with To-step windows and auto-reset (``final_obs`` where rows ended)."""

    num_envs = 3
    single_action_space = spaces.Box(-1, 1, (4, ACTION))

    def __init__(self) -> None:
        self.t = 0

    def _obs(self, seed: int) -> dict[str, np.ndarray]:
        raw = {k: v.numpy() for k, v in windows(self.num_envs, seed=seed).items()}
        state = np.random.default_rng(seed).normal(size=(self.num_envs, 2, 5)).astype(np.float32)
        return {**raw, "state": state}  # the privileged state an asymmetric critic reads: not the base's

    @property
    def single_observation_space(self) -> spaces.Dict:
        return spaces.Dict({k: spaces.Box(-np.inf, np.inf, v.shape[1:]) for k, v in self._obs(0).items()})

    def reset(self, seed: int | None = None) -> dict[str, np.ndarray]:
        return self._obs(100)

    def step(self, action: np.ndarray):
        self.t += 1
        done = np.array([False, True, False])
        info = {"final_obs": self._obs(200 + self.t), "_final_obs": done}
        zeros = np.zeros(self.num_envs)
        return self._obs(self.t), zeros, done, np.zeros(3, bool), info

    def close(self) -> None:
        pass


def test_embedded_env_embeds_returned_and_final_windows() -> None:
    emb = BaseEmbedding(pixel_base())
    env = EmbeddedObsEnv(_WindowEnv(), emb)
    assert env.single_observation_space[EMBED_KEY].shape == (1, emb.dim)
    first = env.reset(seed=0)
    np.testing.assert_allclose(first[EMBED_KEY], embed_windows(emb, _WindowEnv()._obs(100)), rtol=1e-6)
    obs, _, _, _, info = env.step(np.zeros((3, 4, ACTION)))
    want_next = embed_windows(emb, _WindowEnv()._obs(1))
    want_final = embed_windows(emb, _WindowEnv()._obs(201))
    np.testing.assert_allclose(obs[EMBED_KEY], want_next, rtol=1e-5, atol=1e-6)
    final = info["final_obs"][EMBED_KEY]
    np.testing.assert_allclose(final[[0, 2]], want_next[[0, 2]], rtol=1e-5, atol=1e-6)  # rows still running
    np.testing.assert_allclose(
        final[1], want_final[1], rtol=1e-5, atol=1e-6
    )  # the finished row's last window
    # keys the base does not read pass through as they are, returned and final alike
    assert (
        env.single_observation_space["state"].shape == (2, 5)
        and "proprio" not in env.single_observation_space
    )
    np.testing.assert_array_equal(obs["state"], _WindowEnv()._obs(1)["state"])
    np.testing.assert_array_equal(info["final_obs"]["state"][1], _WindowEnv()._obs(201)["state"][1])
    np.testing.assert_array_equal(info["final_obs"]["state"][[0, 2]], obs["state"][[0, 2]])


def test_an_embedded_env_restores_the_episodes_in_flight_as_embeddings() -> None:
    """A pixel run's exact resume: the camera env replays its episodes and the embedding sees the same windows."""
    from robosteer import sim

    emb = BaseEmbedding(pixel_base())
    kw = dict(num_envs=2, obs="pixels", cameras=("corner",), image_size=SIZE, action_chunk=4, obs_history=2)
    chunks = np.random.default_rng(0).uniform(-1, 1, (3, 2, 4, ACTION)).astype(np.float32)
    with EmbeddedObsEnv(sim.make_env("reach-v3", seed=1, max_episode_steps=20, **kw), emb) as env:
        env.reset(seed=1)
        for chunk in chunks:
            want, *_ = env.step(chunk)
        states = env.episode_states()
    assert states is not None and [len(s["actions"]) for s in states] == [3, 3]
    with EmbeddedObsEnv(sim.make_env("reach-v3", seed=7, max_episode_steps=20, **kw), emb) as env:
        got = env.restore_episodes(states)
    assert got is not None and set(got) == set(want)
    for key in want:
        np.testing.assert_array_equal(got[key], want[key])
    assert EmbeddedObsEnv(_WindowEnv(), emb).episode_states() is None  # an env that cannot record them


def test_a_dsrl_actor_over_the_embedding_acts_from_raw_windows() -> None:
    """The steered policy embeds the raw window, picks a latent from the embedding, decodes from it."""
    base = pixel_base()
    emb = BaseEmbedding(base)
    agent = DSRL(emb, emb.dim, slice(1, 5), DSRLConfig(hidden=[16]), obs_keys=(EMBED_KEY,))
    with torch.no_grad():
        for p in agent.actor.parameters():
            p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(3)) * 0.5)
    obs = windows(2)
    latent, chunk = agent.act(agent.embed(obs), deterministic=True)
    want = base.sample(obs, noise=agent.to_noise(latent))[:, 1:5]  # the base itself, from the raw window
    torch.testing.assert_close(chunk, want)
    policy = agent.eval_policy()
    assert isinstance(policy, SteeredPolicy) and policy.shape_meta == base.shape_meta
    torch.testing.assert_close(policy.sample(obs)[:, 1:5], want)
    assert agent.frozen_base is base and not any(p.requires_grad for p in base.parameters())
    assert not any(k.startswith("base") for k in agent.state_dict())  # the base stays out of the checkpoint


def test_a_trainable_embedding_trains_the_denoiser_on_the_stored_embedding_and_never_the_encoder() -> None:
    """EXPO's base from pixels: its loss from the stored embedding is the base's loss from the raw window (same
    noise draws), its gradient reaches the denoiser only, and re-enabling gradients leaves the encoder frozen."""
    from robosteer.policies.steering.embedding import TrainableEmbedding

    base = pixel_base()
    emb = TrainableEmbedding(base).requires_grad_(True)
    obs = windows(6)
    action = torch.randn(6, 8, ACTION, generator=torch.Generator().manual_seed(4))
    stored = emb.embed(obs)  # {EMBED_KEY: (6, 1, G)}
    torch.manual_seed(5)
    loss, _ = emb.loss({"obs": stored, "action": action})
    base.eval()  # the raw pass's encoder in eval mode, as when the embedding was stored (centre crop)
    torch.manual_seed(5)
    want, _ = base.loss({"obs": obs, "action": action})
    torch.testing.assert_close(loss, want)
    loss.backward()
    assert all(p.grad is None and not p.requires_grad for p in base.obs_encoder.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in base.model.parameters())
    assert emb.shape_meta["obs"] == {EMBED_KEY: {"shape": [emb.dim], "type": "low_dim"}}
    with pytest.raises(ValueError, match=r"batch\['cond'\] has shape \(6, 3\), expected \(B, 20\)"):
        base.loss({"cond": torch.zeros(6, 3), "action": action})


def test_expo_over_the_embedding_acts_from_raw_windows_and_keeps_one_embedding_per_window() -> None:
    """EXPO's candidates decode from the embedding, its imitation windows hold (1, G) per state, and the eval
    policy reads the base's raw inputs."""
    from robosteer.policies.steering.embedding import TrainableEmbedding
    from robosteer.policies.steering.expo import EXPO, EXPOConfig, OTFPolicy

    base = pixel_base()
    emb = TrainableEmbedding(base)
    bc = {f"obs/{EMBED_KEY}": emb.embed(windows(4))[EMBED_KEY], "action": torch.zeros(4, 8, ACTION)}
    cfg = EXPOConfig(hidden=[16], num_samples=3, num_edits=2, batch_size=4)
    agent = EXPO(emb, emb.dim, cfg, obs_keys=(EMBED_KEY,), bc_offline=bc)
    assert agent.bc_offline.spec[f"obs/{EMBED_KEY}"][0] == (1, emb.dim)
    assert agent.update_base()["base_loss"] > 0 and int(agent.base_steps) == 1
    obs = windows(2)
    g = torch.Generator().manual_seed(6)
    samples = agent.base_samples(agent.embed(obs), agent.base_ema, g)  # (2, 3, d)
    noise = torch.randn(6, 8, ACTION, generator=torch.Generator().manual_seed(6))
    raw = {k: v.repeat_interleave(3, dim=0) for k, v in obs.items()}
    want = agent.base_ema.base.sample(raw, noise=noise)[:, agent.exec_slice].reshape(2, 3, -1)
    torch.testing.assert_close(samples, want)  # the EMA base decoding from the raw windows themselves
    policy = agent.eval_policy()
    assert isinstance(policy, OTFPolicy) and policy.shape_meta == base.shape_meta
    assert policy.sample(obs).shape == (2, 8, ACTION)


def test_expo_imitation_windows_of_the_demos_are_the_transform_of_each_whole_window(tmp_path) -> None:
    """bc_windows(obs_transform=f) (EXPO's demos from pixels: f embeds) is f of the plain windows, whole."""
    from robosteer.policies.steering.expo import bc_windows

    path = tmp_path / "demos.hdf5"
    _demos(path)

    def f(w: dict[str, np.ndarray]) -> dict[str, np.ndarray]:  # a window -> one (1, 1) row, order-sensitive
        return {"score": (w["proprio"] * np.arange(1, 3)[None, :, None]).sum(axis=(1, 2))[:, None, None]}

    plain = bc_windows(path, ["proprio"], 2, 8, 4)
    mapped = bc_windows(path, ["proprio"], 2, 8, 4, obs_transform=f)
    assert set(mapped) == {"obs/score", "action"} and mapped["obs/score"].shape == (
        len(plain["action"]),
        1,
        1,
    )
    want = f({"proprio": plain["obs/proprio"].numpy()})["score"]
    np.testing.assert_allclose(mapped["obs/score"].numpy(), want, rtol=1e-6)
    torch.testing.assert_close(mapped["action"], plain["action"])


def _own_encoder_agent(base: torch.nn.Module, **config: object) -> DSRL:
    """DSRL whose actor reads the raw windows through its own copy of the base's encoder; critics: embedding."""
    from robosteer.policies.steering.embedding import PixelEncoder

    emb = BaseEmbedding(base)
    cfg = DSRLConfig(hidden=[16], batch_size=4, **config)
    keys = tuple(base.shape_meta["obs"])
    return DSRL(emb, 0, slice(1, 5), cfg, keys, critic_keys=(EMBED_KEY,), critic_obs_dim=emb.dim,
                actor_encoder=PixelEncoder(base))  # fmt: skip


def test_an_own_encoder_starts_as_the_base_embedding_and_its_actor_acts_from_raw_windows() -> None:
    """actor_obs=encoder: the copy's output is the base's condition (eval mode: centre crop), the actor reads
    it from the raw window, the base decodes from its own embedding; the replay keeps raw keys and embedding."""
    base = pixel_base()
    agent = _own_encoder_agent(base)
    obs = windows(3)
    torch.testing.assert_close(agent.actor.encoder(obs), base.encode_obs(obs))
    assert agent.obs_dim == BaseEmbedding(base).dim and agent.obs_keys == (
        "proprio",
        "image/corner",
        EMBED_KEY,
    )
    with torch.no_grad():
        for p in agent.actor.head.parameters():
            p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(3)) * 0.5)
    latent, chunk = agent.act(agent.embed(obs), deterministic=True)
    torch.testing.assert_close(latent, agent.actor.head(base.encode_obs(obs), deterministic=True)[0])
    torch.testing.assert_close(chunk, base.sample(obs, noise=agent.to_noise(latent))[:, 1:5])
    torch.testing.assert_close(agent.eval_policy().sample(obs)[:, 1:5], chunk)
    assert agent.get_config()["actor_obs"] == "encoder"
    with pytest.raises(ValueError, match="needs the critics' inputs"):
        DSRL(BaseEmbedding(base), 0, slice(1, 5), DSRLConfig(hidden=[16]), ("proprio", "image/corner"),
             actor_encoder=agent.actor.encoder)  # fmt: skip


def test_the_actor_loss_trains_the_own_encoder_and_never_the_base() -> None:
    """One DSRL update moves the encoder copy (the actor's loss reaches it), the critics keep reading the stored
    embedding, the base's weights stay as they were, and the averaged actor averages the encoder too."""
    base = pixel_base()
    before = {k: v.clone() for k, v in base.state_dict().items()}
    agent = _own_encoder_agent(base, actor_tau=0.5)
    enc0 = [p.detach().clone() for p in agent.actor.encoder.parameters()]
    # a critic that prefers some latents, so that the actor's loss has a gradient at the zero-initialised mean
    with torch.no_grad():
        for p in agent.noise_critic.parameters():
            p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(7)))
    obs, nxt = windows(4, seed=1), windows(4, seed=2)
    batch = {
        "obs": agent.embed(obs),
        "next_obs": agent.embed(nxt),
        "action": torch.zeros(4, 4 * ACTION),
        "reward": torch.zeros(4),
        "done": torch.zeros(4),
    }
    gen = torch.Generator().manual_seed(0)
    modes: list[
        bool
    ] = []  # the encoder's mode at each pass: training (random crop) only in the gradient step
    agent.actor.encoder.register_forward_pre_hook(lambda module, _: modes.append(module.training))
    agent.update(batch, generator=gen)  # the zero-initialised mean head passes no gradient back yet
    assert modes == [
        True,
        True,
        False,
    ]  # s' (TD target), s (actor loss), then the logged deterministic latent
    assert all(torch.equal(a, p) for a, p in zip(enc0, agent.actor.encoder.parameters(), strict=True))
    enc1 = [p.detach().clone() for p in agent.actor.encoder.parameters()]
    avg1 = [p.detach().clone() for p in agent.actor_avg.encoder.parameters()]
    agent.update(batch, generator=gen)  # now the head's weights route the actor's loss into the encoder
    assert any(not torch.equal(a, p) for a, p in zip(enc1, agent.actor.encoder.parameters(), strict=True))
    assert all(torch.equal(v, base.state_dict()[k]) for k, v in before.items())
    assert not agent.actor.training  # the crop augments the gradient step only
    new = zip(avg1, agent.actor_avg.encoder.parameters(), agent.actor.encoder.parameters(), strict=True)
    for a1, avg, p in new:  # averaged actor: avg ← ½·avg + ½·trained, encoder included
        torch.testing.assert_close(avg, 0.5 * a1 + 0.5 * p.detach())


def _aux_agent(base: torch.nn.Module, **config: object) -> DSRL:
    """DSRL with its own encoder and an asymmetric critic over a privileged ``state`` window (B, 2, 3)."""
    from robosteer.policies.steering.embedding import PixelEncoder

    cfg = DSRLConfig(hidden=[16], batch_size=4, **config)
    keys = tuple(base.shape_meta["obs"])
    return DSRL(BaseEmbedding(base), 0, slice(1, 5), cfg, keys, critic_keys=("state",), critic_obs_dim=6,
                actor_encoder=PixelEncoder(base))  # fmt: skip


def _aux_batch(agent: DSRL) -> dict[str, object]:
    g = torch.Generator().manual_seed(5)
    obs, nxt = windows(4, seed=1), windows(4, seed=2)
    obs["state"] = torch.randn(4, 2, 3, generator=g) * torch.tensor([0.1, 0.02, 0.001])
    nxt["state"] = obs["state"] + 0.01
    return {
        "obs": agent.embed(obs),
        "next_obs": agent.embed(nxt),
        "action": torch.zeros(4, 4 * ACTION),
        "reward": torch.zeros(4),
        "done": torch.zeros(4),
    }


def test_encoder_aux_regresses_the_standardised_privileged_state_by_hand() -> None:
    """encoder_aux: 0.5·mean((W z + b − (s − μ)/max(σ, 0.01))²); the first batch sets μ, σ², later ones move
    them by 1%; an entry that barely moves (σ 0.001 here) is divided by the floor, not blown up."""
    agent = _aux_agent(pixel_base(), encoder_aux=1.0)
    z = torch.randn(4, agent.obs_dim, generator=torch.Generator().manual_seed(8))
    s1 = torch.tensor([[0.1, 0.2, 0.0, 0.3, 1.0, 5.0], [0.3, 0.2, 0.004, -0.1, 1.0, 3.0],
                       [0.2, 0.5, 0.0, 0.1, 1.0, 4.0], [0.0, 0.3, 0.002, 0.1, 1.0, 4.0]])  # fmt: skip
    with torch.no_grad():
        agent.aux_head.weight.copy_(torch.linspace(-1, 1, 6 * agent.obs_dim).reshape(6, -1) * 0.1)
        agent.aux_head.bias.copy_(torch.tensor([0.5, -0.5, 0.0, 1.0, 0.0, -1.0]))
    pred = z @ agent.aux_head.weight.T + agent.aux_head.bias
    mean = torch.tensor([0.15, 0.3, 0.0015, 0.1, 1.0, 4.0])
    std = torch.tensor([0.0125, 0.015, 0.00000275, 0.02, 0.0, 0.5]).sqrt()  # population variances by hand
    want = 0.5 * ((pred - (s1 - mean) / std.clamp_min(0.01)) ** 2).mean()
    torch.testing.assert_close(agent.encoder_aux_loss(z, s1), want)
    torch.testing.assert_close(agent.aux_mean, mean)
    s2 = s1 + 1.0
    agent.encoder_aux_loss(z, s2)  # same spread, mean up by one: μ moves 1% of the way, σ² stays
    torch.testing.assert_close(agent.aux_mean, mean + 0.01)
    torch.testing.assert_close(agent.aux_var, std**2)


def test_encoder_aux_alone_moves_the_own_encoder_and_needs_an_asymmetric_own_encoder() -> None:
    """The zero-initialised actor head passes no gradient to its encoder on the first update; with encoder_aux
    the auxiliary loss does (and is logged), while acting never reads the head. It needs actor_obs=encoder with
    critic_obs=state, and is never negative."""
    base = pixel_base()
    for weight, moves in ((0.0, False), (1.0, True)):
        agent = _aux_agent(base, encoder_aux=weight)
        enc0 = [p.detach().clone() for p in agent.actor.encoder.parameters()]
        stats = agent.update(_aux_batch(agent), generator=torch.Generator().manual_seed(0))
        moved = any(
            not torch.equal(a, p) for a, p in zip(enc0, agent.actor.encoder.parameters(), strict=True)
        )
        assert moved == moves and ("encoder_aux_loss" in stats) == moves
    assert _aux_agent(base).aux_head is None  # off by default
    with pytest.raises(ValueError, match="needs actor_obs=encoder and critic_obs=state"):
        DSRL(BaseEmbedding(base), 0, slice(1, 5), DSRLConfig(hidden=[16], encoder_aux=1.0), (EMBED_KEY,))
    with pytest.raises(ValueError, match=r"encoder_aux=-1\.0 must be >= 0"):
        DSRLConfig(encoder_aux=-1.0)


def test_an_embedded_env_keeps_the_raw_windows_for_an_own_encoder() -> None:
    """keep_raw: the env's returned and final observations hold the base's raw windows beside the embedding."""
    emb = BaseEmbedding(pixel_base())
    env = EmbeddedObsEnv(_WindowEnv(), emb, keep_raw=True)
    assert {"proprio", "image/corner", EMBED_KEY, "state"} == set(env.single_observation_space.spaces)
    obs, _, _, _, info = env.step(np.zeros((3, 4, ACTION)))
    raw = _WindowEnv()._obs(1)
    np.testing.assert_array_equal(obs["image/corner"], raw["image/corner"])
    np.testing.assert_array_equal(
        info["final_obs"]["image/corner"][1], _WindowEnv()._obs(201)["image/corner"][1]
    )
    assert obs["image/corner"].dtype == np.uint8

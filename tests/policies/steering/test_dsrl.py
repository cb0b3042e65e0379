"""DSRL faithfulness: frozen base, zero latent, bounds, NA wiring, and the bimodal toy."""

from __future__ import annotations

import hashlib
from functools import partial

import pytest
import torch
from torch import nn

from robosteer.policies.steering.dsrl import DSRL, SAVED_BEFORE
from robosteer.policies.steering.dsrl import DSRLConfig as CLIDefaults

# The hand computations below were written for the reference's values (the defaults before the CLI's became
# them): every test builds on those, a test that means another value says so.
DSRLConfig = partial(CLIDefaults, **{**SAVED_BEFORE, "normalize_obs": True, "noise_bank": 0})

torch.set_num_threads(1)


class SignBase(nn.Module):
    """A bimodal 1-D base policy: the action is the sign of the noise (plus a frozen linear term in obs)."""

    noise_shape = (1, 1)

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 1)
        self.calls = 0

    def sample(self, obs, noise=None):
        self.calls += 1
        assert not torch.is_grad_enabled(), "the base must be decoded without an autograd graph"
        return torch.sign(noise) + 0.0 * self.lin(obs["state"][:, -1]).unsqueeze(1)  # (B, 1, 1)


class IdentityBase(SignBase):
    """A base whose chunk is its noise: what the actor picked, unaltered."""

    def sample(self, obs, noise=None):
        return noise


def _hash(module: nn.Module) -> str:
    h = hashlib.sha256()
    for k, v in sorted(module.state_dict().items()):
        h.update(k.encode() + v.numpy().tobytes())
    return h.hexdigest()


def _batch(agent: DSRL, n: int, g: torch.Generator) -> dict:
    obs = {"state": torch.randn(n, 1, 2, generator=g)}
    latent, chunk = agent.act(obs, generator=g)
    reward = (chunk.flatten(1)[:, 0] > 0).float()  # only the positive mode is rewarded
    return {
        "obs": obs,
        "next_obs": obs,
        "reward": reward,
        "done": torch.ones(n),
        "action": chunk.flatten(1),
        "latent": latent,
    }


@pytest.mark.parametrize("variant", ["na", "sac"])
def test_toy_bimodal_learns_rewarded_mode_and_stays_in_support(variant):
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    base = SignBase()
    before = _hash(base)
    cfg = DSRLConfig(
        variant=variant,
        hidden=[32, 32],
        batch_size=64,
        noise_critic_steps=1,
        actor_lr=1e-3,
        critic_lr=1e-3,
        temperature_lr=1e-3,
        target_entropy=-2.0,
        init_temperature=0.05,
    )  # 1-D latent: keep the entropy bonus small
    agent = DSRL(base, obs_dim=2, exec_slice=slice(0, 1), config=cfg)
    data = [_batch(agent, 64, g)]
    for _ in range(600):
        data.append(_batch(agent, 8, g))
        batch = {
            k: (
                torch.cat([d[k] for d in data[-40:]])
                if k not in ("obs", "next_obs")
                else {"state": torch.cat([d[k]["state"] for d in data[-40:]])}
            )
            for k in data[0]
        }
        agent.update(batch, generator=g)
        if variant == "na":
            agent.update_noise_critic(batch["obs"], generator=g)
    obs = {"state": torch.randn(500, 1, 2, generator=g)}
    _, chunk = agent.act(obs, generator=g)
    assert set(chunk.unique().tolist()) <= {-1.0, 1.0}  # never outside the base's support
    assert (chunk > 0).float().mean() > 0.95  # the rewarded mode, stochastically
    _, det = agent.act(obs, deterministic=True)
    assert (det > 0).all()
    assert _hash(base) == before  # base weights bit-identical
    assert not any(p.requires_grad for p in base.parameters())


def test_base_not_in_any_optimizer_or_state_dict():
    base = SignBase()
    agent = DSRL(base, obs_dim=2, exec_slice=slice(0, 1), config=DSRLConfig(hidden=[16]))
    base_params = {id(p) for p in base.parameters()}
    for opt in (agent.actor_opt, agent.critic_opt, agent.noise_critic_opt, agent.temperature_opt):
        assert not base_params & {id(p) for grp in opt.param_groups for p in grp["params"]}
    assert not any(k.startswith("base") for k in agent.state_dict())


def test_zero_initialised_deterministic_actor_reproduces_base_chunk_for_zero_noise():
    class Affine(nn.Module):
        noise_shape = (4, 2)

        def sample(self, obs, noise=None):
            return 0.5 * noise + obs["state"][:, -1, :2].unsqueeze(1) + torch.arange(4.0).view(1, 4, 1)

    base = Affine()
    agent = DSRL(base, obs_dim=6, exec_slice=slice(1, 3), config=DSRLConfig(hidden=[16, 16]))
    obs = {"state": torch.randn(5, 2, 3)}
    latent, chunk = agent.act(obs, deterministic=True)
    assert torch.equal(latent, torch.zeros(5, 8))
    assert torch.equal(chunk, base.sample(obs, noise=torch.zeros(5, 4, 2))[:, 1:3])


@pytest.mark.parametrize("variant,bound", [("na", 1.0), ("sac", 1.5)])
def test_every_latent_is_inside_the_bound(variant, bound):
    agent = DSRL(
        SignBase(),
        obs_dim=2,
        exec_slice=slice(0, 1),
        config=DSRLConfig(variant=variant, latent_bound=bound, hidden=[16]),
    )
    with torch.no_grad():
        agent.actor.log_std.bias.fill_(2.0)
        agent.actor.mean.bias.fill_(5.0)
    latent, _ = agent.act({"state": torch.randn(1000, 1, 2)})
    assert latent.abs().max() < bound


def test_na_wiring_actor_gradient_only_through_noise_critic():
    agent = DSRL(SignBase(), obs_dim=2, exec_slice=slice(0, 1), config=DSRLConfig(variant="na", hidden=[16]))
    s = torch.randn(32, 2)
    loss, _ = agent.actor_loss(s, agent.temperature.alpha)
    grads_qa = torch.autograd.grad(
        loss, list(agent.critic.parameters()), allow_unused=True, retain_graph=True
    )
    grads_qw = torch.autograd.grad(loss, list(agent.noise_critic.parameters()), allow_unused=True)
    assert all(g is None for g in grads_qa)
    assert any(g is not None and g.abs().sum() > 0 for g in grads_qw)


def test_na_critic_trains_on_executed_actions_and_distills_on_gaussian_latents():
    base = SignBase()
    agent = DSRL(base, obs_dim=2, exec_slice=slice(0, 1), config=DSRLConfig(variant="na", hidden=[16]))
    seen = []
    orig = agent.critic.forward

    def spy(s, a):
        seen.append(a.detach().clone())
        return orig(s, a)

    agent.critic.forward = spy
    executed = torch.tensor([[0.25]]).repeat(16, 1)  # not a value the base can decode: a recorded action
    obs = {"state": torch.randn(16, 1, 2)}
    agent.update(
        {"obs": obs, "next_obs": obs, "reward": torch.zeros(16), "done": torch.zeros(16), "action": executed}
    )
    assert any(torch.equal(a, executed) for a in seen)  # Q^A regressed on the executed chunk
    seen.clear()
    calls = base.calls
    g = torch.Generator().manual_seed(0)
    agent.update_noise_critic(obs, generator=g)
    assert base.calls == calls + 1 and set(seen[0].unique().tolist()) <= {
        -1.0,
        1.0,
    }  # decoded N(0, I) latents
    w = torch.randn(16, 1, generator=torch.Generator().manual_seed(0))
    assert (w.abs() > 1).any()  # the distillation latents are unclipped Gaussians (reference behaviour)


def test_bad_variant_is_a_clear_error():
    with pytest.raises(ValueError, match="na"):
        DSRLConfig(variant="ppo")


@pytest.mark.parametrize("k", [1, 4])
def test_na_distillation_with_k_latents_per_state_regresses_only_the_within_state_advantage(k):
    """K > 1: B/K states × K Gaussian latents each, and per-state offsets of Q^A and Q^W do not matter."""
    base = SignBase()
    cfg = DSRLConfig(variant="na", hidden=[16], batch_size=16, noise_critic_samples=k)
    agent = DSRL(base, obs_dim=2, exec_slice=slice(0, 1), config=cfg)
    zero = sum(p.sum() for p in agent.noise_critic.parameters()) * 0.0  # keeps the optimizer step valid
    seen = []
    # Planted critics agree on the latent's effect (3·a = 3·sign(w)) but not on each state's offset.
    agent.critic.forward = lambda s, a: (3.0 * a[:, 0] + 10.0 * s[:, 0]).expand(2, -1)  # (E, B)

    def q_w(s, w):
        seen.append(s.detach().clone())
        return (3.0 * torch.sign(w[:, 0]) - 5.0 * s[:, 1] + zero).expand(2, -1)

    agent.noise_critic.forward = q_w
    obs = {"state": torch.randn(16, 1, 2, generator=torch.Generator().manual_seed(1))}
    loss = agent.update_noise_critic(obs, generator=torch.Generator().manual_seed(0))["noise_critic_loss"]
    states = seen[0].reshape(16 // k, k, 2)
    assert torch.equal(states, states[:, :1].expand_as(states))  # K copies of each state
    assert len(torch.unique(seen[0], dim=0)) == 16 // k
    if k == 1:
        assert loss > 1.0  # the reference regresses the absolute value: offsets count
    else:
        assert loss < 1e-9  # only differences between latents at a state are learned


def test_noise_critic_samples_must_divide_the_batch():
    with pytest.raises(ValueError, match=r"noise_critic_samples=3.*batch_size=16"):
        DSRLConfig(batch_size=16, noise_critic_samples=3)


def test_noise_bank_holds_exact_decodes_and_distillation_then_never_calls_the_base():
    base = SignBase()
    cfg = DSRLConfig(variant="na", hidden=[16], batch_size=16, noise_critic_samples=4, noise_bank=10)
    agent = DSRL(base, obs_dim=2, exec_slice=slice(0, 1), config=cfg)
    assert agent.update_noise_critic() == {}  # an empty bank: nothing to distil yet
    torch.manual_seed(0)
    obs = {"state": torch.randn(6, 1, 2)}
    agent.bank_states(obs)
    agent.bank_states({"state": torch.randn(6, 1, 2)})  # 12 states into 10 slots: a ring
    assert len(agent.bank) == 10 and agent.bank.data["latent"].shape == (10, 4, 1)
    w, a = agent.bank.data["latent"], agent.bank.data["executed"]
    assert torch.equal(a, torch.sign(w))  # the base's chunk for exactly the stored latent
    assert (w.abs() > 1).any()  # unclipped N(0, I) latents, as the reference's distillation draws
    calls = base.calls
    before = [p.clone() for p in agent.noise_critic.parameters()]
    agent.update_noise_critic(generator=torch.Generator().manual_seed(0))
    assert base.calls == calls  # no decode during distillation
    assert any(not torch.equal(p, q) for p, q in zip(before, agent.noise_critic.parameters(), strict=True))


def test_noise_bank_keeps_the_played_latent_beside_the_gaussian_ones():
    """observe() after explore(): the state's last bank slot is the latent the actor played and its chunk."""
    base = SignBase()
    cfg = DSRLConfig(variant="na", hidden=[16], batch_size=16, noise_critic_samples=4, noise_bank=10)
    agent = DSRL(base, obs_dim=2, exec_slice=slice(0, 1), config=cfg)
    g = torch.Generator().manual_seed(0)
    obs = {"state": torch.randn(3, 1, 2, generator=g)}
    replay = torch.Generator().set_state(g.get_state())
    taken, chunk = agent.explore(obs, g)
    agent.observe(obs, chunk, None, None, None)
    latent = agent.bank.data["latent"][:3]  # (3, K, 1)
    played, _ = agent.actor(agent.features(obs), generator=replay)
    assert torch.equal(latent[:, -1], played) and torch.equal(agent.bank.data["executed"][:3, -1], taken)
    assert torch.equal(agent.bank.data["executed"][:3], torch.sign(latent))  # every slot decodes exactly
    torch.manual_seed(0)  # the bank's Gaussian draws use the global (checkpointed) RNG
    agent.observe(obs, chunk, None, None, None)  # nothing played since: K Gaussian latents
    assert (agent.bank.data["latent"][3:6].abs() > 1).any()
    assert not torch.equal(agent.bank.data["latent"][3:6, -1], played)


def test_temperature_lr_zero_keeps_alpha_fixed_and_a_negative_one_is_refused():
    torch.manual_seed(0)
    agent = DSRL(SignBase(), 2, slice(0, 1), DSRLConfig(hidden=[16], batch_size=8, temperature_lr=0.0))
    g = torch.Generator().manual_seed(0)
    for _ in range(3):
        stats = agent.update(_batch(agent, 8, g), generator=g)
    assert stats["alpha"] == pytest.approx(1.0) and agent.temperature.alpha.item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"temperature_lr=-0.1 must be >= 0"):
        DSRLConfig(temperature_lr=-0.1)


def test_a_saved_config_drops_retired_fields_at_their_old_value_and_refuses_any_other():
    """Runs written before actor_lr_decay, backup_latent and latent were retired saved them: at the value every
    run kept they are dropped (the run loads); any other value names the field (that run cannot be rebuilt)."""
    from robosteer.policies.steering.dsrl import RETIRED, acting_config, without_retired

    saved = {"gamma": 0.9, "actor_lr_decay": "none", "backup_latent": "sampled", "latent": "full"}
    assert without_retired(saved) == {"gamma": 0.9}
    assert acting_config(saved).gamma == 0.9
    assert set(RETIRED) == {"actor_lr_decay", "backup_latent", "latent"}
    for name, other in (("actor_lr_decay", "cosine"), ("backup_latent", "mean"), ("latent", "shared")):
        with pytest.raises(ValueError, match=rf"dsrl\.{name}='{other}' is retired \(only '{RETIRED[name]}'"):
            without_retired({**saved, name: other}, where="runs/x")
    with pytest.raises(TypeError, match="latent"):
        DSRLConfig(latent="full")  # no longer a field: the library refuses it too


def test_averaged_actor_is_a_polyak_average_that_acts_where_the_run_is_judged():
    """``actor_tau``: after each actor step the averaged actor is (1 − τ)·avg + τ·trained, exactly; the
    evaluation planner acts with it, exploration and ``trained=True`` with the trained actor."""
    from robosteer.policies.steering.dsrl import LatentPlanner

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    tau = 0.25
    cfg = DSRLConfig(variant="sac", hidden=[16], batch_size=16, actor_tau=tau, actor_lr=1e-2)
    agent = DSRL(SignBase(), obs_dim=2, exec_slice=slice(0, 1), config=cfg)
    assert agent.actor_avg is not None and not any(p.requires_grad for p in agent.actor_avg.parameters())
    assert "actor_avg.mean.weight" in agent.state_dict()  # checkpointed: resume and eval see it
    for _ in range(3):
        avg_before = {k: v.clone() for k, v in agent.actor_avg.state_dict().items()}
        agent.update(_batch(agent, 16, g), generator=g)
        trained = agent.actor.state_dict()
        for k, v in agent.actor_avg.state_dict().items():
            torch.testing.assert_close(v, (1 - tau) * avg_before[k] + tau * trained[k], rtol=0, atol=1e-6)
    assert not torch.equal(agent.actor_avg.mean.weight, agent.actor.mean.weight)
    obs = {"state": torch.randn(5, 1, 2, generator=g)}
    feats = agent.features(obs)
    want_avg = agent.actor_avg(feats, deterministic=True)[0]
    want_trained = agent.actor(feats, deterministic=True)[0]
    assert not torch.allclose(want_avg, want_trained)
    object.__setattr__(agent, "base", IdentityBase())  # the chunk is the latent: the planner's actor shows
    with torch.no_grad():
        judged = LatentPlanner(agent).plan(obs, None)
        compared = LatentPlanner(agent, trained=True).plan(obs, None)
    torch.testing.assert_close(judged, want_avg.reshape(5, 1, 1))
    torch.testing.assert_close(compared, want_trained.reshape(5, 1, 1))
    explored, _ = agent.act(obs, deterministic=True)
    torch.testing.assert_close(explored, want_trained)
    with pytest.raises(ValueError, match="actor_tau"):
        DSRLConfig(actor_tau=1.5)


class NormalisedBase(SignBase):
    """A base with a normaliser for ``state`` (min -1, max 3 in dim 0; a constant dim 1), as trained policies have."""

    def __init__(self) -> None:
        super().__init__()
        from robosteer.policies.normalizer import Normalizer

        meta = {"obs": {"state": {"shape": [2]}}, "action": {"shape": [1]}}
        stats = {"state": {"min": [-1.0, 0.5], "max": [3.0, 0.5]}, "action": {"min": [-1.0], "max": [1.0]}}
        self.normalizer = Normalizer(meta, stats)


def test_actor_and_critics_read_observations_in_the_bases_normalised_range():
    """normalize_obs (the reference's DPPO wrapper): state x -> 2(x - min)/(max - min) - 1 per dim, a constant
    dim -> 0, over every step of the window; a key the base does not normalise (privileged) stays raw; off: raw."""
    obs = {"state": torch.tensor([[[1.0, 0.5], [3.0, 0.5]]]), "priv": torch.tensor([[[7.0]]])}  # (1, To=2, 2)
    on = DSRL(NormalisedBase(), obs_dim=4, exec_slice=slice(0, 1), config=DSRLConfig(hidden=[8]))
    assert on.features(obs).tolist() == [[0.0, 0.0, 1.0, 0.0]]  # (1 + 1)/4·2 − 1 = 0; 3 → 1; 0.5 const → 0
    assert on.critic_features(obs).tolist() == [[0.0, 0.0, 1.0, 0.0]]  # the critics read the same
    asym = DSRL(
        NormalisedBase(),
        4,
        slice(0, 1),
        DSRLConfig(hidden=[8]),
        ("state",),
        critic_keys=("priv",),
        critic_obs_dim=1,
    )
    assert asym.critic_features(obs).tolist() == [[7.0]] and asym.features(obs).tolist() == [
        [0.0, 0.0, 1.0, 0.0]
    ]
    off = DSRL(NormalisedBase(), 4, slice(0, 1), DSRLConfig(hidden=[8], normalize_obs=False))
    assert off.features(obs).tolist() == [[1.0, 0.5, 3.0, 0.5]]
    assert off.critic_features(obs).tolist() == [[1.0, 0.5, 3.0, 0.5]]
    plain = DSRL(
        SignBase(), obs_dim=4, exec_slice=slice(0, 1), config=DSRLConfig(hidden=[8])
    )  # no normaliser
    assert plain.features(obs).tolist() == [[1.0, 0.5, 3.0, 0.5]]


def test_a_checkpoint_saved_before_normalize_obs_acts_on_raw_observations():
    from dataclasses import asdict

    from robosteer.policies.steering.dsrl import acting_config

    saved = asdict(DSRLConfig(noise_bank=50000))
    assert acting_config(saved).normalize_obs and acting_config(saved).noise_bank == 0
    del saved["normalize_obs"]  # what every checkpoint written before the option holds
    assert not acting_config(saved).normalize_obs

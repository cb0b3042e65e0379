"""DSRL's losses and targets pinned against values computed by hand on a tiny planted case.

The planted case: a fake base with a known affine ``sample(obs, noise)``, linear critics (a subclass of
``CriticEnsemble`` that keeps its ``reduce`` and ``make_target``) whose online and target copies differ, an
actor whose mean and std are constants (zero weights, planted biases), plain SGD on the critics and the
temperature so every step is a closed-form update. Every expected value is recomputed here from those
parameters and the same generator draws, with plain tensor arithmetic: the TD target (NA and SAC, min and
mean backup, entropy backup on and off, full and shared latent, done = 0 and 1 in one batch), the critic loss
and its SGD step, the Polyak target, the actor loss (against Q^W for NA) and the temperature step; the NA
distillation (K = 1, K > 1 centred, fresh latents or the noise bank with its offline share) and the banks.
"""

from __future__ import annotations

import copy
import math
from functools import partial

import pytest
import torch
from torch import nn

from robosteer.policies.rl import CriticEnsemble
from robosteer.policies.steering.dsrl import DSRL, SAVED_BEFORE
from robosteer.policies.steering.dsrl import DSRLConfig as CLIDefaults

# The hand computations below were written for the reference's values (the defaults before the CLI's became
# them): every test builds on those, a test that means another value says so.
DSRLConfig = partial(CLIDefaults, **{**SAVED_BEFORE, "normalize_obs": True, "noise_bank": 0})

torch.set_num_threads(1)
TP, DA, TO, SD = 3, 2, 2, 2  # base horizon, action dim, obs history, state dim
EXEC = slice(1, 3)  # executed rows of the decoded chunk
OBS_DIM = TO * SD
GAMMA, TAU, LR, LR_T = 0.9, 0.2, 0.1, 0.05
ALPHA0, TARGET_ENT = 0.5, -1.5


class AffineBase(nn.Module):
    """A deterministic noise → chunk map: 0.5·noise + the last state's first Da entries + 0.1·row index."""

    noise_shape = (TP, DA)

    def sample(self, obs: dict[str, torch.Tensor], noise: torch.Tensor | None = None) -> torch.Tensor:
        assert noise is not None and noise.shape[1:] == (TP, DA)
        rows = 0.1 * torch.arange(TP, dtype=torch.float32).view(1, TP, 1)
        return 0.5 * noise + obs["state"][:, -1, :DA].unsqueeze(1) + rows


class LinearCritic(CriticEnsemble):
    """E linear heads Q_i(s, x) = s·u_i + x·v_i + c_i; ``reduce``, ``make_target`` are CriticEnsemble's own."""

    def __init__(self, obs_dim: int, action_dim: int, heads: int, seed: int) -> None:
        nn.Module.__init__(self)
        g = torch.Generator().manual_seed(seed)
        self.num_critics = heads
        self.u = nn.Parameter(0.5 * torch.randn(heads, obs_dim, generator=g))
        self.v = nn.Parameter(0.5 * torch.randn(heads, action_dim, generator=g))
        self.c = nn.Parameter(torch.randn(heads, generator=g))

    def forward(
        self, obs: torch.Tensor, action: torch.Tensor, heads: torch.Tensor | None = None
    ) -> torch.Tensor:
        return (obs.flatten(1) @ self.u.T + action.flatten(1) @ self.v.T + self.c).T  # (E, B)


def _q(params: tuple[torch.Tensor, ...], s: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Hand Q of every head (E, B) from the linear critic's (u, v, c)."""
    u, v, c = params
    return torch.stack([(s * u[i]).sum(-1) + (x * v[i]).sum(-1) + c[i] for i in range(len(c))])


def _params(critic: LinearCritic) -> tuple[torch.Tensor, ...]:
    return tuple(p.detach().clone() for p in (critic.u, critic.v, critic.c))


def _decode(state: torch.Tensor, latent: torch.Tensor) -> torch.Tensor:
    """Hand decode of the executed chunk, flattened (B, Ta·Da): the latent is the base's (Tp, Da) noise."""
    noise = latent.reshape(-1, TP, DA)
    rows = 0.1 * torch.arange(TP, dtype=torch.float32).view(1, TP, 1)
    chunk = 0.5 * noise + state[:, -1, :DA].unsqueeze(1) + rows
    return chunk[:, EXEC].flatten(1)


def _agent(variant: str = "na", **cfg_kw) -> DSRL:
    """A DSRL on the affine base with planted linear critics, a constant actor and SGD everywhere but the actor."""
    cfg = DSRLConfig(
        variant=variant,
        gamma=GAMMA,
        tau=TAU,
        hidden=[8],
        num_critics=3,
        latent_bound=1.0 if variant == "na" else 1.5,
        init_temperature=ALPHA0,
        target_entropy=TARGET_ENT,
        **{"batch_size": 4, **cfg_kw},
    )
    agent = DSRL(AffineBase(), OBS_DIM, EXEC, cfg)
    d_taken = agent.exec_dim if variant == "na" else agent.latent_dim
    agent.critic = LinearCritic(OBS_DIM, d_taken, 3, seed=1)
    agent.critic_target = LinearCritic(OBS_DIM, d_taken, 3, seed=2)  # differs from the online critic
    agent.critic_target.requires_grad_(False)
    agent.critic_opt = torch.optim.SGD(agent.critic.parameters(), lr=LR)
    if variant == "na":
        agent.noise_critic = LinearCritic(OBS_DIM, agent.latent_dim, 3, seed=3)
        agent.noise_critic_opt = torch.optim.SGD(agent.noise_critic.parameters(), lr=LR)
    agent.temperature_opt = torch.optim.SGD(agent.temperature.parameters(), lr=LR_T)
    with torch.no_grad():  # a state-independent actor: mean m, log-std ls
        agent.actor.mean.weight.zero_()
        agent.actor.mean.bias.copy_(torch.linspace(-0.6, 0.7, agent.latent_dim))
        agent.actor.log_std.weight.zero_()
        agent.actor.log_std.bias.fill_(-0.5)
    return agent


def _actor_draw(agent: DSRL, eps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Hand tanh-Gaussian sample and log-density of the unit-box action (no log M term: SB3's scoring)."""
    m = torch.linspace(-0.6, 0.7, agent.latent_dim)
    ls = torch.full((agent.latent_dim,), -0.5)
    u = m + ls.exp() * eps
    gauss = -0.5 * eps**2 - ls - 0.5 * math.log(2 * math.pi)
    logp = (gauss - torch.log(1 - torch.tanh(u) ** 2)).sum(-1)
    return agent.config.latent_bound * torch.tanh(u), logp


def _reduce(q: torch.Tensor, how: str) -> torch.Tensor:
    return q.min(dim=0).values if how == "min" else q.mean(dim=0)


def _state(n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, TO, SD, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("variant", ["na", "sac"])
@pytest.mark.parametrize("backup", ["min", "mean"])
@pytest.mark.parametrize("backup_entropy", [True, False])
def test_update_td_target_critic_actor_temperature_and_polyak_by_hand(variant, backup, backup_entropy):
    """One ``update``: y = r + (1−d)·γ·[reduce_i Q^targ_i(s', a'(w')) − α·log π(w'|s')] with a' = π_dp(s', w')
    (NA) or w' itself (SAC), the critic's 0.5·Σ_i MSE and its SGD step, the Polyak target, the actor loss
    mean(α·log π(w̃|s) − reduce_i Q_i(s, w̃)) (Q^W for NA, the just-stepped Q for SAC), the temperature step."""
    agent = _agent(variant, backup=backup, backup_entropy=backup_entropy)
    b = 4
    obs, nxt = _state(b, 10), _state(b, 11)
    reward = torch.tensor([-1.0, 0.0, -1.0, -0.5])
    done = torch.tensor([0.0, 1.0, 0.0, 0.0])  # bootstrapping on rows 0, 2, 3
    taken_dim = agent.exec_dim if variant == "na" else agent.latent_dim
    taken = torch.randn(b, taken_dim, generator=torch.Generator().manual_seed(12)).clamp(-1.4, 1.4)
    batch = {"obs": {"state": obs}, "next_obs": {"state": nxt}, "reward": reward, "done": done}
    batch["action" if variant == "na" else "latent"] = taken
    gen = torch.Generator().manual_seed(5)
    draws = torch.Generator().set_state(gen.get_state())
    online0, target0 = _params(agent.critic), _params(agent.critic_target)
    qw = _params(agent.noise_critic) if variant == "na" else None
    log_alpha0 = agent.temperature.log_alpha.item()

    stats = agent.update(batch, generator=gen)

    # --- by hand: the TD target (w' drawn first, at s'), then the actor's w̃ at s
    s, s2 = obs.flatten(1), nxt.flatten(1)
    eps2 = torch.randn(b, agent.latent_dim, generator=draws)
    eps1 = torch.randn(b, agent.latent_dim, generator=draws)
    w2, logp2 = _actor_draw(agent, eps2)
    x2 = _decode(nxt, w2) if variant == "na" else w2
    q2 = _reduce(_q(target0, s2, x2), backup)
    if backup_entropy:
        q2 = q2 - ALPHA0 * logp2
    y = reward + (1 - done) * GAMMA * q2
    assert stats["target_q"] == pytest.approx(y.mean().item(), rel=1e-5, abs=1e-5)
    q = _q(online0, s, taken)  # (E, B)
    diff = q - y
    assert stats["critic_loss"] == pytest.approx((0.5 * (diff**2).mean(1).sum()).item(), rel=1e-5)
    assert stats["q"] == pytest.approx(q.mean().item(), rel=1e-5, abs=1e-6)
    # SGD on L = 0.5 Σ_i mean_b (q_ib − y_b)²: ∂/∂u_i = mean_b diff_ib s_b, ∂/∂v_i = mean_b diff_ib x_b
    u0, v0, c0 = online0
    online1 = (u0 - LR * diff @ s / b, v0 - LR * diff @ taken / b, c0 - LR * diff.mean(1))
    for got, want in zip(_params(agent.critic)[:2], online1[:2], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    # Polyak: target ← (1 − τ)·target + τ·(the stepped online critic)
    for got, t0, o1 in zip(_params(agent.critic_target), target0, online1, strict=True):
        torch.testing.assert_close(got, (1 - TAU) * t0 + TAU * o1, rtol=1e-5, atol=1e-6)
    # the actor: against Q^W (NA, never Q^A) or the stepped Q (SAC), heads combined as the backup combines them
    w1, logp1 = _actor_draw(agent, eps1)
    q_pi = _reduce(_q(qw if variant == "na" else online1, s, w1), backup)
    assert stats["actor_loss"] == pytest.approx((ALPHA0 * logp1 - q_pi).mean().item(), rel=1e-5, abs=1e-5)
    assert stats["entropy"] == pytest.approx(-logp1.mean().item(), rel=1e-5)
    assert stats["alpha"] == pytest.approx(ALPHA0)
    # temperature: L = −mean(log α·(log π + H̄)), ∂L/∂log α = −mean(log π + H̄)
    want_log_alpha = log_alpha0 + LR_T * (logp1 + TARGET_ENT).mean().item()
    assert agent.temperature.log_alpha.item() == pytest.approx(want_log_alpha, rel=1e-5)


def test_sac_log_prob_scores_the_unit_box_latent_without_log_m():
    """DSRL-SAC with M = 1.5: log π(w) is tanh(u)'s density (SB3), not w = M·tanh(u)'s (which adds −d·log M)."""
    agent = _agent("sac")
    eps = torch.randn(6, agent.latent_dim, generator=torch.Generator().manual_seed(0))
    w, logp = agent.actor(torch.zeros(6, OBS_DIM), generator=torch.Generator().manual_seed(0))
    hand_w, hand_logp = _actor_draw(agent, eps)
    torch.testing.assert_close(w, hand_w, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(logp, hand_logp, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k", [1, 4])
def test_distillation_without_bank_by_hand(k):
    """NA distillation: w ~ N(0, I) unclipped, Q^W_i(s, w) ← Q^A_i(s, π_dp(s, w)) with the *online* Q^A, head by
    head; K > 1: the first B/K states K times each and both sides centred per state. Loss and SGD step."""
    agent = _agent("na", batch_size=8, noise_critic_samples=k)
    b = 8
    obs = _state(b, 20)
    gen = torch.Generator().manual_seed(3)
    draws = torch.Generator().set_state(gen.get_state())
    qa, qa_targ, qw = _params(agent.critic), _params(agent.critic_target), _params(agent.noise_critic)

    loss = agent.update_noise_critic({"state": obs}, generator=gen)["noise_critic_loss"]

    state = obs[::k].repeat_interleave(k, dim=0)  # (B, To, D): K consecutive copies of every K-th state
    s = state.flatten(1)
    w = torch.randn(b, agent.latent_dim, generator=draws)
    assert (w.abs() > 1).any()  # the planted draw reaches beyond the actor's ±1: clipping would show
    target = _q(qa, s, _decode(state, w))  # (E, B)
    pred = _q(qw, s, w)

    def centre_q(q: torch.Tensor) -> torch.Tensor:  # (E, B): each state's K values minus their mean
        g = q.reshape(q.shape[0], b // k, k)
        return q if k == 1 else (g - g.mean(-1, keepdim=True)).reshape(q.shape)

    def centre_rows(x: torch.Tensor) -> torch.Tensor:  # (B, D) inputs, likewise
        g = x.reshape(b // k, k, -1)
        return x if k == 1 else (g - g.mean(1, keepdim=True)).reshape(x.shape)

    diff = centre_q(pred) - centre_q(target)
    assert loss == pytest.approx((0.5 * (diff**2).mean(1).sum()).item(), rel=1e-5)
    wrong = _q(qa_targ, s, _decode(state, w))  # what the target critic would have given
    assert abs(loss - 0.5 * ((centre_q(wrong) - centre_q(pred)) ** 2).mean(1).sum().item()) > 1e-3
    # SGD: ∂L/∂v_i = mean_b diff_ib (w_b − w̄_state), ∂L/∂u_i likewise with s, ∂L/∂c_i = mean diff (0 for K>1)
    u0, v0, c0 = qw
    bias_grad = diff.mean(1) if k == 1 else torch.zeros(3)
    want = (u0 - LR * diff @ centre_rows(s) / b, v0 - LR * diff @ centre_rows(w) / b, c0 - LR * bias_grad)
    for got, exp in zip(_params(agent.noise_critic), want, strict=True):
        torch.testing.assert_close(got, exp, rtol=1e-5, atol=1e-6)


def test_bank_states_holds_hand_drawn_latents_and_the_played_one():
    """``bank_states``: K − 1 unclipped N(0, I) latents per state (then the played latent and its chunk), each
    with its exact decode; with nothing played, K Gaussian latents."""
    k = 3
    agent = _agent("na", batch_size=6, noise_critic_samples=k, noise_bank=20)
    obs = _state(4, 30)
    played_w = torch.rand(4, agent.latent_dim, generator=torch.Generator().manual_seed(1)) - 0.5
    played_a = torch.randn(4, 2, DA, generator=torch.Generator().manual_seed(2))  # any executed chunk
    gen = torch.Generator().manual_seed(7)
    draws = torch.Generator().set_state(gen.get_state())
    agent.bank_states({"state": obs}, (played_w, played_a), generator=gen)
    agent.bank_states({"state": obs}, generator=gen)

    w = torch.randn(4 * (k - 1), agent.latent_dim, generator=draws)
    state = obs.repeat_interleave(k - 1, dim=0)
    want_latent = torch.cat([w.reshape(4, k - 1, -1), played_w.reshape(4, 1, -1)], dim=1)
    want_exec = torch.cat([_decode(state, w).reshape(4, k - 1, -1), played_a.reshape(4, 1, -1)], 1)
    w_free = torch.randn(4 * k, agent.latent_dim, generator=draws)
    assert (w.abs() > 1).any() and (w_free.abs() > 1).any()
    bank = agent.bank.data
    assert len(agent.bank) == 8
    torch.testing.assert_close(bank["features"][:4], obs.flatten(1))
    torch.testing.assert_close(bank["latent"][:4], want_latent)
    torch.testing.assert_close(bank["executed"][:4], want_exec)
    torch.testing.assert_close(bank["latent"][4:8], w_free.reshape(4, k, -1))
    torch.testing.assert_close(
        bank["executed"][4:8], _decode(obs.repeat_interleave(k, 0), w_free).reshape(4, k, -1)
    )


def test_bank_offline_is_seeded_and_chunked_and_off_without_share():
    """``bank_offline``: the offline states with K latents each from a generator seeded by ``seed``, drawn
    ``chunk`` states at a time, in their own bank; share = 0 (or no online bank) banks nothing."""
    k = 2
    agent = _agent("na", batch_size=8, noise_critic_samples=k, noise_bank=16)
    obs = _state(5, 40)
    agent.bank_offline({"state": obs}, share=0.5, seed=3, chunk=2)
    assert agent.offline_share == 0.5 and len(agent.offline_bank) == 5
    gen = torch.Generator().manual_seed(3)
    for lo, hi in ((0, 2), (2, 4), (4, 5)):
        w = torch.randn((hi - lo) * k, agent.latent_dim, generator=gen)
        state = obs[lo:hi].repeat_interleave(k, dim=0)
        torch.testing.assert_close(agent.offline_bank.data["latent"][lo:hi], w.reshape(hi - lo, k, -1))
        torch.testing.assert_close(
            agent.offline_bank.data["executed"][lo:hi], _decode(state, w).reshape(hi - lo, k, -1)
        )
    torch.testing.assert_close(agent.offline_bank.data["features"], obs.flatten(1))
    assert len(agent.bank) == 0  # the online bank is untouched
    none = _agent("na", batch_size=8, noise_critic_samples=k, noise_bank=16)
    none.bank_offline({"state": obs}, share=0.0)
    no_bank = _agent("na", batch_size=8, noise_critic_samples=k)
    no_bank.bank_offline({"state": obs}, share=0.5)
    assert none.offline_bank is None and no_bank.offline_bank is None and none.offline_share == 0.0


@pytest.mark.parametrize("share", [0.5, 0.0])
def test_distillation_from_the_banks_draws_the_offline_share_by_hand(share):
    """Bank distillation: n = B/K states, round(n·share) of them from the offline bank (first) and the rest from
    the online bank, each with its banked K latents and chunks; centred loss against the online Q^A."""
    k = 2
    agent = _agent("na", batch_size=8, noise_critic_samples=k, noise_bank=16)
    on_obs, off_obs = _state(3, 50), _state(5, 51) + 10.0  # offline states are far from the online ones
    agent.bank_states({"state": on_obs}, generator=torch.Generator().manual_seed(8))
    if share:
        agent.bank_offline({"state": off_obs}, share=share, seed=4)
    gen = torch.Generator().manual_seed(9)
    draws = torch.Generator().set_state(gen.get_state())
    qa, qw = _params(agent.critic), _params(agent.noise_critic)
    seen: list[torch.Tensor] = []
    forward = agent.noise_critic.forward
    agent.noise_critic.forward = lambda s, w, heads=None: seen.append(s.clone()) or forward(s, w)

    loss = agent.update_noise_critic(generator=gen)["noise_critic_loss"]

    n = 8 // k
    n_off = round(n * share)
    assert n_off == (2 if share else 0)
    idx_on = torch.randint(0, 3, (n - n_off,), generator=draws)
    parts = [{key: v[idx_on] for key, v in agent.bank.data.items()}]
    if n_off:
        idx_off = torch.randint(0, 5, (n_off,), generator=draws)
        parts.insert(0, {key: v[idx_off] for key, v in agent.offline_bank.data.items()})
    rows = {key: torch.cat([p[key] for p in parts]) for key in parts[0]}
    s = rows["features"].repeat_interleave(k, dim=0)
    w, executed = rows["latent"].flatten(0, 1), rows["executed"].flatten(0, 1)
    assert int((seen[0][:, 0] > 5.0).sum()) == n_off * k  # exactly the offline share of the states
    torch.testing.assert_close(seen[0], s)

    def centre(x: torch.Tensor) -> torch.Tensor:
        g = x.reshape(x.shape[0], -1, k)
        return (g - g.mean(-1, keepdim=True)).reshape(x.shape)

    diff = centre(_q(qw, s, w)) - centre(_q(qa, s, executed))
    assert loss == pytest.approx((0.5 * (diff**2).mean(1).sum()).item(), rel=1e-5)


@pytest.mark.parametrize("variant", ["na", "sac"])
def test_warmup_latents_are_unclipped_for_na_and_clipped_for_sac(variant):
    """Warm-up: w ~ N(0, I) as drawn for NA, clipped to ±M (1.5) for SAC (the reference's two behaviours)."""
    agent = _agent(variant)
    w = agent.random_latent(64, torch.Generator().manual_seed(0))
    hand = torch.randn(64, agent.latent_dim, generator=torch.Generator().manual_seed(0))
    assert (hand.abs() > 1.5).any()
    torch.testing.assert_close(w, hand if variant == "na" else hand.clamp(-1.5, 1.5))


@pytest.mark.parametrize("bank", [False, True])
def test_learn_runs_n_updates_on_renamed_batches_then_the_distillation_steps(bank):
    """``learn``: n_updates ``update`` calls on sampler batches whose ``taken`` becomes ``action`` (NA), then
    ``noise_critic_steps`` distillation calls on fresh sampler obs (or on the bank: obs None)."""
    extra = {"noise_bank": 8} if bank else {}
    agent = _agent("na", noise_critic_steps=3, **extra)
    calls: list[tuple[str, object]] = []
    agent.update = lambda batch, generator=None: calls.append(("update", batch)) or {"u": 1.0}
    agent.update_noise_critic = lambda obs=None, generator=None: calls.append(("distil", obs)) or {"d": 2.0}
    sizes: list[int] = []

    def sample(n: int) -> dict:
        sizes.append(n)
        return {"obs": {"state": torch.full((n, TO, SD), float(len(sizes)))}, "taken": torch.zeros(n, 4)}

    stats = agent.learn(2, 2, sample, torch.Generator())
    assert [c[0] for c in calls] == ["update"] * 2 + ["distil"] * 3 and stats == {"u": 1.0, "d": 2.0}
    assert all("action" in c[1] and "taken" not in c[1] for c in calls[:2])
    assert sizes == [4] * (2 if bank else 5)
    for i, (_, obs) in enumerate(calls[2:]):
        assert obs is None if bank else float(obs["state"][0, 0, 0]) == 3 + i


def test_bank_with_one_latent_per_state_keeps_the_played_one():
    """K = 1 with a bank: no Gaussian draw is left per state, the bank holds exactly the played latent."""
    agent = _agent("na", batch_size=4, noise_critic_samples=1, noise_bank=10)
    obs = _state(3, 40)
    played_w = torch.rand(3, agent.latent_dim, generator=torch.Generator().manual_seed(3)) - 0.5
    played_a = torch.randn(3, 2, DA, generator=torch.Generator().manual_seed(4))
    agent.bank_states({"state": obs}, (played_w, played_a))
    torch.testing.assert_close(agent.bank.data["latent"][:3], played_w.reshape(3, 1, -1))
    torch.testing.assert_close(agent.bank.data["executed"][:3], played_a.reshape(3, 1, -1))


def test_distillation_without_bank_keeps_the_batchs_offline_share():
    """K > 1, no bank: the B/K distilled states are every K-th row of the (offline-first) mixed batch, so a
    half-offline batch gives half-offline states, not only demonstrations."""
    k, b = 2, 8
    agent = _agent("na", batch_size=b, noise_critic_samples=k)
    offline, online = torch.full((b // 2, TO, SD), -1.0), torch.full((b // 2, TO, SD), 1.0)
    seen: list[torch.Tensor] = []

    class Spy(LinearCritic):
        def forward(self, obs, action, heads=None):
            seen.append(obs.detach().clone())
            return super().forward(obs, action, heads)

    spy = Spy(OBS_DIM, agent.latent_dim, 3, seed=3)
    agent.noise_critic = spy
    agent.noise_critic_opt = torch.optim.SGD(spy.parameters(), lr=LR)
    agent.update_noise_critic({"state": torch.cat([offline, online])}, torch.Generator().manual_seed(0))
    states = seen[0][:, 0]  # (B,) the first feature: −1 offline, +1 online
    assert (states == -1).sum() == b // 2 and (states == 1).sum() == b // 2


@pytest.mark.parametrize("variant", ["na", "sac"])
def test_asymmetric_critics_read_the_state_and_the_actor_its_own_inputs_by_hand(variant):
    """``critic_keys=("state",)``: Q^A / Q (online and target) and Q^W read the privileged state window, the
    actor (target draw, actor loss, acting) reads only its own key ``view``; the noise bank keeps the critics'
    features. The actor here depends on its input, so reading the wrong key changes every figure."""
    agent = _agent(variant, batch_size=4, noise_critic_samples=2, noise_bank=8 if variant == "na" else 0)
    view_dim = (
        SD  # the actor's window as wide as the state's: a mixed-up key computes, and is caught by value
    )
    asym = DSRL(AffineBase(), TO * view_dim, EXEC, agent.config, ("view",), "cpu", ("state",), OBS_DIM)
    asym.critic, asym.critic_target, asym.critic_opt = agent.critic, agent.critic_target, agent.critic_opt
    if variant == "na":
        asym.noise_critic, asym.noise_critic_opt = agent.noise_critic, agent.noise_critic_opt
    asym.temperature_opt = torch.optim.SGD(asym.temperature.parameters(), lr=LR_T)
    with torch.no_grad():  # an actor that reads its input: mean = P·view + m
        asym.actor.mean.weight.copy_(
            torch.randn(asym.actor.mean.weight.shape, generator=torch.Generator().manual_seed(4))
        )
    assert asym.obs_keys == ("view", "state") and asym.asymmetric  # the replay keeps both
    assert asym.get_config()["obs_keys"] == ["view"] and asym.get_config()["critic_keys"] == ["state"]
    b = 4
    obs, nxt = _state(b, 10), _state(b, 11)
    view = torch.randn(b, TO, view_dim, generator=torch.Generator().manual_seed(20))
    view2 = torch.randn(b, TO, view_dim, generator=torch.Generator().manual_seed(21))
    reward, done = torch.tensor([-1.0, 0.0, -1.0, -0.5]), torch.tensor([0.0, 1.0, 0.0, 0.0])
    taken = torch.randn(b, asym.taken_dim, generator=torch.Generator().manual_seed(12)).clamp(-1.4, 1.4)
    batch = {"obs": {"state": obs, "view": view}, "next_obs": {"state": nxt, "view": view2}}
    batch.update(reward=reward, done=done, **{"action" if variant == "na" else "latent": taken})
    gen = torch.Generator().manual_seed(5)
    draws = torch.Generator().set_state(gen.get_state())
    online0, target0 = _params(asym.critic), _params(asym.critic_target)
    qw = _params(asym.noise_critic) if variant == "na" else None
    actor0 = copy.deepcopy(asym.actor)

    stats = asym.update(batch, generator=gen)

    s, s2 = obs.flatten(1), nxt.flatten(1)  # the critics' features
    with torch.no_grad():  # the actor as it was, on its own input
        w2, logp2 = actor0(view2.flatten(1), generator=draws)
        w1, logp1 = actor0(view.flatten(1), generator=draws)
    x2 = _decode(nxt, w2) if variant == "na" else w2
    y = reward + (1 - done) * GAMMA * (_q(target0, s2, x2).min(0).values - ALPHA0 * logp2)
    assert stats["target_q"] == pytest.approx(y.mean().item(), rel=1e-5, abs=1e-5)
    q = _q(online0, s, taken)
    assert stats["critic_loss"] == pytest.approx((0.5 * ((q - y) ** 2).mean(1).sum()).item(), rel=1e-5)
    u0, v0, c0 = online0
    online1 = (u0 - LR * (q - y) @ s / b, v0 - LR * (q - y) @ taken / b, c0 - LR * (q - y).mean(1))
    q_pi = _q(qw if variant == "na" else online1, s, w1).min(0).values
    assert stats["actor_loss"] == pytest.approx((ALPHA0 * logp1 - q_pi).mean().item(), rel=1e-5, abs=1e-5)
    # acting reads the actor's key only: no state in the window
    latent, _ = asym.act({"view": view, "state": obs}, deterministic=True)
    want = asym.actor(view.flatten(1), deterministic=True)[0]  # the stepped actor
    torch.testing.assert_close(latent, want, rtol=1e-5, atol=1e-6)
    if variant == "na":  # the bank keeps the critics' features: the state window
        asym.bank_states({"state": obs, "view": view}, generator=torch.Generator().manual_seed(0))
        torch.testing.assert_close(asym.bank.data["features"][:b], s)

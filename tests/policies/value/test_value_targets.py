"""Cal-QL / CQL and IQL losses pinned against the reference formulas, computed by hand on tiny planted cases.

The reference is jaxrl_m as V-GPS runs it (``cql.py`` ``_get_cql_q_diff`` + ``critic_loss_fn``, ``sac.py``
``critic_loss_fn``, ``gc_iql.py``): TD = mean over heads and batch of (q − y)², no ½; the CQL gap enters as
α·mean over heads and batch. The hand values below use Python floats and loops only.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from robosteer.policies.value.calql import CalQL, CalQLConfig, cql_critic_loss
from robosteer.policies.value.iql import IQL, IQLConfig

E, B, N, DA = 2, 3, 2, 2  # heads, batch, cql_n_actions, action dims


def _lse(xs: list[float]) -> float:
    m = max(xs)
    return m + math.log(sum(math.exp(x - m) for x in xs))


def _hand_calql(q, y, q_rand, q_cur, q_next, lp_cur, lp_next, mc, alpha, temp, importance, da):
    """The reference critic loss, element by element (lists indexed [head][row][sample])."""
    td = sum((q[e][b] - y[b]) ** 2 for e in range(E) for b in range(B)) / (E * B)
    gaps = []
    for e in range(E):
        for b in range(B):
            cur = [max(v, mc[b]) if mc is not None else v for v in q_cur[e][b]]
            nxt = [max(v, mc[b]) if mc is not None else v for v in q_next[e][b]]
            if importance:
                xs = [v - da * math.log(0.5) for v in q_rand[e][b]]
                xs += [v - lp for v, lp in zip(cur, lp_cur[b])] + [v - lp for v, lp in zip(nxt, lp_next[b])]
            else:
                xs = [*q_rand[e][b], *cur, *nxt, q[e][b]]
                xs = [x - math.log(len(xs)) * temp for x in xs]
            gaps.append(temp * _lse([x / temp for x in xs]) - q[e][b])
    gap = sum(gaps) / len(gaps)
    return td + alpha * gap, td, gap


def _planted() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return {
        "q": torch.randn(E, B, generator=g, dtype=torch.float64),
        "y": torch.randn(B, generator=g, dtype=torch.float64),
        "q_rand": torch.randn(E, B, N, generator=g, dtype=torch.float64),
        "q_cur": torch.randn(E, B, N, generator=g, dtype=torch.float64),
        "q_next": torch.randn(E, B, N, generator=g, dtype=torch.float64),
        "lp_cur": torch.randn(B, N, generator=g, dtype=torch.float64),
        "lp_next": torch.randn(B, N, generator=g, dtype=torch.float64),
        "mc": torch.tensor([-0.5, 0.3, -2.0], dtype=torch.float64),  # binds on some policy samples, not all
    }


@pytest.mark.parametrize("use_calql", [True, False])
@pytest.mark.parametrize("importance", [True, False])
@pytest.mark.parametrize("temp", [1.0, 0.5])
def test_cql_critic_loss_matches_the_reference_formula(
    use_calql: bool, importance: bool, temp: float
) -> None:
    p = _planted()
    cfg = CalQLConfig(cql_alpha=5.0, cql_importance_sample=importance, cql_temp=temp, use_calql=use_calql)
    mc = p["mc"] if use_calql else None
    loss, td, gap, rate = cql_critic_loss(
        p["q"], p["y"], p["q_rand"], p["q_cur"], p["q_next"], p["lp_cur"], p["lp_next"], mc, DA, cfg
    )
    want, want_td, want_gap = _hand_calql(
        p["q"].tolist(),
        p["y"].tolist(),
        p["q_rand"].tolist(),
        p["q_cur"].tolist(),
        p["q_next"].tolist(),
        p["lp_cur"].tolist(),
        p["lp_next"].tolist(),
        mc.tolist() if mc is not None else None,
        5.0,
        temp,
        importance,
        DA,
    )
    assert float(td) == pytest.approx(want_td, abs=1e-6)
    assert float(gap) == pytest.approx(want_gap, abs=1e-6)
    assert float(loss) == pytest.approx(want, abs=1e-6)
    if use_calql:  # the share of policy-sample Q values the Monte-Carlo bound raised
        below = (torch.cat([p["q_cur"], p["q_next"]], -1) < p["mc"].view(1, -1, 1)).float().mean()
        assert float(rate) == pytest.approx(float(below)) and 0.0 < float(rate) < 1.0
    else:
        assert math.isnan(float(rate))


def test_the_cql_term_weighs_alpha_against_td_not_two_alpha() -> None:
    """With two heads, α·Σ_heads (the old weighting) would double the gap's weight: the ratio is pinned."""
    p = _planted()
    args = (p["q"], p["y"], p["q_rand"], p["q_cur"], p["q_next"], p["lp_cur"], p["lp_next"], None, DA)
    l1, td, gap, _ = cql_critic_loss(*args, CalQLConfig(cql_alpha=1.0, use_calql=False))
    l3, _, _, _ = cql_critic_loss(*args, CalQLConfig(cql_alpha=3.0, use_calql=False))
    assert float(l3 - l1) == pytest.approx(2.0 * float(gap), abs=1e-6)
    assert float(l1) == pytest.approx(float(td + gap), abs=1e-6)


# ----------------------------------------------------------------------------- the update's wiring
class _LinearQ(nn.Module):
    """E heads of Q(s, a) = w_e·s + v_e·a + c_e (planted weights), (B, F), (B, Da) → (E, B)."""

    def __init__(self, obs_dim: int, act_dim: int, seed: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = nn.Parameter(torch.randn(E, obs_dim, generator=g))
        self.v = nn.Parameter(torch.randn(E, act_dim, generator=g))
        self.c = nn.Parameter(torch.randn(E, generator=g))

    def forward(self, s: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return (s @ self.w.T + a @ self.v.T + self.c).T  # (E, B)


class _PlantedCritic(nn.Module):
    def __init__(self, obs_dim: int) -> None:
        super().__init__()
        self.obs_dim, self.action_steps, self.action_dim = obs_dim, 1, DA
        self.q = _LinearQ(obs_dim, DA, seed=1)
        self.q_target = _LinearQ(obs_dim, DA, seed=2)


class _PlantedActor(nn.Module):
    """Planted 'samples': a = 0.9·tanh(s·M + ½ξ), ξ ~ N(0, I) from the generator; log π = Σa − 1."""

    def __init__(self) -> None:
        super().__init__()
        self.m = nn.Parameter(torch.tensor([[0.5, -0.3], [0.2, 0.7]]))

    def forward(self, s: torch.Tensor, deterministic: bool = False, generator=None):
        xi = torch.randn(s.shape[0], DA, generator=generator)
        a = torch.tanh(s @ self.m + 0.5 * xi) * 0.9  # (B', Da)
        return a, a.sum(-1) - 1.0


@pytest.mark.parametrize("backup_entropy", [False, True])
def test_calql_update_wires_the_reference_loss(backup_entropy: bool) -> None:
    """Planted linear heads and a planted actor: the update's critic loss equals the hand value, with
    bootstrapping (done = 0 on two rows), the max backup over the n next samples, the discount, the
    Monte-Carlo bound and the importance weights all in play; with ``backup_entropy`` the backup also pays
    −α·log π of the chosen next action. Every figure the update reports is checked: the actor's loss
    α·log π − min-head Q against the critic as the critic step left it, its entropy, α before its step."""
    cfg = CalQLConfig(
        discount=0.9, cql_n_actions=N, cql_alpha=2.0, critic_warmup_steps=0, actor_warmup_steps=0,
        init_temperature=0.7, backup_entropy=backup_entropy,
    )  # fmt: skip
    learner = CalQL(_PlantedCritic(obs_dim=2), cfg)  # type: ignore[arg-type]
    learner.actor = _PlantedActor()
    s = torch.tensor([[0.1, -0.4], [0.8, 0.3], [-0.6, 0.5]])
    s2 = torch.tensor([[0.2, 0.2], [-0.3, 0.9], [0.4, -0.7]])
    a = torch.tensor([[0.5, -0.5], [0.1, 0.9], [-0.8, 0.2]])
    batch = {
        "obs": s,
        "next_obs": s2,
        "action": a,
        "reward": torch.tensor([-1.0, 0.0, -1.0]),
        "done": torch.tensor([0.0, 1.0, 0.0]),
        "mc_return": torch.tensor([-3.0, 0.0, -0.2]),
    }
    q_on, q_tg, act = learner.critic.q, learner.critic.q_target, learner.actor
    with torch.no_grad():  # the update's draws, in its order, from a copy of its generator
        g = torch.Generator().manual_seed(7)

        def samples(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # (B, n, Da), (B, n)
            a_, lp = act(x.repeat_interleave(N, dim=0), generator=g)
            return a_.reshape(B, N, DA), lp.reshape(B, N)

        a2, lp2 = samples(s2)  # backup: n samples at s', the best by the target's head-min
        q2 = torch.stack([q_tg(s2, a2[:, k]).min(0).values for k in range(N)], -1)  # (B, n)
        assert (q2.max(-1).values > q2.min(-1).values).all()  # the max backup has a choice to make
        best = q2.argmax(-1)
        backup = q2.max(-1).values - (0.7 * lp2[torch.arange(B), best] if backup_entropy else 0.0)
        y = batch["reward"] + 0.9 * (1 - batch["done"]) * backup
        a_rand = torch.rand(B, N, DA, generator=g) * 2 - 1
        a_cur, lp_cur = samples(s)
        a_next, lp_next = samples(s2)
        q = q_on(s, a)
        q_rand, q_cur, q_next = (
            torch.stack([q_on(s, x[:, k]) for k in range(N)], -1) for x in (a_rand, a_cur, a_next)
        )
        a_pi, lp_pi = act(s, generator=g)  # the actor step's draw, before the actor moves
    want, want_td, want_gap = _hand_calql(
        q.tolist(),
        y.tolist(),
        q_rand.tolist(),
        q_cur.tolist(),
        q_next.tolist(),
        lp_cur.tolist(),
        lp_next.tolist(),
        batch["mc_return"].tolist(),
        2.0,
        1.0,
        True,
        DA,
    )
    info = learner.update(batch, torch.Generator().manual_seed(7))
    assert info["td_loss"] == pytest.approx(want_td, rel=1e-6, abs=1e-6)
    assert info["critic_loss"] == pytest.approx(want, rel=1e-6, abs=1e-6)
    assert info["cql_diff"] == pytest.approx(want_gap, rel=1e-6, abs=1e-6)
    assert info["target_q"] == pytest.approx(float(y.mean()), rel=1e-6)
    assert info["q"] == pytest.approx(float(q.mean()), rel=1e-6)  # the data actions, before the critic step
    with torch.no_grad():
        q_pi = learner.critic.q(s, a_pi).min(0).values  # the critic the critic step left
    assert info["actor_loss"] == pytest.approx(float((0.7 * lp_pi - q_pi).mean()), rel=1e-6, abs=1e-6)
    assert info["entropy"] == pytest.approx(-float(lp_pi.mean()), rel=1e-6)
    assert info["alpha"] == pytest.approx(0.7)  # α as the losses used it, before its own step
    assert set(info) == {
        "critic_loss", "td_loss", "cql_diff", "calql_bound_rate", "actor_loss", "alpha", "entropy", "q", "target_q"
    }  # fmt: skip
    assert all(p.grad is None for p in learner.critic.q.parameters())  # the actor step's grads dropped


def test_calql_bound_rate_counts_policy_values_strictly_below_the_return() -> None:
    """Cal-QL's bound rate: the share of policy-action Q values (at s and s') strictly below the Monte-Carlo
    return, over heads, rows and samples; a value equal to the return is not bound."""
    q_cur = torch.tensor([[[-1.0, 0.0]], [[0.5, -2.0]]])  # (E, B=1, n=2)
    q_next = torch.tensor([[[0.0, 0.0]], [[-0.1, 3.0]]])
    zero = torch.zeros(1, 2)
    _, _, _, rate = cql_critic_loss(
        torch.zeros(2, 1), torch.zeros(1), q_cur, q_cur, q_next, zero, zero, torch.zeros(1), DA, CalQLConfig()
    )
    assert float(rate) == pytest.approx(3 / 8)  # −1, −2, −0.1 below 0; the three zeros are not
    _, _, _, none = cql_critic_loss(
        torch.zeros(2, 1), torch.zeros(1), q_cur, q_cur, q_next, zero, zero, None, DA, CalQLConfig()
    )
    assert math.isnan(float(none))  # plain CQL has no bound to report


def test_calql_draws_every_sample_from_the_callers_generator() -> None:
    """Every actor draw (backup, CQL samples, the actor's and α's steps) takes the update's generator, so a
    seeded update is reproducible whatever the global RNG holds."""
    given = []

    class Recording(_PlantedActor):
        def forward(self, s: torch.Tensor, deterministic: bool = False, generator=None):
            given.append(generator)
            return super().forward(s, deterministic, generator)

    learner = CalQL(_PlantedCritic(obs_dim=2), CalQLConfig(cql_n_actions=N))  # type: ignore[arg-type]
    learner.actor = Recording()
    batch = {"obs": torch.zeros(B, 2), "next_obs": torch.ones(B, 2), "action": torch.zeros(B, DA)}
    batch |= {"reward": torch.zeros(B), "done": torch.zeros(B), "mc_return": torch.zeros(B)}
    g = torch.Generator().manual_seed(0)
    learner.update(batch, g)
    assert len(given) == 5 and all(x is g for x in given)  # backup, CQL at s and s', actor, α


def test_calql_temperature_tracks_the_entropy_at_the_next_state() -> None:
    """α's loss reads log π of fresh actions at s' (jaxrl_m ``temperature_loss_fn``), not at s."""
    cfg = CalQLConfig(cql_n_actions=N, temperature_lr=0.1, init_temperature=1.0, target_entropy=0.0)
    learner = CalQL(_PlantedCritic(obs_dim=2), cfg)  # type: ignore[arg-type]
    learner.actor = _PlantedActor()
    s = torch.zeros(B, 2)  # log π(s) = −1 < 0: α would fall ...
    s2 = torch.full((B, 2), 3.0)  # ... log π(s') = 0.9·(tanh(2.1)+tanh(1.2))−1 > 0: α must rise
    batch = {
        "obs": s,
        "next_obs": s2,
        "action": torch.zeros(B, DA),
        "reward": torch.zeros(B),
        "done": torch.zeros(B),
        "mc_return": torch.zeros(B),
    }
    before = float(learner.temperature.log_alpha)
    learner.update(batch, torch.Generator().manual_seed(0))
    assert float(learner.temperature.log_alpha) > before


def test_iql_update_matches_the_hand_computed_losses() -> None:
    """V regresses by expectile onto the *target* critic's min at (s, a); Q regresses onto
    r + γ·(1 − done)·V_target(s'), mean over heads and batch, no ½ (jaxrl_m ``gc_iql``)."""
    torch.manual_seed(0)
    cfg = IQLConfig(discount=0.9, expectile=0.7, hidden=[4], warmup_steps=0, tau=0.5)
    learner = IQL(_PlantedCritic(obs_dim=2), cfg)  # type: ignore[arg-type]
    with torch.no_grad():  # the online V moves away from its target: the TD target must read the target
        for p in learner.value.parameters():
            p.add_(0.3)
    s = torch.tensor([[0.1, -0.4], [0.8, 0.3], [-0.6, 0.5]])
    s2 = torch.tensor([[0.2, 0.2], [-0.3, 0.9], [0.4, -0.7]])
    a = torch.tensor([[0.5, -0.5], [0.1, 0.9], [-0.8, 0.2]])
    r, done = torch.tensor([-1.0, 0.0, -1.0]), torch.tensor([0.0, 1.0, 0.0])
    with torch.no_grad():
        qt = learner.critic.q_target(s, a).min(0).values.tolist()
        v = learner.value(s).squeeze(-1).tolist()
        v2_target = learner.value_target(s2).squeeze(-1).tolist()
        q = learner.critic.q(s, a).tolist()
    diffs = [qt[b] - v[b] for b in range(B)]
    want_v = sum((0.7 if d > 0 else 0.3) * d * d for d in diffs) / B
    y = [r[b].item() + 0.9 * (1 - done[b].item()) * v2_target[b] for b in range(B)]
    want_q = sum((q[e][b] - y[b]) ** 2 for e in range(E) for b in range(B)) / (E * B)
    old_target = [p.detach().clone() for p in learner.value_target.parameters()]
    info = learner.update({"obs": s, "next_obs": s2, "action": a, "reward": r, "done": done})
    assert info["value_loss"] == pytest.approx(want_v, abs=1e-6)
    assert info["critic_loss"] == pytest.approx(want_q, abs=1e-6)
    # what it reports: Q on the data and V before their steps, the TD target
    assert info["q"] == pytest.approx(sum(map(sum, q)) / (E * B), abs=1e-6)
    assert info["v"] == pytest.approx(sum(v) / B, abs=1e-6) and info["target_q"] == pytest.approx(
        sum(y) / B, abs=1e-6
    )
    assert set(info) == {"critic_loss", "value_loss", "q", "v", "target_q"}
    # the target V moves halfway (τ = 0.5) toward the updated V
    for t, o, v in zip(
        learner.value_target.parameters(), old_target, learner.value.parameters(), strict=True
    ):
        torch.testing.assert_close(t, 0.5 * o + 0.5 * v)

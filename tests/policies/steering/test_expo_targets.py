"""EXPO's and RLPD's losses and targets pinned against values computed by hand on a tiny planted case.

The planted case: a fake base that decodes a planted table of chunks (noise ignored, plus 0.1·the last
state), different tables for the online and the EMA base; critic heads Q_i(s, a) = c_i + 0.1·Σs − ‖a − o_i‖²
with per-head optima o_i, whose online and target copies differ and which log the heads each call draws; an
edit (or RLPD) actor whose mean and std are constants (zero weights, planted biases); plain SGD where a step
is pinned. Every expected value is recomputed here from those parameters and the same generator draws, with
plain tensor arithmetic: the OTF candidates (N samples, then sampled edits of the first M scaled by β) and
argmax (min over the drawn subset of target heads), acting on the EMA base, the TD target (backup base
online / EMA / bank, chunk and single action, best-of-N, RLPD with and without the entropy backup, done = 0
and 1 in one batch), the critic loss, its SGD step and the Polyak target, the edit and RLPD actor losses
(mean over heads, replay actions), the temperature step, the base's BC step (offline share, AdamW, cosine
LR, EMA), the online BC windows (bc_online all / success) and the update cadence (policy_updates).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from robosteer.policies.rl import CriticEnsemble
from robosteer.policies.steering.expo import EXPO, EXPOConfig

torch.set_num_threads(1)
TO, TP, TA, DA, SD = 2, 4, 2, 2, 3  # obs history, base horizon, executed steps, action dim, state dim
B, N, M, E, K = 3, 3, 2, 4, 2  # states, base samples, edits, critic heads, heads in each min
BETA, GAMMA, TAU, ALPHA, LR = 0.3, 0.9, 0.2, 0.5, 0.1
_G = torch.Generator().manual_seed(123)
TABLES = {w: torch.rand(B * N, TP, DA, generator=_G) * 2 - 1 for w in ("online", "ema")}  # planted chunks
MU = torch.rand(TA * DA, generator=_G) - 0.5  # actor mean (pre-tanh), per action dim
LOG_STD = torch.rand(TA * DA, generator=_G) - 1.0  # actor log-std in [−1, 0)
CRITICS = {  # (c (E,), o (E, Ta·Da)): online and target heads differ
    w: (torch.randn(E, generator=_G), 0.5 * torch.randn(E, TA * DA, generator=_G))
    for w in ("online", "target")
}


class TableBase(nn.Module):
    """A fake deterministic base: ``sample`` decodes ``table`` (B·N planted chunks) + 0.1·the last state's
    first Da entries, whatever the noise; ``loss`` is the MSE of a learnable chunk ``mu`` to the batch's."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.zeros(B * N, TP, DA))
        self.mu = nn.Parameter(torch.zeros(TP, DA))
        self.config = SimpleNamespace(n_obs_steps=TO, n_action_steps=TA, horizon=TP)
        self.noise_shape = (TP, DA)
        self.shape_meta = {"obs": {"state": {"shape": [SD]}}, "action": {"shape": [DA]}}

    def sample(self, obs: dict[str, torch.Tensor], noise: torch.Tensor) -> torch.Tensor:
        assert noise.shape == (B * N, TP, DA) and obs["state"].shape == (B * N, TO, SD)
        return self.table + 0.1 * obs["state"][:, -1, None, :DA]

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict]:
        return ((self.mu - batch["action"]) ** 2).mean(), {}


def _q(params: tuple[torch.Tensor, torch.Tensor], s: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """Q of every head (E, R): c_i + 0.1·Σs − ‖a − o_i‖², for s (R, S), a (R, d)."""
    c, o = params
    d = a.shape[-1]
    return c[:, None] + 0.1 * s.sum(-1)[None] - ((a[None] - o[:, None, :d]) ** 2).sum(-1)


class HeadCritic(CriticEnsemble):
    """The planted heads (``subset_min``, ``make_target`` are CriticEnsemble's own); logs each call's heads."""

    def __init__(self, which: str) -> None:
        super().__init__(1, 1, hidden=[1], num_critics=E)
        c, o = CRITICS[which]
        self.c, self.o = nn.Parameter(c.clone()), nn.Parameter(o.clone())
        self.calls: list[torch.Tensor | None] = []

    def forward(
        self, obs: torch.Tensor, action: torch.Tensor, heads: torch.Tensor | None = None
    ) -> torch.Tensor:
        self.calls.append(None if heads is None else heads.clone())
        q = _q((self.c, self.o), obs.flatten(1), action.flatten(1))
        return q if heads is None else q[heads]


def _agent(policy: str = "otf", action: str = "chunk", **kw) -> EXPO:
    """The planted agent: table bases, planted critics (SGD on the online one), constant-output actor."""
    kw = {"num_edits": M, "edit_scale": BETA, "backup_entropy": policy == "sac", **kw}
    cfg = EXPOConfig(
        policy=policy, action=action, num_samples=N, gamma=GAMMA, tau=TAU, init_temperature=ALPHA,
        hidden=[8], num_critics=E, num_min_qs=K, batch_size=B, **kw,
    )  # fmt: skip
    torch.manual_seed(0)
    agent = EXPO(TableBase(), TO * SD, cfg)
    agent.base.table.copy_(TABLES["online"])
    agent.base_ema.table.copy_(TABLES["ema"])
    agent.critic = HeadCritic("online")
    agent.critic_target = HeadCritic("target").requires_grad_(False)
    agent.critic_opt = torch.optim.SGD(agent.critic.parameters(), lr=LR)
    if agent.actor is not None:
        d = agent.action_dim
        with torch.no_grad():
            for lin in (agent.actor.mean, agent.actor.log_std):
                lin.weight.zero_()
            agent.actor.mean.bias.copy_(MU[:d])
            agent.actor.log_std.bias.copy_(LOG_STD[:d])
    return agent


def _exec(action: str) -> slice:
    return slice(TO - 1, TO - 1 + (TA if action == "chunk" else 1))


def _obs(seed: int) -> dict[str, torch.Tensor]:
    return {"state": torch.randn(B, TO, SD, generator=torch.Generator().manual_seed(seed))}


def _batch(action: str, seed: int = 5) -> dict:
    """A replay batch (B = 3) with done = 0, 1, 0 and replay actions ``taken`` (B, d)."""
    d = DA * (TA if action == "chunk" else 1)
    g = torch.Generator().manual_seed(seed)
    return {
        "obs": {"state": torch.randn(B, TO, SD, generator=g)},
        "next_obs": {"state": torch.randn(B, TO, SD, generator=g)},
        "taken": torch.rand(B, d, generator=g) * 2 - 1,
        "reward": torch.tensor([-1.0, 0.5, 2.0]),
        "done": torch.tensor([0.0, 1.0, 0.0]),
    }


def _feat(obs: dict[str, torch.Tensor]) -> torch.Tensor:
    return obs["state"].flatten(1).double()


def _hand_actor(xi: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Hand tanh-Gaussian sample and log-prob for standard-normal draws xi (R, d): u = μ + σ·xi,
    a = scale·tanh(u), log π = Σ(−xi²/2 − log σ − log 2π / 2 − log(1 − tanh²u) − log scale)."""
    d = xi.shape[-1]
    mu, log_std = MU[:d].double(), LOG_STD[:d].double()
    u = mu + log_std.exp() * xi.double()
    t = torch.tanh(u)
    logp = -0.5 * xi.double() ** 2 - log_std - 0.5 * math.log(2 * math.pi) - torch.log(1 - t**2)
    return scale * t, (logp - math.log(scale)).sum(-1)


def _hand_decode(table: torch.Tensor, obs: dict[str, torch.Tensor], action: str) -> torch.Tensor:
    """The N base samples per state as MDP actions (B, N, d): executed rows of the decoded table."""
    chunks = table.double().reshape(B, N, TP, DA) + 0.1 * obs["state"][:, None, None, -1, :DA].double()
    return chunks[:, :, _exec(action)].reshape(B, N, -1)


def _hand_candidates(
    g: torch.Generator, a: torch.Tensor | None, table: torch.Tensor, obs: dict, action: str, edits: bool
) -> torch.Tensor:
    """N samples, then one sampled edit a_j + β·tanh(u_j) of each of the first M: (B, N + M, d).
    Draws as documented: base noise (B·N, Tp, Da) unless samples ``a`` are banked, then edit noise."""
    if a is None:
        torch.randn(B * N, TP, DA, generator=g)  # the base's noise, which the table base ignores
        a = _hand_decode(table, obs, action)
    a = a.double()
    if not edits:
        return a
    d = a.shape[-1]
    eps, _ = _hand_actor(torch.randn(B * M, d, generator=g), BETA)
    return torch.cat([a, a[:, :M] + eps.reshape(B, M, d)], dim=1)


def _heads(call: torch.Tensor | None) -> torch.Tensor:
    """A logged draw of heads: exactly K distinct heads of E."""
    assert call is not None, "scored by every head, not by a random subset of num_min_qs"
    assert len(call) == K and len(set(call.tolist())) == K and int(call.min()) >= 0 and int(call.max()) < E
    return call


def _hand_select(
    cands: torch.Tensor, s: torch.Tensor, heads: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Argmax over candidates (B, C, d) of the min over ``heads`` of the planted target Q."""
    b, c, d = cands.shape
    q = _q(CRITICS["target"], s.repeat_interleave(c, 0), cands.reshape(b * c, d))[heads].min(0).values
    idx = q.reshape(b, c).argmax(1)
    return cands[torch.arange(b), idx], idx


def _hand_td(agent: EXPO, batch: dict, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, a*') by hand, with the heads the target critic logged (the OTF score's, then the backup's)."""
    cfg, calls = agent.config, agent.critic_target.calls
    s2, d = _feat(batch["next_obs"]), agent.action_dim
    g = torch.Generator().manual_seed(seed)
    if cfg.policy == "sac":
        a2, logp2 = _hand_actor(torch.randn(B, d, generator=g), 1.0)
        assert len(calls) == 1
    else:
        table = TABLES["online" if cfg.backup_base == "online" else "ema"]
        cands = _hand_candidates(g, batch.get("next_base"), table, batch["next_obs"], cfg.action, cfg.edits)
        a2, _ = _hand_select(cands, s2, _heads(calls[0]))
        assert len(calls) == 2
    q2 = _q(CRITICS["target"], s2, a2)[_heads(calls[-1])].min(0).values
    if cfg.backup_entropy:
        q2 = q2 - ALPHA * logp2
    return batch["reward"].double() + GAMMA * (1 - batch["done"].double()) * q2, a2


def _close(got: torch.Tensor, want: torch.Tensor) -> None:
    torch.testing.assert_close(got.double(), want.double(), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------------ OTF
@pytest.mark.parametrize("action", ["chunk", "single"])
@pytest.mark.parametrize("edits", [True, False])
def test_candidates_are_n_table_samples_then_sampled_edits_of_the_first_m_scaled_by_beta(action, edits):
    """Candidates (B, N + M, d): the executed rows of N decoded samples, then a_j + β·tanh(μ + σ·ξ_j) for
    j < M with ξ the generator's draws after the base noise; best-of-N (β = 0): the N samples only."""
    agent = _agent(action=action, edit_scale=BETA if edits else 0.0)
    assert (agent.actor is not None) == edits
    obs = _obs(1)
    for which, base in (("online", agent.base), ("ema", agent.base_ema)):
        got = agent.candidates(obs, base, torch.Generator().manual_seed(9))
        want = _hand_candidates(torch.Generator().manual_seed(9), None, TABLES[which], obs, action, edits)
        assert got.shape == (B, N + M * edits, DA * (TA if action == "chunk" else 1))
        _close(got, want)
    if edits:
        assert (got[:, N:] - got[:, :M]).abs().max() <= BETA


def test_otf_select_is_the_argmax_of_the_min_over_a_random_subset_of_target_heads_and_acting_uses_ema():
    """select: argmax over candidates of min_{i ∈ H} Q_targ_i with H a fresh random K-subset per call (each
    drawn subset logged, checked, and used by hand); explore: that operator on the EMA base's candidates."""
    agent = _agent()
    obs, s = _obs(2), _feat(_obs(2))
    cands = _hand_candidates(torch.Generator().manual_seed(4), None, TABLES["online"], obs, "chunk", True)
    subsets, winners = set(), set()
    for seed in range(12):
        agent.critic_target.calls.clear()
        got, idx = agent.select(obs, cands.float(), torch.Generator().manual_seed(seed))
        heads = _heads(agent.critic_target.calls[-1])
        want, want_idx = _hand_select(cands, s, heads)
        _close(got, want)
        assert torch.equal(idx, want_idx)
        subsets.add(tuple(sorted(heads.tolist())))
        winners.update(want_idx.tolist())
    assert len(subsets) > 1  # a random subset, not a fixed one
    assert any(i >= N for i in winners) and any(0 < i < N for i in winners)  # edits and later samples win

    for which in ("ema", "online"):  # explore takes the EMA base; the online one would pick differently
        agent.critic_target.calls.clear()
        taken, chunk = agent.explore(obs, torch.Generator().manual_seed(6))
        g = torch.Generator().manual_seed(6)
        cands = _hand_candidates(g, None, TABLES[which], obs, "chunk", True)
        want, _ = _hand_select(cands, s, _heads(agent.critic_target.calls[0]))
        if which == "ema":
            _close(taken, want)
            _close(chunk, want.reshape(B, TA, DA))
        else:
            assert not torch.allclose(taken.double(), want, atol=1e-3)


# ---------------------------------------------------------------------------------------- TD target
@pytest.mark.parametrize(
    ("backup_base", "action", "edits"),
    [
        ("online", "chunk", True),
        ("ema", "chunk", True),
        ("bank", "chunk", True),
        ("online", "single", True),
        ("bank", "single", True),
        ("online", "chunk", False),
    ],
)
def test_otf_td_target_by_hand(backup_base, action, edits):
    """y = r + γ·(1 − done)·min_{i ∈ H'} Q_targ_i(s', a*'), a*' = OTF(s') over candidates decoded by the online
    base (online), the EMA base (ema) or taken from the banked samples (bank, no decode), no entropy term."""
    agent = _agent(action=action, backup_base=backup_base, edit_scale=BETA if edits else 0.0)
    batch = _batch(action)
    if backup_base == "bank":
        bank = torch.rand(B, N, agent.action_dim, generator=torch.Generator().manual_seed(8)) * 2 - 1
        batch["next_base"] = bank

        def refuse(*args, **kwargs):
            raise AssertionError("a banked backup must not decode")

        agent.base.sample = agent.base_ema.sample = refuse
    y, a2 = agent.td_target(batch, torch.Generator().manual_seed(3))
    want_y, want_a2 = _hand_td(agent, batch, 3)
    _close(a2, want_a2)
    _close(y, want_y)
    assert y[1] == batch["reward"][1]  # done = 1: no bootstrap
    assert (y - batch["reward"]).abs()[[0, 2]].min() > 0.1  # done = 0: a bootstrap the test can see
    if backup_base != "bank":  # the two bases' backups differ, so the test sees which base decoded
        other = "ema" if backup_base == "online" else "online"
        g = torch.Generator().manual_seed(3)
        cands = _hand_candidates(g, None, TABLES[other], batch["next_obs"], action, edits)
        other_a2, _ = _hand_select(cands, _feat(batch["next_obs"]), agent.critic_target.calls[0])
        assert not torch.allclose(other_a2, a2.double())


@pytest.mark.parametrize("backup_entropy", [True, False])
def test_rlpd_td_target_by_hand(backup_entropy):
    """RLPD: a' ~ π(·|s') (ξ the generator's first draw), y = r + γ·(1 − done)·(min_{i ∈ H} Q_targ_i(s', a')
    − α·log π(a'|s') with backup_entropy), H a random K-subset of the target heads."""
    agent = _agent(policy="sac", backup_entropy=backup_entropy)
    batch = _batch("chunk")
    y, a2 = agent.td_target(batch, torch.Generator().manual_seed(3))
    want_y, want_a2 = _hand_td(agent, batch, 3)
    _close(a2, want_a2)
    _close(y, want_y)


# ------------------------------------------------------------------------------------------ critic
@pytest.mark.parametrize(("policy", "action"), [("otf", "chunk"), ("otf", "single"), ("sac", "chunk")])
def test_critic_loss_sgd_step_and_polyak_target_by_hand(policy, action):
    """L = mean_{i, b} (Q_i(s, a_replay) − y)² over every online head; one SGD step moves c_i by
    −lr·2·mean_b(Q_i − y)/E (y carries no gradient); then target ← (1 − τ)·target + τ·online."""
    agent = _agent(policy=policy, action=action)
    batch = _batch(action)
    loss = agent.critic_loss(batch, torch.Generator().manual_seed(3))
    want_y, _ = _hand_td(agent, batch, 3)
    q = _q(CRITICS["online"], _feat(batch["obs"]), batch["taken"].double())  # (E, B)
    _close(loss, ((q - want_y) ** 2).mean())

    agent.critic_target.calls.clear()
    stats = agent.update_critic(batch, torch.Generator().manual_seed(3))
    _close(torch.tensor(stats["critic_loss"]), ((q - want_y) ** 2).mean())
    c_new = CRITICS["online"][0].double() - LR * 2 * (q - want_y).mean(1) / E
    _close(agent.critic.c, c_new)
    _close(agent.critic_target.c, (1 - TAU) * CRITICS["target"][0].double() + TAU * c_new)


# ------------------------------------------------------------------------------------------- actors
@pytest.mark.parametrize("action", ["chunk", "single"])
def test_edit_actor_loss_by_hand_on_replay_actions_and_mean_over_heads(action):
    """EXPO edit: L = mean_b(α·log π(ε|s, a) − mean_i Q_i(s, a + ε)), a = the replay action, ε = β·tanh(u)
    from the generator's first draw, log π with the tanh Jacobian and −d·log β; the actor sees (s, a)."""
    agent = _agent(action=action)
    batch = _batch(action)
    seen = []
    agent.actor.trunk.register_forward_pre_hook(lambda mod, args: seen.append(args[0].detach().clone()))
    loss, logp = agent.actor_loss(batch, torch.Generator().manual_seed(7))
    xi = torch.randn(B, agent.action_dim, generator=torch.Generator().manual_seed(7))
    eps, want_logp = _hand_actor(xi, BETA)
    a = batch["taken"].double() + eps
    q = _q(CRITICS["online"], _feat(batch["obs"]), a).mean(0)
    _close(logp, want_logp)
    _close(loss, (ALPHA * want_logp - q).mean())
    _close(seen[-1], torch.cat([_feat(batch["obs"]), batch["taken"].double()], -1))


def test_rlpd_actor_loss_by_hand():
    """RLPD: L = mean_b(α·log π(a|s) − mean_i Q_i(s, a)), a = tanh(u) ~ π(·|s) from the generator's draw."""
    agent = _agent(policy="sac")
    batch = _batch("chunk")
    loss, logp = agent.actor_loss(batch, torch.Generator().manual_seed(7))
    a, want_logp = _hand_actor(torch.randn(B, TA * DA, generator=torch.Generator().manual_seed(7)), 1.0)
    q = _q(CRITICS["online"], _feat(batch["obs"]), a).mean(0)
    _close(logp, want_logp)
    _close(loss, (ALPHA * want_logp - q).mean())


@pytest.mark.parametrize(("policy", "action"), [("otf", "chunk"), ("otf", "single"), ("sac", "chunk")])
def test_update_actor_temperature_step_by_hand(policy, action):
    """Temperature loss −log α·mean(log π + H̄), H̄ = −d/2: one SGD step (lr 1) moves log α by
    mean(log π) + H̄, with log π the actor step's; the actor step leaves no gradient on the critics."""
    agent = _agent(policy=policy, action=action)
    agent.temperature_opt = torch.optim.SGD(agent.temperature.parameters(), lr=1.0)
    d = agent.action_dim
    assert agent.temperature.target_entropy == -d / 2
    stats = agent.update_actor(_batch(action), torch.Generator().manual_seed(7))
    xi = torch.randn(B, d, generator=torch.Generator().manual_seed(7))
    _, logp = _hand_actor(xi, BETA if policy == "otf" else 1.0)
    _close(agent.temperature.log_alpha, math.log(ALPHA) + logp.mean() - d / 2)
    _close(torch.tensor(stats["entropy"]), -logp.mean())
    assert all(p.grad is None for p in agent.critic.parameters())


# -------------------------------------------------------------------------------------------- base
def test_base_bc_step_on_offline_and_online_windows_by_hand():
    """bc_batch: all demos until an online window exists, then exactly round(B·ratio) demos + online
    windows (pairs intact); update_base: the base's own loss on it, one AdamW step at the cosine LR
    (p·(1 − lr·wd) − lr·g/(|g| + 1e-8)), then EMA ← (1 − τ_b)·EMA + τ_b·base."""
    n, lr, tau_b = 8, 0.1, 0.2
    idx = torch.arange(20.0)
    demos = {  # window i: state i, actions 1 + i/100; online window i: state −1 − i, actions −1 − i/100
        "obs/state": idx.view(20, 1, 1).expand(20, TO, SD).clone(),
        "action": (1 + idx / 100).view(20, 1, 1).expand(20, TP, DA).clone(),
    }
    cfg = EXPOConfig(
        hidden=[8], num_critics=E, batch_size=n, bc_offline_ratio=0.25, base_lr=lr, base_ema=tau_b,
        base_decay_steps=10,
    )  # fmt: skip
    agent = EXPO(TableBase(), TO * SD, cfg, bc_offline=demos)
    first = agent.bc_batch(n, torch.Generator().manual_seed(0))
    assert (first["action"] > 0).all()  # no online window yet: all demonstrations
    agent.bc_online.add(**{"obs/state": -1 - demos["obs/state"], "action": -1 - (demos["action"] - 1)})
    seen = []
    loss_fn = agent.base.loss
    agent.base.loss = lambda batch: (seen.append(batch), loss_fn(batch))[1]
    g = torch.Generator().manual_seed(0)
    mu0 = torch.rand(TP, DA, generator=g) - 0.5
    with torch.no_grad():
        agent.base.mu.copy_(mu0)
        agent.base_ema.mu.fill_(0.5)
    agent.base_steps.fill_(5)  # half-way through the cosine decay: lr·0.5
    stats = agent.update_base(torch.Generator().manual_seed(1))
    act = seen[0]["action"].double()
    offline = act[:, 0, 0] > 0
    assert act.shape == (n, TP, DA) and int(offline.sum()) == round(n * 0.25)
    state = seen[0]["obs"]["state"][:, 0, 0].double()
    _close(torch.where(offline, 1 + state / 100, -1 + (state + 1) / 100), act[:, 0, 0])  # pairs intact
    _close(torch.tensor(stats["base_loss"]), ((mu0.double() - act) ** 2).mean())
    grad = 2 * (mu0.double() - act).sum(0) / act.numel()
    lr_now = lr * 0.5
    mu1 = mu0.double() * (1 - lr_now * 1e-4) - lr_now * grad / (grad.abs() + 1e-8)
    _close(agent.base.mu, mu1)
    _close(agent.base_ema.mu, (1 - tau_b) * 0.5 + tau_b * mu1)
    assert int(agent.base_steps) == 6


@pytest.mark.parametrize("action", ["chunk", "single"])
@pytest.mark.parametrize("bc_online", ["all", "success"])
def test_finished_episodes_become_the_hand_bc_windows(action, bc_online):
    """Two envs, two MDP steps each (env 0 succeeds after 1 step of its second action, env 1 times out):
    each episode gives one window per MDP step, actions t_j − (To − 1) ... + Tp − 1 clamped to the episode;
    bc_online=success keeps env 0's only."""
    agent = _agent(action=action, bc_online=bc_online)
    e = TA if action == "chunk" else 1
    g = torch.Generator().manual_seed(0)
    obs = [_obs(10), _obs(11)]
    chunks = [torch.randn(2, e, DA, generator=g) for _ in range(2)]
    steps = [np.full(2, e), np.array([1, e])]
    agent.observe(obs[0], chunks[0], steps[0], np.zeros(2, bool), np.zeros(2, bool))
    agent.observe(obs[1], chunks[1], steps[1], np.ones(2, bool), np.array([True, False]))
    want_obs, want_act = [], []
    for env in (0, 1) if bc_online == "all" else (0,):
        acts = torch.cat([chunks[0][env, : steps[0][env]], chunks[1][env, : steps[1][env]]])  # (T, Da)
        for j, t in enumerate((0, e)):
            rows = [min(max(t - (TO - 1) + k, 0), len(acts) - 1) for k in range(TP)]
            want_act.append(acts[rows])
            want_obs.append(obs[j]["state"][env])
    size = len(agent.bc_online)
    assert size == len(want_act)
    _close(agent.bc_online.data["action"][:size], torch.stack(want_act))
    _close(agent.bc_online.data["obs/state"][:size], torch.stack(want_obs))


# ------------------------------------------------------------------------------------------ cadence
@pytest.mark.parametrize(
    ("policy_updates", "n_updates", "want"),
    [
        (1, 5, "c0 c1 c2 base a2 c3 c4 base a4"),
        (2, 5, "c0 c1 c2 base a1 base a2 c3 c4 base a3 base a4"),
        (2, 1, "c0 base a0 base a0 base base"),
    ],
)
def test_learn_runs_the_hand_sequence_of_critic_base_and_edit_steps(policy_updates, n_updates, want):
    """learn(n_updates, 2 transitions): per transition its share of critic steps (the remainder to the
    first), then policy_updates × (base step, edit step on the last policy_updates minibatches)."""
    agent = _agent(policy_updates=policy_updates)
    trace: list[str] = []
    count = iter(range(100))

    def sample(batch_size):
        assert batch_size == B
        return {"id": next(count)}

    agent.update_critic = lambda batch, generator=None: trace.append(f"c{batch['id']}") or {}
    agent.update_base = lambda generator=None: trace.append("base") or {}
    agent.update_actor = lambda batch, generator=None: trace.append(f"a{batch['id']}") or {}
    agent.learn(n_updates, 2, sample, torch.Generator().manual_seed(0))
    assert " ".join(trace) == want

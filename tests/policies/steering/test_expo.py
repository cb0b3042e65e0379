"""EXPO's faithfulness tests (docs: algorithms.md §2.8): one OTF operator for acting, evaluation and the TD
target; degenerate cases; the edit bound; no Q-gradient into the base; symmetric sampling and update cadence;
and a 1-D bandit that EXPO solves and best-of-N cannot."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from policy_testkit import tiny_steering_base
from torch import nn

from robosteer import sim
from robosteer.policies.data.sequence import SequenceDataset
from robosteer.policies.rl import CriticEnsemble, ReplayBuffer, TanhGaussianActor
from robosteer.policies.steering.expo import EXPO, EXPOConfig, episode_windows, run_expo
from robosteer.policies.steering.loop import OnlineRunConfig, as_batch

torch.set_num_threads(1)
TO, TA, TP, DA, SD = 2, 4, 8, 4, 39


def _base() -> nn.Module:
    return tiny_steering_base(to=TO, tp=TP, ta=TA, state_dim=SD, action_dim=DA)


def _agent(base: nn.Module | None = None, **kw) -> EXPO:
    cfg = EXPOConfig(**{"hidden": [32, 32], "batch_size": 16, "num_samples": 4, "num_edits": 3, **kw})
    torch.manual_seed(1)
    return EXPO(base if base is not None else _base(), TO * SD, cfg)


class Planted(CriticEnsemble):
    """Q(s, a) = −‖a − a*‖² on every head."""

    def __init__(self, target: torch.Tensor, num_critics: int = 10) -> None:
        super().__init__(1, 1, hidden=[1], num_critics=num_critics)
        self.target = target

    def forward(
        self, obs: torch.Tensor, action: torch.Tensor, heads: torch.Tensor | None = None
    ) -> torch.Tensor:
        q = -((action - self.target) ** 2).sum(-1)  # (B,)
        return q.unsqueeze(0).expand(self.num_critics if heads is None else len(heads), -1)


def _obs(b: int = 3, seed: int = 0) -> dict[str, torch.Tensor]:
    rows = torch.randn(b, 1, SD, generator=torch.Generator().manual_seed(seed))
    return {"state": rows.repeat(1, TO, 1)}  # a repeated window: what act() builds from a first obs


def _expected(agent: EXPO, cands: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The argmax over candidates of the planted Q, computed independently of the agent."""
    idx = ((cands - target) ** 2).sum(-1).argmin(dim=1)  # (B,)
    return cands[torch.arange(len(cands)), idx], idx


def test_planted_critic_acting_eval_and_td_target_take_the_exact_argmax_and_an_edit_can_win():
    agent = _agent(edit_scale=0.3)
    with torch.no_grad():  # online base != EMA base, so the backup's parameter set is visible
        for p in agent.base.parameters():
            p.add_(0.05 * torch.randn_like(p))
    obs = _obs()
    n = agent.config.num_samples
    cands = agent.candidates(obs, agent.base_ema, torch.Generator().manual_seed(7))  # (B, N+M, d)
    assert cands.shape == (3, n + agent.config.num_edits, TA * DA)
    target = cands[0, n].clone()  # row 0's first edited candidate is the optimum: an edit must win there
    agent.critic_target = Planted(target)
    want, idx = _expected(agent, cands, target)
    assert idx[0] >= n

    taken, chunk = agent.explore(obs, torch.Generator().manual_seed(7))  # acting (EMA base)
    torch.testing.assert_close(taken, want, rtol=0, atol=0)
    assert chunk.shape == (3, TA, DA)

    policy = agent.eval_policy()  # evaluation: the act() machinery, global RNG
    torch.manual_seed(11)
    cands_eval = agent.candidates(obs, agent.base_ema)
    torch.manual_seed(11)
    plan = policy.planner.plan(obs, None)
    torch.testing.assert_close(
        plan[:, TO - 1 : TO - 1 + TA].flatten(1), _expected(agent, cands_eval, target)[0]
    )
    torch.manual_seed(11)
    first = policy.act({"state": obs["state"][:, 0].numpy()})  # (B, Da): first action of the chosen chunk
    np.testing.assert_array_equal(first, _expected(agent, cands_eval, target)[0][:, :DA].numpy())

    batch = {
        "next_obs": obs,
        "reward": torch.tensor([-1.0, 0.0, -1.0]),
        "done": torch.tensor([0.0, 1.0, 0.0]),
    }
    cands_td = agent.candidates(obs, agent.base, torch.Generator().manual_seed(3))  # TD target: online base
    y, a2 = agent.td_target(batch, torch.Generator().manual_seed(3))
    want_td, _ = _expected(agent, cands_td, target)
    torch.testing.assert_close(a2, want_td, rtol=0, atol=0)
    q2 = -((want_td - target) ** 2).sum(-1)  # no entropy term in the backup
    torch.testing.assert_close(y, batch["reward"] + (1 - batch["done"]) * agent.config.gamma * q2)
    assert not torch.equal(cands_td, cands)  # the online base differs from the EMA one


def test_beta_to_zero_is_best_of_n_and_one_sample_no_edit_is_the_base():
    base = _base()
    obs = _obs(4, seed=1)
    target = torch.full((TA * DA,), 0.3)
    best_of_n = _agent(base, edit_scale=0.0)
    tiny = _agent(base, edit_scale=1e-6)
    assert best_of_n.actor is None and best_of_n.label == "best-of-4"  # no edit network at all
    for a in (best_of_n, tiny):
        a.critic_target = Planted(target)
    got0, _ = best_of_n.explore(obs, torch.Generator().manual_seed(5))
    got1, _ = tiny.explore(obs, torch.Generator().manual_seed(5))
    torch.testing.assert_close(got1, got0, rtol=0, atol=1e-5)
    cands = best_of_n.candidates(obs, best_of_n.base_ema, torch.Generator().manual_seed(5))
    torch.testing.assert_close(got0, _expected(best_of_n, cands, target)[0], rtol=0, atol=0)

    single = _agent(base, num_samples=1, num_edits=0)
    _, chunk = single.explore(obs, torch.Generator().manual_seed(9))
    noise = torch.randn(4, TP, DA, generator=torch.Generator().manual_seed(9))
    want = base.sample(obs, noise=noise)[:, TO - 1 : TO - 1 + TA]
    torch.testing.assert_close(chunk, want, rtol=0, atol=0)


def test_edits_stay_within_beta_and_log_prob_carries_minus_d_log_beta():
    beta = 0.2
    agent = _agent(edit_scale=beta, num_edits=4)
    with torch.no_grad():
        agent.actor.mean.bias.fill_(5.0)  # saturate the tanh: edits pushed to the bound
    cands = agent.candidates(_obs(8), agent.base_ema, torch.Generator().manual_seed(0))
    n, m = agent.config.num_samples, agent.config.num_edits
    diff = (cands[:, n:] - cands[:, :m]).abs()
    assert diff.max() <= beta + 1e-6 and diff.max() > 0.9 * beta

    d = 6
    unit = TanhGaussianActor(3, d, hidden=[8], scale=1.0, zero_init=False)
    scaled = TanhGaussianActor(3, d, hidden=[8], scale=beta, zero_init=False)
    scaled.load_state_dict(unit.state_dict())
    s, x = torch.randn(5, 3), torch.rand(5, d) * 1.8 - 0.9
    torch.testing.assert_close(scaled.log_prob(s, beta * x), unit.log_prob(s, x) - d * np.log(beta))


def test_adjusted_entropy_target_lies_inside_the_beta_box_as_the_reference_computes_it():
    """EXPOLearner.create: −d/2, or −d/2 + d·log β with adjust_target_entropy; an explicit target wins."""
    d, beta = TA * DA, 0.05
    box_max = d * np.log(2 * beta)  # the entropy of a uniform edit on (−β, β)^d: no policy has more
    plain = _agent(edit_scale=beta).temperature.target_entropy
    adjusted = _agent(edit_scale=beta, adjust_target_entropy=True).temperature.target_entropy
    assert plain == pytest.approx(-d / 2) and plain > box_max  # unreachable: α would grow without bound
    assert adjusted == pytest.approx(-d / 2 + d * np.log(beta)) and adjusted < box_max
    assert _agent(adjust_target_entropy=True, target_entropy=-3.0).temperature.target_entropy == -3.0
    rlpd = _agent(policy="sac", backup_entropy=True, adjust_target_entropy=True)
    assert rlpd.temperature.target_entropy == pytest.approx(-d / 2)  # no β to adjust for


def _replay_batch(b: int = 16) -> dict:
    g = torch.Generator().manual_seed(2)
    obs = {"state": torch.randn(b, TO, SD, generator=g)}
    return {
        "obs": obs,
        "next_obs": {"state": torch.randn(b, TO, SD, generator=g)},
        "taken": torch.rand(b, TA * DA, generator=g) * 2 - 1,
        "reward": -torch.ones(b),
        "done": torch.zeros(b),
    }


def test_banked_backup_is_the_ema_backup_on_stored_samples_and_decodes_nothing():
    obs = _obs(4, seed=5)
    batch = {"next_obs": obs, "reward": torch.tensor([-1.0, 0.0, -1.0, -0.5]), "done": torch.zeros(4)}
    ema, bank = _agent(edit_scale=0.3, backup_base="ema"), _agent(edit_scale=0.3, backup_base="bank")
    with torch.no_grad():  # the online base differs, so a bank that decoded with it would show
        for agent in (ema, bank):
            for p in agent.base.parameters():
                p.add_(0.05 * torch.randn_like(p, generator=torch.Generator().manual_seed(0)))
    torch.testing.assert_close(bank.state_dict(), ema.state_dict(), rtol=0, atol=0)
    y_ema, a_ema = ema.td_target(batch, torch.Generator().manual_seed(3))

    g = torch.Generator().manual_seed(3)  # what the loop stores: the EMA base's samples at s'
    stored = bank.transition_extras(obs, g)
    assert stored["next_base"].shape == (4, 4, TA * DA)
    assert bank.transition_fields() == {"next_base": ((4, TA * DA), torch.float32)}
    assert ema.transition_fields() == {} and ema.transition_extras(obs, g) == {}

    def refuse(*args, **kwargs):
        raise AssertionError("a banked backup must not decode")

    for base in (bank.base, bank.base_ema):
        base.sample = refuse
    y_bank, a_bank = bank.td_target({**batch, **stored}, g)  # the same draws for edits and heads after it
    torch.testing.assert_close(a_bank, a_ema, rtol=0, atol=0)
    torch.testing.assert_close(y_bank, y_ema, rtol=0, atol=0)
    bank.update_critic(  # a whole critic step on stored samples decodes nothing either
        {**batch, **stored, "obs": obs, "taken": torch.zeros(4, TA * DA)}, g
    )
    with pytest.raises(ValueError, match=r"backup_base='bank'.*policy='sac'"):
        EXPOConfig(policy="sac", backup_entropy=True, backup_base="bank")


def _marked_offline(n: int = 30) -> dict[str, torch.Tensor]:
    """Offline transitions whose reward 7.0 no online transition carries."""
    return {
        "obs/state": torch.randn(n, TO, SD),
        "next_obs/state": torch.randn(n, TO, SD),
        "taken": torch.zeros(n, TA * DA),
        "reward": torch.full((n,), 7.0),
        "done": torch.zeros(n),
    }


def _run_reach(agent: EXPO, out, offline: dict, utd: float) -> dict:
    """64 env steps of reach-v3 (2 envs, 12-step episodes, 4 warm-up chunks), half of each batch offline."""
    run = OnlineRunConfig(
        env_steps=64, warmup_chunks=4, utd=utd, offline_ratio=0.5, eval_every=0, checkpoint_every=64,
        log_every=32, progress=False,
    )  # fmt: skip
    with sim.make_env(
        "reach-v3", num_envs=2, seed=0, action_chunk=TA, obs_history=TO, max_episode_steps=12
    ) as env:
        return run_expo(agent, env, run, str(out), offline=offline)


def test_loop_stores_banked_samples_for_online_and_offline_transitions(tmp_path):
    from robosteer.policies.steering.loop import with_extras

    cfg = EXPOConfig(
        hidden=[32, 32], batch_size=16, num_samples=3, num_edits=1, edit_scale=0.1, backup_base="bank"
    )
    agent = EXPO(_base(), TO * SD, cfg)
    offline = _marked_offline()
    want = with_extras(agent, offline, ("state",), torch.Generator().manual_seed(0 + 1), chunk=7)
    seen = []
    orig = agent.update_critic

    def critic(batch, generator=None):
        seen.append(batch)
        return orig(batch, generator)

    agent.update_critic = critic
    _run_reach(agent, tmp_path, offline, utd=1)
    assert seen
    for batch in seen:
        off = batch["reward"] == 7.0
        assert batch["next_base"].shape == (16, 3, TA * DA) and off.sum() == 8
        match = (batch["next_obs"]["state"][off, None] == offline["next_obs/state"][None]).flatten(2).all(-1)
        rows = match.float().argmax(dim=1)  # (8,): each offline row's index in ``offline``
        assert match.any(dim=1).all()
        torch.testing.assert_close(
            batch["next_base"][off], want["next_base"][rows]
        )  # decoded once, at the start
        online = batch["next_base"][~off]
        assert torch.isfinite(online).all() and online.abs().max() <= 1.0 and online.std() > 0


def test_no_gradient_from_critic_or_edit_losses_reaches_the_base():
    agent = _agent(edit_scale=0.1)
    batch = _replay_batch()
    agent.critic_loss(batch).backward()
    agent.actor_loss(batch)[0].backward()
    assert all(p.grad is None for p in agent.base.parameters())
    assert all(p.grad is None for p in agent.base_ema.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in agent.critic.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in agent.actor.parameters())

    # the base update is pure imitation: it moves the online base and the EMA base, nothing else
    windows = {"obs/state": torch.randn(20, TO, SD), "action": torch.rand(20, TP, DA) * 2 - 1}
    agent = EXPO(_base(), TO * SD, EXPOConfig(hidden=[32, 32], batch_size=8), bc_offline=windows)
    critic, ema = (
        [p.clone() for p in agent.critic.parameters()],
        [p.clone() for p in agent.base_ema.parameters()],
    )
    base = [p.clone() for p in agent.base.parameters()]
    assert "base_loss" in agent.update_base(torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(critic, agent.critic.parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(base, agent.base.parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(ema, agent.base_ema.parameters()))


def test_online_episodes_become_bc_windows_like_the_sequence_dataset(tmp_path):
    from robosteer.policies.data import DatasetWriter

    path = tmp_path / "d.hdf5"
    rng = np.random.default_rng(0)
    obs, acts = rng.normal(size=(11, SD)).astype(np.float32), rng.normal(size=(11, DA)).astype(np.float32)
    with DatasetWriter(path, {"env_name": "reach-v3"}) as w:
        w.add_episode({"state": obs}, acts, rewards=np.zeros(11), dones=np.zeros(11, bool))
    ds = SequenceDataset(path, ["state"], TO, TP, TA, split="all")
    want = ds.get_batch(np.arange(len(ds)))  # window t: obs t-To+1..t, actions t-To+1..t-To+Tp
    # the same episode seen as MDP steps of 4, 4, 3 executed actions at t = 0, 4, 8
    starts = [
        {"state": torch.from_numpy(obs[np.clip(np.arange(t - TO + 1, t + 1), 0, None)])} for t in (0, 4, 8)
    ]
    got = episode_windows(starts, [torch.from_numpy(acts[t : t + 4]) for t in (0, 4, 8)], TO - 1, TP)
    for j, t in enumerate((0, 4)):  # the dataset's windows stop at t = 7 (pad_after = Ta - 1)
        torch.testing.assert_close(got["obs/state"][j], want["obs"]["state"][t])
        torch.testing.assert_close(got["action"][j], want["action"][t])
    torch.testing.assert_close(got["action"][2], torch.from_numpy(acts[[7, 8, 9, 10, 10, 10, 10, 10]]))


@pytest.mark.parametrize("bc_online", ["all", "success"])
def test_bc_online_success_imitates_only_episodes_that_ended_in_success(bc_online):
    agent = _agent(bc_online=bc_online)
    chunk = torch.randn(2, TA, DA)  # (B, Ta, Da)
    steps, running = np.full(2, TA), np.zeros(2, bool)
    agent.observe(_obs(2), chunk, steps, running, running)  # first MDP step of both episodes
    # env 0 ends in success, env 1 times out: each episode is 2 MDP steps, so 2 windows each
    agent.observe(_obs(2, seed=1), chunk, steps, np.ones(2, bool), np.array([True, False]))
    assert len(agent.bc_online) == (2 if bc_online == "success" else 4)
    assert agent._episodes == {}  # both episodes are closed either way
    with pytest.raises(ValueError, match=r"bc_online='best'.*'success'"):
        EXPOConfig(bc_online="best")


def test_loop_samples_half_offline_and_keeps_the_update_cadence(tmp_path):
    demos = {"obs/state": torch.randn(20, TO, SD), "action": torch.full((20, TP, DA), 5.0)}  # BC marker
    cfg = EXPOConfig(hidden=[32, 32], batch_size=16, num_samples=2, num_edits=1, edit_scale=0.1)
    agent = EXPO(_base(), TO * SD, cfg, bc_offline=demos)
    calls = {"critic": 0, "base": 0, "actor": 0, "offline_share": []}
    orig = agent.update_critic, agent.update_base, agent.update_actor

    def critic(batch, generator=None):
        calls["critic"] += 1
        calls["offline_share"].append(float((batch["reward"] == 7.0).float().mean()))
        return orig[0](batch, generator)

    def base(generator=None):
        calls["base"] += 1
        return orig[1](generator)

    def actor(batch, generator=None):
        calls["actor"] += 1
        return orig[2](batch, generator)

    agent.update_critic, agent.update_base, agent.update_actor = critic, base, actor
    m = _run_reach(agent, tmp_path, _marked_offline(), utd=3)
    learned = 2 * (64 // (2 * TA) - 1)  # 8 steps of 2 envs; learning starts once the warm-up (2 steps) is in
    assert calls["critic"] == 3 * learned == m["updates"] and calls["base"] == calls["actor"] == learned
    assert set(calls["offline_share"]) == {0.5}  # exactly half of every critic minibatch
    assert len(agent.bc_online) > 0  # finished 12-step episodes became BC windows

    bc = agent.bc_batch(16, torch.Generator().manual_seed(0))  # base imitation: half demonstrations too
    assert float((bc["action"][:, 0, 0] == 5.0).float().mean()) == 0.5


def test_policy_updates_run_k_base_and_edit_steps_on_the_last_k_critic_minibatches(tmp_path):
    cfg = EXPOConfig(
        hidden=[32, 32], batch_size=16, num_samples=2, num_edits=1, edit_scale=0.1, policy_updates=2
    )
    agent = EXPO(_base(), TO * SD, cfg)
    trace: list[tuple[str, int]] = []  # ("critic" | "base" | "actor", id of the minibatch)
    orig = agent.update_critic, agent.update_base, agent.update_actor

    def critic(batch, generator=None):
        trace.append(("critic", id(batch)))
        return orig[0](batch, generator)

    def base(generator=None):
        trace.append(("base", 0))
        return orig[1](generator)

    def actor(batch, generator=None):
        trace.append(("actor", id(batch)))
        return orig[2](batch, generator)

    agent.update_critic, agent.update_base, agent.update_actor = critic, base, actor
    _run_reach(agent, tmp_path, _marked_offline(), utd=3)
    learned = 2 * (64 // (2 * TA) - 1)
    assert len(trace) == learned * (3 + 2 + 2)
    for t in range(learned):  # per transition: 3 critic steps, then (base, edit) twice on minibatches 2 and 3
        kinds = [k for k, _ in trace[7 * t : 7 * t + 7]]
        ids = [i for _, i in trace[7 * t : 7 * t + 7]]
        assert kinds == ["critic"] * 3 + ["base", "actor"] * 2
        assert ids[4] == ids[1] and ids[6] == ids[2]
    with pytest.raises(ValueError, match="policy_updates=0"):
        EXPOConfig(policy_updates=0)


class PointBase(nn.Module):
    """A 1-D base with a narrow mode: a = μ + σ·noise; ``loss`` is imitation of μ."""

    def __init__(self, mu: float = 0.0, sigma: float = 0.01) -> None:
        super().__init__()
        self.mu, self.sigma = nn.Parameter(torch.tensor(mu)), sigma
        self.config = SimpleNamespace(n_obs_steps=1, n_action_steps=1, horizon=1)
        self.noise_shape = (1, 1)
        self.shape_meta = {"obs": {"state": {"shape": [1]}}, "action": {"shape": [1]}}

    def sample(self, obs: dict, noise: torch.Tensor) -> torch.Tensor:
        return self.mu + self.sigma * noise  # (B, 1, 1)

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict]:
        return ((self.mu - batch["action"]) ** 2).mean(), {}


def _bandit(edit_scale: float, iters: int = 100, optimum: float = 0.08, width: float = 0.03) -> float:
    """Success of the acting policy after training on a bandit rewarding |a − optimum| < width only."""
    torch.manual_seed(0)
    cfg = EXPOConfig(
        hidden=[64, 64], batch_size=64, num_critics=4, num_samples=8, num_edits=8, edit_scale=edit_scale,
        critic_lr=3e-3, tau=0.05,
    )  # fmt: skip
    agent = EXPO(PointBase(), 1, cfg)
    spec = {
        "obs/state": ((1, 1), torch.float32), "next_obs/state": ((1, 1), torch.float32),
        "taken": ((1,), torch.float32), "reward": ((), torch.float32), "done": ((), torch.float32),
    }  # fmt: skip
    replay, gen = ReplayBuffer(10_000, spec), torch.Generator().manual_seed(0)
    obs = {"state": torch.zeros(32, 1, 1)}
    for _ in range(iters):
        a, _ = agent.explore(obs, gen)
        r = ((a[:, 0] - optimum).abs() < width).float()
        replay.add(
            **{"obs/state": obs["state"], "next_obs/state": obs["state"]},
            taken=a,
            reward=r,
            done=torch.ones(32),
        )
        agent.learn(2, 1, lambda b: as_batch(replay.sample(b, gen), ("state",)), gen)
    a, _ = agent.explore({"state": torch.zeros(200, 1, 1)}, gen)
    return float(((a[:, 0] - optimum).abs() < width).float().mean())


@pytest.mark.parametrize("edit_scale", [0.0, 0.15])
def test_bandit_optimum_just_outside_the_base_mode_needs_the_edits(edit_scale):
    success = _bandit(edit_scale)
    if edit_scale == 0.0:
        assert success == 0.0  # best-of-8 samples of N(0, 0.01²) never reach 0.05..0.11
    else:
        # distance 0.08 < β = 0.15: the argmax finds an edit in the window most of the time (the edits stay
        # spread over ±β: their entropy target −d/2 is above what ±β allows, so α grows, as in the reference)
        assert success > 0.5, success


def test_rlpd_and_single_step_variants_act_and_learn_and_bad_config_is_a_clear_error():
    rlpd = _agent(policy="sac", backup_entropy=True)
    assert rlpd.label == "rlpd" and rlpd.base_opt is None  # RLPD never trains the base
    single = _agent(action="single", edit_scale=0.1)
    for agent, steps in ((rlpd, TA), (single, 1)):
        taken, chunk = agent.explore(_obs(2), torch.Generator().manual_seed(0))
        assert taken.shape == (2, steps * DA) and chunk.shape == (2, steps, DA)
        if agent is single:  # single-step EXPO replans every env step
            assert agent.eval_policy().acting.n_action_steps == 1
        batch = _replay_batch()
        batch["taken"] = batch["taken"][:, : steps * DA]
        stats = agent.learn(2, 1, lambda b, batch=batch: batch, torch.Generator().manual_seed(0))
        assert {"critic_loss", "actor_loss", "alpha"} <= set(stats)
    with pytest.raises(ValueError, match="'otf'"):
        EXPOConfig(policy="otf_x")
    with pytest.raises(ValueError, match="backup_entropy"):
        EXPOConfig(policy="otf", backup_entropy=True)
    with pytest.raises(ValueError, match="num_edits"):
        EXPOConfig(num_samples=2, num_edits=3)
    with pytest.raises(ValueError, match=r"temperature_lr=-0.1 must be >= 0"):
        EXPOConfig(temperature_lr=-0.1)


@pytest.mark.parametrize(
    ("bc_online", "success", "kept"), [("all", False, 3), ("success", True, 3), ("success", False, 1)]
)
def test_a_recorded_robot_episode_becomes_bc_windows_and_a_persons_chunks_always_do(bc_online, success, kept):
    """observe_recorded_episode (a robot's episode): one BC window per executed chunk, as observe makes them
    from a simulator episode; bc_online=success keeps a failed episode's person chunks only (interventions are
    imitated whatever bc_online says)."""
    agent = _agent(bc_online=bc_online)
    obs = {"state": torch.arange(3 * TO * SD, dtype=torch.float32).reshape(3, TO, SD)}  # 3 chunk starts
    taken = torch.arange(3 * TA * DA, dtype=torch.float32).reshape(3, TA * DA) / 100  # (N, E·Da)
    person = torch.tensor([False, True, False])
    agent.observe_recorded_episode(obs, taken, success, person)
    assert len(agent.bc_online) == kept
    batch = agent.bc_online.sample(kept, torch.Generator().manual_seed(0))
    want = episode_windows(
        [{"state": obs["state"][j]} for j in range(3)],
        [taken[j].reshape(TA, DA) for j in range(3)],
        TO - 1,
        TP,
    )
    rows = {tuple(w.flatten().tolist()) for w in want["action"]}
    assert all(tuple(a.flatten().tolist()) in rows for a in batch["action"])  # each a window of the episode
    if kept == 1:  # the person's chunk alone: window 1
        assert torch.equal(batch["action"][0], want["action"][1])

"""V-GPS faithfulness: limits (K=1, β=0, β→∞), softmax(Q/β) selection frequencies (χ²), monotonicity in K
under an oracle Q, frozen weights, which action is scored, and a black-box (remote-style) policy."""

from __future__ import annotations

import itertools
import time
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import pytest
import torch
from policy_testkit import ACTION_DIM, STATE_DIM, TINY, obs_window, randomize

from robosteer.policies.checkpoint import state_dict_hash
from robosteer.policies.registry import make_policy
from robosteer.policies.rl import NormalizedCritic
from robosteer.policies.steering.vgps import VGPSPolicy, select

# χ² critical values at p = 0.001 (df = K - 1): a correct sampler fails this 1 time in 1000.
CHI2_CRIT_001 = {3: 16.266, 7: 24.322}


class Client:
    """A black-box policy like a remote client: ``sample(obs, noise)`` + ``reset()`` only.

    The chunk is the noise itself (or a seeded draw), so tests control exactly which candidates exist.
    """

    def __init__(self, horizon: int = 4, action_dim: int = 2, seed: int = 0) -> None:
        self.horizon, self.action_dim = horizon, action_dim
        self.gen = torch.Generator().manual_seed(seed)
        self.calls: list[int] = []
        self.resets = 0

    def sample(self, obs: dict, noise: torch.Tensor | None = None) -> torch.Tensor:
        b = next(iter(obs.values())).shape[0]
        self.calls.append(b)
        if noise is None:
            noise = torch.randn(b, self.horizon, self.action_dim, generator=self.gen)
        return torch.as_tensor(noise).clone()

    def reset(self) -> None:
        self.resets += 1


class PlantedQ:
    """Q(s, a) = table[round(a[..., 0, 0])]: candidate k carries the value k in its first executed action."""

    action_steps = 1

    def __init__(self, table: list[float]) -> None:
        self.table = torch.tensor(table)
        self.calls = 0

    def score(self, obs: dict, action: torch.Tensor, task_id: object = None) -> torch.Tensor:
        self.calls += 1
        return self.table[action[:, 0, 0].round().long()]


def _indexed_noise(b: int, k: int, horizon: int = 4, action_dim: int = 2) -> torch.Tensor:
    """(B, K, Tp, Da) noise whose candidate k is the constant k (so the chosen chunk reveals its index)."""
    return torch.arange(k, dtype=torch.float32).view(1, k, 1, 1).expand(b, k, horizon, action_dim).clone()


def _obs(b: int) -> dict:
    """Windows (B, 2, 3) whose rows differ (row b holds b + 0.01·step), so a row mix-up changes what is seen."""
    return {
        "state": torch.arange(b, dtype=torch.float32).view(b, 1, 1) + 0.01 * torch.arange(6.0).view(1, 2, 3)
    }


class RowClient(Client):
    """A black box whose chunk depends on the observation: candidate n is ``10·state[n, -1, 0] + noise[n]``;
    it records every observation batch it was given."""

    def __init__(self, horizon: int = 4, action_dim: int = 2) -> None:
        super().__init__(horizon, action_dim)
        self.seen: list[dict] = []

    def sample(self, obs: dict, noise: torch.Tensor | None = None) -> torch.Tensor:
        self.seen.append({k: torch.as_tensor(v).clone() for k, v in obs.items()})
        base = super().sample(obs, noise)
        return base + 10 * torch.as_tensor(obs["state"])[:, -1, 0].view(-1, 1, 1)


class RowQ:
    """Q = −(a₀ − 10·s − best[task])²: each row's best candidate is set by its own observation and task id."""

    action_steps = 1

    def __init__(self, best: list[float]) -> None:
        self.best = torch.tensor(best)
        self.seen: list[tuple] = []

    def score(self, obs: dict, action: torch.Tensor, task_id: object = None) -> torch.Tensor:
        self.seen.append((obs["state"].clone(), torch.as_tensor(task_id).clone(), action.clone()))
        goal = 10 * obs["state"][:, -1, 0] + self.best[torch.as_tensor(task_id)]
        return -((action[:, 0, 0] - goal) ** 2)


@pytest.mark.parametrize("beta", [0.0, 0.01])
def test_each_row_gets_its_own_candidates_scores_and_choice(beta: float) -> None:
    """B = 3 rows with different observations and task ids, K = 4: the policy and the critic see every row's
    observation K times in a row (candidate-major), candidate k of row b comes from noise[b, k], and row b
    executes its own best candidate (by hand: 10·b + best[task_b])."""
    b, k = 3, 4
    obs = {"state": torch.arange(b, dtype=torch.float32).view(b, 1, 1).expand(b, 1, 2).clone()}
    obs["task_id"] = torch.tensor([2, 0, 1])
    client, critic = RowClient(), RowQ([1.0, 2.0, 3.0])
    steered = VGPSPolicy(client, critic, samples=k, temperature=beta, n_obs_steps=1, n_action_steps=2)
    chosen = steered.sample(obs, _indexed_noise(b, k))
    assert chosen[:, :, 0].tolist() == [[3.0] * 4, [11.0] * 4, [22.0] * 4]  # row 0: task 2 → k = 3, ...
    (seen,) = client.seen
    assert seen["state"][:, 0, 0].tolist() == [0.0] * 4 + [1.0] * 4 + [2.0] * 4
    assert seen["task_id"].tolist() == [2] * 4 + [0] * 4 + [1] * 4
    ((states, task_ids, actions),) = critic.seen
    assert states[:, 0, 0].tolist() == seen["state"][:, 0, 0].tolist()
    assert task_ids.tolist() == [2] * 4 + [0] * 4 + [1] * 4
    assert actions[:, 0, 0].tolist() == [10.0 * r + c for r in range(b) for c in range(k)]
    want_q = [-(((10.0 * r + c) - (10.0 * r + [3, 1, 2][r])) ** 2) for r in range(b) for c in range(k)]
    assert steered.last_q.flatten().tolist() == want_q


def test_k1_is_exactly_the_base_policy_and_never_calls_the_critic(shape_meta, stats) -> None:
    policy = make_policy("flow", shape_meta, stats, **TINY, num_inference_steps=3)
    randomize(policy)
    critic = PlantedQ([0.0])
    steered = VGPSPolicy(policy, critic, samples=1, temperature=1.0)
    obs = obs_window(3)
    noise = torch.randn(3, *policy.noise_shape)
    assert torch.equal(steered.sample(obs, noise), policy.sample(obs, noise))
    # act(): same RNG stream, same queue/history conventions -> bit-identical actions over two re-plans
    steps = [{"state": torch.randn(3, STATE_DIM)} for _ in range(2 * policy.config.n_action_steps + 1)]
    torch.manual_seed(7)
    policy.reset()
    base = [policy.act(o) for o in steps]
    torch.manual_seed(7)
    steered.reset()
    ours = [steered.act(o) for o in steps]
    for a, b in zip(base, ours, strict=True):
        assert torch.equal(a, b)
    assert critic.calls == 0


def test_beta_zero_is_the_argmax_and_large_beta_is_uniform() -> None:
    table = [0.3, 2.0, -1.0, 1.5]
    client = Client()
    steered = VGPSPolicy(client, PlantedQ(table), samples=4, temperature=0.0, n_obs_steps=1, n_action_steps=2)
    chosen = steered.sample(_obs(5), _indexed_noise(5, 4))
    assert (chosen[:, 0, 0] == 1).all()  # index of the max of the table
    assert client.calls == [20]  # one call for all B·K candidates (one round trip for a remote client)
    # β → ∞: a uniform pick among the samples (the base distribution)
    n = 40000
    wide = VGPSPolicy(Client(), PlantedQ(table), samples=4, temperature=1e9, n_obs_steps=1, n_action_steps=2)
    counts = np.bincount(wide.sample(_obs(n), _indexed_noise(n, 4))[:, 0, 0].long().numpy(), minlength=4)
    chi2 = ((counts - n / 4) ** 2 / (n / 4)).sum()
    assert chi2 < CHI2_CRIT_001[3], counts


@pytest.mark.parametrize("beta", [0.5, 2.0])
def test_selection_frequencies_match_softmax_q_over_beta(beta: float) -> None:
    table = [0.0, 1.0, -0.5, 0.7, 2.0, -2.0, 0.2, 1.1]
    k, n = len(table), 40000
    steered = VGPSPolicy(
        Client(), PlantedQ(table), samples=k, temperature=beta, n_obs_steps=1, n_action_steps=2
    )
    counts = np.bincount(steered.sample(_obs(n), _indexed_noise(n, k))[:, 0, 0].long().numpy(), minlength=k)
    expected = n * torch.softmax(torch.tensor(table, dtype=torch.float64) / beta, 0).numpy()
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < CHI2_CRIT_001[k - 1], (counts, expected)
    # the test has power: the same counts are far from softmax at another temperature
    wrong = n * torch.softmax(torch.tensor(table, dtype=torch.float64) / (2 * beta), 0).numpy()
    assert ((counts - wrong) ** 2 / wrong).sum() > 10 * CHI2_CRIT_001[k - 1]


def test_select_rejects_negative_temperature() -> None:
    with pytest.raises(ValueError, match="temperature"):
        select(torch.zeros(2, 3), -1.0)


def test_expected_oracle_q_is_non_decreasing_in_k() -> None:
    """Nested candidates (the first K of 32 draws): argmax can only improve; softmax improves in expectation."""
    b, kmax = 4000, 32
    target = torch.tensor([0.4, -0.2])

    class Oracle:
        action_steps = 1

        def score(self, obs: dict, action: torch.Tensor, task_id: object = None) -> torch.Tensor:
            return -((action[:, 0] - target) ** 2).sum(-1)

    draws = torch.randn(b, kmax, 4, 2, generator=torch.Generator().manual_seed(0))
    for beta in (0.0, 0.1):
        means = []
        for k in (1, 2, 4, 8, 16, 32):
            steered = VGPSPolicy(
                Client(), Oracle(), samples=k, temperature=beta, n_obs_steps=1, n_action_steps=2
            )
            noise = draws[:, :k] if k > 1 else draws[:, 0]
            means.append(float(Oracle().score({}, steered.sample(_obs(b), noise)).mean()))
        assert all(b2 >= b1 - 1e-9 for b1, b2 in itertools.pairwise(means)), (beta, means)
        assert means[-1] > means[0] + 0.5  # and steering actually helps


def test_frozen_weights_target_network_min_over_heads(shape_meta, stats) -> None:
    torch.manual_seed(0)
    policy = make_policy("diffusion", shape_meta, stats, **TINY, num_inference_steps=2)
    randomize(policy)
    critic = NormalizedCritic(
        shape_meta, n_obs_steps=2, action_steps=1, stats=stats, hidden=[16], num_critics=3
    )
    critic.requires_grad_(False)
    with torch.no_grad():
        for p in critic.q_target.parameters():  # target differs from the online net
            p.add_(torch.randn_like(p))
    before = (state_dict_hash(policy), state_dict_hash(critic))
    steered = VGPSPolicy(policy, critic, samples=8, temperature=0.5).eval()
    for _ in range(3 * policy.config.n_action_steps):
        steered.act({"state": np.random.randn(2, STATE_DIM).astype(np.float32)})
    steered.reset([0])
    steered.act({"state": np.zeros((2, STATE_DIM), np.float32)})
    assert (state_dict_hash(policy), state_dict_hash(critic)) == before
    # scores are min over heads of the *target* network
    obs, act = obs_window(5), torch.rand(5, 1, ACTION_DIM) * 2 - 1
    feats, a = critic.features(obs), critic.normalize_action(act)
    assert torch.allclose(critic.score(obs, act), critic.q_target(feats, a).min(0).values)
    assert not torch.allclose(critic.score(obs, act), critic.q(feats, a).min(0).values)


def test_scored_span_first_action_or_whole_chunk() -> None:
    """``first`` scores the first executed row only; ``chunk`` all Ta executed rows (To-1 .. To-1+Ta-1)."""
    seen = {}

    class Spy:
        def __init__(self, steps: int) -> None:
            self.action_steps = steps

        def score(self, obs: dict, action: torch.Tensor, task_id: object = None) -> torch.Tensor:
            seen[self.action_steps] = action.clone()
            return torch.zeros(action.shape[0])

    chunk = torch.arange(6.0).view(1, 1, 6, 1).expand(1, 2, 6, 1).clone()  # rows 0..5
    VGPSPolicy(Client(6, 1), Spy(1), samples=2, score="first", n_obs_steps=2, n_action_steps=3).sample(
        _obs(1), chunk
    )
    VGPSPolicy(Client(6, 1), Spy(3), samples=2, score="chunk", n_obs_steps=2, n_action_steps=3).sample(
        _obs(1), chunk
    )
    assert seen[1][0, :, 0].tolist() == [1.0]
    assert seen[3][0, :, 0].tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="score='chunk' needs a critic over 3"):
        VGPSPolicy(Client(), Spy(1), samples=2, score="chunk", n_obs_steps=1, n_action_steps=3)


def test_black_box_client_acts_with_its_own_queue_and_per_env_resets() -> None:
    client = Client(horizon=4, action_dim=2)
    with pytest.raises(ValueError, match="n_obs_steps"):
        VGPSPolicy(client, PlantedQ([0.0]), samples=2)
    steered = VGPSPolicy(client, PlantedQ([0.0] * 8), samples=3, n_obs_steps=2, n_action_steps=2)
    obs = {"state": np.zeros((2, 3), np.float32)}
    a = [steered.act(obs) for _ in range(5)]
    assert all(x.shape == (2, 2) and isinstance(x, np.ndarray) for x in a)
    assert client.calls == [6, 6, 6]  # re-plans at steps 0, 2, 4 for both rows, K=3 candidates each
    steered.reset([1])  # only row 1 re-plans next step
    steered.act(obs)
    assert client.calls[-1] == 3
    steered.reset()
    assert client.resets == 1


def test_bad_windows_get_clear_errors(shape_meta, stats) -> None:
    """Executed rows must exist in the policy's chunk: a wrong To or Ta fails at construction (a local policy)
    or at the first plan (a black box, whose chunk length is known only then)."""
    policy = make_policy("flow", shape_meta, stats, **TINY, n_action_steps=4)
    with pytest.raises(ValueError, match=r"n_action_steps=5 .*1\.\.4"):
        VGPSPolicy(policy, PlantedQ([0.0]), samples=2, n_action_steps=5)
    with pytest.raises(ValueError, match=r"n_action_steps=0 .*1\.\.4"):
        VGPSPolicy(policy, PlantedQ([0.0]), samples=2, n_action_steps=0)
    with pytest.raises(ValueError, match="n_obs_steps=3 differs"):
        VGPSPolicy(policy, PlantedQ([0.0]), samples=2, n_obs_steps=3)
    assert VGPSPolicy(policy, PlantedQ([0.0]), samples=2, n_action_steps=1).n_action_steps == 1
    steered = VGPSPolicy(Client(horizon=4), PlantedQ([0.0] * 8), samples=2, n_obs_steps=2, n_action_steps=4)
    with pytest.raises(ValueError, match=r"chunks of 4 rows.*needs 5.*n_action_steps <= 3"):
        steered.act({"state": torch.zeros(1, 3)})


def test_plain_callable_critic_and_the_wrappers_task_id_first() -> None:
    """A critic without ``score`` is called directly; the wrapper's task_id wins over the observation's."""
    seen = []

    def critic(obs: dict, action: torch.Tensor, task_id: object) -> torch.Tensor:
        seen.append(task_id)
        return action[:, 0, 0]

    obs = {**_obs(2), "task_id": torch.tensor([0, 0])}
    steered = VGPSPolicy(Client(), critic, samples=3, n_obs_steps=1, n_action_steps=2, task_id=1)
    chosen = steered.sample(obs, _indexed_noise(2, 3))
    assert chosen[:, 0, 0].tolist() == [2.0, 2.0] and seen == [1]
    VGPSPolicy(Client(), critic, samples=3, n_obs_steps=1, n_action_steps=2).sample(obs, _indexed_noise(2, 3))
    assert seen[1].tolist() == [0] * 6  # no task_id of its own: the observation's, repeated per candidate


def test_reset_of_some_rows_keeps_the_policy_and_eval_reaches_both_parts() -> None:
    class Part:
        def __init__(self) -> None:
            self.evals = 0

        def eval(self) -> None:
            self.evals += 1

    class EvalClient(Client, Part):
        def __init__(self) -> None:
            Client.__init__(self)
            Part.__init__(self)

    class EvalQ(PlantedQ, Part):
        def __init__(self) -> None:
            PlantedQ.__init__(self, [0.0] * 8)
            Part.__init__(self)

    client, critic = EvalClient(), EvalQ()
    steered = VGPSPolicy(client, critic, samples=2, n_obs_steps=1, n_action_steps=2)
    assert steered.eval() is steered and client.evals == 1 and critic.evals == 1
    steered.act({"state": np.zeros((2, 3), np.float32)})
    steered.reset([1])  # one env's episode ended: the black box keeps its state
    assert client.resets == 0
    steered.reset()
    assert client.resets == 1

    class NoReset:
        def sample(self, obs: dict, noise: object = None) -> torch.Tensor:
            return torch.zeros(next(iter(obs.values())).shape[0], 4, 2)

    bare = VGPSPolicy(NoReset(), PlantedQ([0.0]), samples=2, n_obs_steps=1, n_action_steps=2)
    bare.reset()  # a policy without reset() is fine
    assert bare.act({"state": np.zeros((1, 3), np.float32)}).shape == (1, 2)


class SlowClient(Client):
    """Takes 20 ms per sample call; its chunk is the noise plus a per-candidate offset when noise is (N,)."""

    def sample(self, obs: dict, noise: torch.Tensor | None = None) -> torch.Tensor:
        time.sleep(0.02)
        if noise is not None and torch.as_tensor(noise).dim() == 1:
            n = torch.as_tensor(noise)
            return n.view(-1, 1, 1).expand(len(n), self.horizon, self.action_dim).clone()
        return super().sample(obs, noise)


class SlowQ(PlantedQ):
    def score(self, obs: dict, action: torch.Tensor, task_id: object = None) -> torch.Tensor:
        time.sleep(0.01)
        return super().score(obs, action, task_id)


def test_defaults_timing_and_reproducible_draws() -> None:
    """16 candidates at β = 0 by default; draws at β > 0 come from the wrapper's own seeded generator; the
    timing sums every plan's sample and score time."""
    client = SlowClient()
    # Q values 0.01 apart: argmax finds the best, a softmax at β = 1 would be all but uniform over 16
    default = VGPSPolicy(client, SlowQ([i / 100 for i in range(16)]), n_obs_steps=1, n_action_steps=2)
    assert default.timing == {"plans": 0, "sample_s": 0.0, "score_s": 0.0}
    start = time.perf_counter()
    for _ in range(3):
        chosen = default.sample(_obs(2), _indexed_noise(2, 16))
    wall = time.perf_counter() - start
    assert client.calls == [32] * 3 and chosen[:, 0, 0].tolist() == [15.0, 15.0]  # K = 16, argmax
    t = default.timing
    assert t["plans"] == 3 and 0.06 <= t["sample_s"] <= wall and 0.03 <= t["score_s"] <= wall
    assert t["sample_s"] + t["score_s"] <= wall
    base = VGPSPolicy(SlowClient(), SlowQ([0.0]), samples=1, n_obs_steps=1, n_action_steps=2)
    start = time.perf_counter()
    for _ in range(3):
        base.sample(_obs(1))
    assert base.timing["plans"] == 3 and 0.06 <= base.timing["sample_s"] <= time.perf_counter() - start

    table = [0.0, 0.3, 0.1, 0.2]

    def picks(**kw: int) -> list[float]:
        torch.manual_seed(len(kw))  # the global RNG differs between calls: only the wrapper's seed counts
        s = VGPSPolicy(
            Client(), PlantedQ(table), samples=4, temperature=1.0, n_obs_steps=1, n_action_steps=2, **kw
        )
        return s.sample(_obs(64), _indexed_noise(64, 4))[:, 0, 0].tolist()

    assert picks() == picks(seed=0) != picks(seed=1)


def test_attributes_names_and_window_checks() -> None:
    class Meta(Client):
        """A client reporting To/Ta as attributes, with a config that lacks them, and its shape_meta/task."""

        config = SimpleNamespace()
        n_obs_steps, n_action_steps = 1, 2
        shape_meta: ClassVar[dict] = {"obs": {"state": {"shape": [3]}}}
        task = "reach-v3"

    steered = VGPSPolicy(Meta(), PlantedQ([0.0] * 4), samples=2)
    assert (steered.n_obs_steps, steered.n_action_steps) == (1, 2)
    assert steered.shape_meta is Meta.shape_meta and steered.task == "reach-v3"
    with pytest.raises(ValueError, match=r"^Client exposes no config"):
        VGPSPolicy(Client(), PlantedQ([0.0]), samples=2, n_obs_steps=1)  # Ta still unknown
    with pytest.raises(ValueError, match=r"n_action_steps=0 is not valid: expected >= 1$"):
        VGPSPolicy(Client(), PlantedQ([0.0]), samples=2, n_obs_steps=1, n_action_steps=0)
    exact = VGPSPolicy(Client(horizon=4), PlantedQ([0.0] * 4), samples=2, n_obs_steps=2, n_action_steps=3)
    assert exact.sample(_obs(1), _indexed_noise(1, 2)).shape == (1, 4, 2)  # To − 1 + Ta = Tp rows: enough


def test_noise_must_be_per_row_and_candidate_and_the_chunk_span_is_ta_rows() -> None:
    steered = VGPSPolicy(SlowClient(), PlantedQ([0.0, 1.0, 2.0]), samples=3, n_obs_steps=1, n_action_steps=2)
    chosen = steered.sample(_obs(2), torch.tensor([[0.0, 2.0, 1.0], [2.0, 1.0, 0.0]]))  # (B, K) offsets
    assert chosen[:, 0, 0].tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match=r"expected \(B, K, Tp, Da\)"):
        steered.sample(_obs(2), torch.zeros(6))
    with pytest.raises(ValueError, match=r"noise has shape \(2, 4, 2\): with samples=3"):
        steered.sample(_obs(2), torch.zeros(2, 4, 2))  # K = 1's (B, Tp, Da): no candidate axis
    seen = {}

    class Spy:
        action_steps = 3

        def score(self, obs: dict, action: torch.Tensor, task_id: object = None) -> torch.Tensor:
            seen["rows"] = action[0, :, 0].tolist()
            return torch.zeros(action.shape[0])

    chunk = torch.arange(8.0).view(1, 1, 8, 1).expand(1, 2, 8, 1).clone()  # rows 0..7
    VGPSPolicy(Client(8, 1), Spy(), samples=2, score="chunk", n_obs_steps=2, n_action_steps=3).sample(
        _obs(1), chunk
    )
    assert seen["rows"] == [1.0, 2.0, 3.0]

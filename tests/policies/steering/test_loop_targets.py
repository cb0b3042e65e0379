"""The chunk-MDP online loop (``run_online``) pinned on a planted fake env whose every transition is known.

Two envs, chunks of Ta = 3 steps, frames ``[env, episode, t]`` in a To = 2 history. Env 0 succeeds on the
4th step (its 2nd chunk executes 1 step: terminated); env 1 times out after 6 steps (truncated). A step's
dense reward is its step index t. Written out by hand below: what the replay must hold for every
transition (obs, the *final* next obs, taken, the configured chunk reward, done = terminated only), what
``observe`` and ``learn`` receive (utd accounting, warm-up boundary), and what the learner's batches hold
(the offline share first, then online rows that are replay transitions).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from robosteer.policies.checkpoint import load_checkpoint
from robosteer.policies.steering.loop import OnlineLearner, OnlineRunConfig, run_online

torch.set_num_threads(1)
TO, TA, D = 2, 3, 3
PLAN = {0: (3, 1), 1: (3, 3)}  # executed steps of each chunk of an episode, per env
ENDS = {0: "success", 1: "time-out"}


def win(i: int, e: int, t_prev: int, t: int) -> list[list[float]]:
    """The (To, D) observation history of env i, episode e, after steps t_prev and t."""
    return [[float(i), float(e), float(t_prev)], [float(i), float(e), float(t)]]


class FakeEnv:
    """The batched env protocol with history and chunking, fully deterministic (see the module docstring)."""

    def __init__(self) -> None:
        self.num_envs = 2
        self.single_observation_space = {"state": SimpleNamespace(shape=(TO, D))}

    def reset(self, seed: int | None = None) -> dict[str, np.ndarray]:
        self.ep = [0, 0]
        self.t = [0, 0]
        self.chunk = [0, 0]
        self.windows = [np.array(win(i, 0, 0, 0), np.float32) for i in range(2)]
        return {"state": np.stack(self.windows)}

    def step(self, chunk: np.ndarray) -> tuple:
        assert chunk.shape == (2, TA, 1)
        steps, reward = np.zeros(2, int), np.zeros(2)
        term, trunc = np.zeros(2, bool), np.zeros(2, bool)
        final = {"state": np.zeros((2, TO, D), np.float32)}
        for i in range(2):
            n = PLAN[i][self.chunk[i]]
            for _ in range(n):
                self.t[i] += 1
                reward[i] += self.t[i]
                frame = np.array([i, self.ep[i], self.t[i]], np.float32)
                self.windows[i] = np.concatenate([self.windows[i][1:], frame[None]])
            steps[i] = n
            self.chunk[i] += 1
            if self.chunk[i] == len(PLAN[i]):
                term[i], trunc[i] = ENDS[i] == "success", ENDS[i] == "time-out"
                final["state"][i] = self.windows[i]
                self.ep[i] += 1
                self.t[i], self.chunk[i] = 0, 0
                self.windows[i] = np.array(win(i, self.ep[i], 0, 0), np.float32)
            else:
                final["state"][i] = self.windows[i]
        info = {
            "steps_executed": steps,
            "success": term.copy(),
            "final_obs": final,
            "_final_obs": term | trunc,
        }
        return {"state": np.stack(self.windows)}, reward, term, trunc, info


class Recorder(OnlineLearner):
    """A learner that plays marked ``taken`` values and records what the loop hands it."""

    kind, label, obs_keys, taken_dim = "fake", "fake", ("state",), 2

    def __init__(self) -> None:
        super().__init__()
        self.p = nn.Parameter(torch.zeros(1))
        self.calls: list[str] = []
        self.learned: list[tuple[int, int]] = []
        self.batches: list[dict] = []
        self.observed: list[tuple] = []

    def warmup_action(self, obs, generator):
        self.calls.append("warmup")
        return torch.full((2, 2), -float(len(self.calls))), torch.zeros(2, TA, 1)

    def explore(self, obs, generator):
        self.calls.append("explore")
        return torch.full((2, 2), float(len(self.calls))), torch.zeros(2, TA, 1)

    def learn(self, n_updates, n_transitions, sample, generator):
        self.learned.append((n_updates, n_transitions))
        self.batches += [sample(4) for _ in range(n_updates)]
        return {}

    def observe(self, obs, chunk, steps, done, success):
        self.observed.append((obs["state"].clone(), np.array(steps), np.array(done), np.array(success)))

    def eval_policy(self):
        raise AssertionError("no evaluation in these tests")

    def optimizers(self):
        return {}

    def get_config(self):
        return {}


def expected_transitions(reward: str) -> list[dict]:
    """Every transition of 4 loop iterations (2 envs each, in row order), written out by hand."""
    rows = []
    for e in (0, 1):  # two episodes per env, two chunks each
        first = [  # (obs, final next obs, steps, summed dense reward, success, time-out)
            (win(0, e, 0, 0), win(0, e, 2, 3), 3, 1 + 2 + 3, False, False),
            (win(1, e, 0, 0), win(1, e, 2, 3), 3, 1 + 2 + 3, False, False),
        ]
        second = [
            (win(0, e, 2, 3), win(0, e, 3, 4), 1, 4, True, False),  # success after 1 step
            (win(1, e, 2, 3), win(1, e, 5, 6), 3, 4 + 5 + 6, False, True),  # time-out after 6 steps
        ]
        rows += first + second
    out = []
    for obs, nxt, steps, dense, success, timeout in rows:
        r = {
            "sparse": 0.0 if success else -1.0,
            "dense": float(dense),
            "shaped": (dense / 10.0 - steps) / TA,  # Σ_t (r_t/scale − 1) / Ta over executed steps
        }[reward]
        out.append(
            {"obs": obs, "next": nxt, "steps": steps, "r": r, "success": success, "end": success or timeout}
        )
    return out


def _run(tmp_path, reward: str = "sparse", offline: dict | None = None) -> Recorder:
    learner = Recorder()
    cfg = OnlineRunConfig(
        env_steps=20,  # 4 iterations: 3 + 3, 1 + 3, 3 + 3, 1 + 3 env steps
        warmup_chunks=4,
        utd=0.75,
        reward=reward,
        reward_scale=10.0,
        buffer_size=100,
        offline_ratio=0.5 if offline is not None else 0.0,
        eval_every=0,
        checkpoint_every=10**6,
        log_every=10**6,
        progress=False,
    )
    metrics = run_online(learner, FakeEnv(), cfg, str(tmp_path), offline=offline)
    assert metrics["env_steps"] == 20 and metrics["train_episodes"] == 4
    return learner


@pytest.mark.parametrize("reward", ["sparse", "dense", "shaped"])
def test_replay_holds_every_transition_with_final_next_obs_reward_and_done_on_termination_only(
    tmp_path, reward
):
    """The checkpoint's replay, row by row: obs, the finished episode's last obs as next obs (for successes
    and time-outs alike), the learner's taken, the configured chunk reward, done = 1 only on success."""
    learner = _run(tmp_path, reward)
    buf = load_checkpoint(tmp_path / "checkpoints" / "latest").modules["buffer"]
    want = expected_transitions(reward)
    assert int(buf["size"]) == len(want) == 8
    torch.testing.assert_close(buf["data/obs/state"], torch.tensor([w["obs"] for w in want]))
    torch.testing.assert_close(buf["data/next_obs/state"], torch.tensor([w["next"] for w in want]))
    torch.testing.assert_close(buf["data/reward"], torch.tensor([w["r"] for w in want]))
    assert buf["data/done"].tolist() == [1.0 if w["success"] else 0.0 for w in want]  # time-outs bootstrap
    taken = [-1.0, -1.0, -2.0, -2.0, 3.0, 3.0, 4.0, 4.0]  # two warm-up calls, then two explore calls
    assert buf["data/taken"][:, 0].tolist() == taken and learner.calls == ["warmup"] * 2 + ["explore"] * 2


def test_observe_and_learn_see_the_episode_ends_and_the_utd_accounting(tmp_path):
    """``observe`` gets every transition's obs, executed steps, episode end (success or time-out) and success;
    ``learn`` starts once warm-up is filled and gets int(utd·B + carried fraction) updates: 1, 2, 1."""
    learner = _run(tmp_path)
    want = expected_transitions("sparse")
    assert len(learner.observed) == 4
    for it, (obs, steps, done, success) in enumerate(learner.observed):
        rows = want[2 * it : 2 * it + 2]
        torch.testing.assert_close(obs, torch.tensor([w["obs"] for w in rows]))
        assert steps.tolist() == [w["steps"] for w in rows]
        assert done.tolist() == [w["end"] for w in rows] and success.tolist() == [w["success"] for w in rows]
    assert learner.learned == [(1, 2), (2, 2), (1, 2)]  # 0.75·2 = 1.5 → 1 (+0.5), 2.0 → 2, 1.5 → 1


def test_learner_batches_hold_the_offline_share_then_replay_transitions(tmp_path):
    """Each batch of 4: round(4·0.5) = 2 offline rows first, then 2 online rows that are stored transitions
    (their done is the transition's termination flag, their next obs its final obs)."""
    n = 3
    offline = {
        "obs/state": torch.full((n, TO, D), 7.0),
        "next_obs/state": torch.full((n, TO, D), 8.0),
        "taken": torch.full((n, 2), 9.0),
        "reward": torch.full((n,), 5.0),
        "done": torch.ones(n),
    }
    learner = _run(tmp_path, "sparse", offline)
    want = {str(w["obs"]): w for w in expected_transitions("sparse")}
    assert len(learner.batches) == 4
    for batch in learner.batches:
        assert batch["taken"][:2, 0].tolist() == [9.0, 9.0] and batch["reward"][:2].tolist() == [5.0, 5.0]
        for j in (2, 3):
            w = want[str(batch["obs"]["state"][j].tolist())]
            assert batch["taken"][j, 0] != 9.0
            assert batch["done"][j].item() == float(w["success"]) and batch["reward"][j].item() == w["r"]
            torch.testing.assert_close(batch["next_obs"]["state"][j], torch.tensor(w["next"]))


class CtrlCLearner(Recorder):
    """Presses Ctrl-C (SIGINT to this process) in the middle of its second ``learn``, as a user would."""

    def learn(self, n_updates, n_transitions, sample, generator):
        out = super().learn(n_updates, n_transitions, sample, generator)
        if len(self.learned) == 2:
            import os
            import signal
            import time

            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs in the main thread between bytecodes
        return out


def test_ctrl_c_finishes_the_chunk_in_flight_and_saves_latest(tmp_path):
    """Ctrl-C is a flag (an exception could land in a weakref callback and be lost, or cut an update in
    half): the iteration in flight finishes, checkpoints/latest holds it with its replay, and the caller sees
    KeyboardInterrupt (the CLI exits 130), skipping the final evaluation."""
    import signal

    learner = CtrlCLearner()
    cfg = OnlineRunConfig(
        env_steps=1000, warmup_chunks=0, utd=1.0, buffer_size=100, eval_every=0, checkpoint_every=10**6,
        log_every=10**6, progress=False,
    )  # fmt: skip
    outer = signal.signal(
        signal.SIGINT, signal.default_int_handler
    )  # a background job starts with it ignored
    try:
        with pytest.raises(KeyboardInterrupt):
            run_online(learner, FakeEnv(), cfg, str(tmp_path))
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outer)
    ck = load_checkpoint(tmp_path / "checkpoints" / "latest")
    assert ck.extra["counters"]["transitions"] == 4 and len(learner.learned) == 2  # 2 iterations of 2 envs
    assert ck.extra["counters"]["env_steps"] == (3 + 3) + (1 + 3)


def test_the_replay_keeps_uint8_images_as_uint8_and_refuses_a_size_that_cannot_fit() -> None:
    """Images stay uint8 in the replay (a quarter of float32), every other observation is float32; a
    ``buffer_size`` whose replay exceeds the memory available is refused up front with the size that fits."""
    from gymnasium import spaces

    from robosteer.policies.steering.loop import check_replay_memory, transition_spec

    space = spaces.Dict(
        {
            "image/corner": spaces.Box(0, 255, (1, 84, 84, 3), dtype=np.uint8),
            "proprio": spaces.Box(-np.inf, np.inf, (1, 4), dtype=np.float32),
        }
    )
    spec = transition_spec(space, ("image/corner", "proprio"), 32)
    assert spec["obs/image/corner"] == ((1, 84, 84, 3), torch.uint8)
    assert spec["next_obs/image/corner"] == ((1, 84, 84, 3), torch.uint8)
    assert spec["obs/proprio"] == ((1, 4), torch.float32)
    per = 2 * 84 * 84 * 3 + 2 * 4 * 4 + 32 * 4 + 4 + 4  # 42,512 bytes per transition, by hand
    check_replay_memory(spec, 1000, available=1000 * per)  # fits exactly: no error
    with pytest.raises(ValueError) as e:
        check_replay_memory(spec, 1001, available=1000 * per)
    msg = str(e.value)
    assert "run.buffer_size=1001 chunk transitions need 0.0 GiB (42 KiB each" in msg
    assert "'obs/image/corner'" in msg and "pass run.buffer_size=500 or less" in msg

"""Scripted experts and the evaluation harness (exact episode counts, B-independence, videos)."""

from __future__ import annotations

import re
import time
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import ClassVar

import imageio.v2 as imageio
import numpy as np
import pytest

from robosteer import sim

# Meta-World's scripted policies warn that their gains saturate; the env clips actions anyway.
pytestmark = pytest.mark.filterwarnings("ignore:Constant\\(s\\) may be too high")


def test_push_expert_succeeds_and_evaluate_reports() -> None:
    with sim.make_env("push-v3", num_envs=2) as env:
        result = sim.evaluate(env, sim.ScriptedExpert("push-v3"), episodes=10, seed=0, progress=False)
    assert result["episodes"] == 10 and len(result["successes"]) == 10
    assert result["success_rate"] >= 0.9
    lo, hi = result["success_ci95"]
    assert 0.0 <= lo <= result["success_rate"] <= hi <= 1.0
    assert len(set(result["episode_seeds"])) == 10
    assert result["env_steps"] >= sum(result["lengths"])
    assert 0 < result["mean_episode_length"] < env.max_episode_steps
    assert result["policy_reset"] == "per_env" and result["env_steps_per_s"] > 0


def test_evaluate_is_independent_of_num_envs() -> None:
    results = []
    for num_envs in (1, 3):
        with sim.make_env("reach-v3", num_envs=num_envs) as env:
            results.append(
                sim.evaluate(env, sim.ScriptedExpert("reach-v3"), episodes=4, seed=9, progress=False)
            )
    one, three = results
    assert one["episode_seeds"] == three["episode_seeds"] == [sim.episode_seed(9, k) for k in range(4)]
    assert one["lengths"] == three["lengths"] and one["successes"] == three["successes"]
    assert three["env_steps"] > one["env_steps"]  # surplus episodes ran but were not counted


class _RecordingPolicy:
    """Zero actions; records which envs were reset."""

    def __init__(self) -> None:
        self.resets: list[list[int]] = []

    def reset(self, env_ids: list[int] | None = None) -> None:
        self.resets.append(list(env_ids) if env_ids is not None else [])

    def act(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        return np.zeros((len(obs["state"]), 4), np.float32)


def test_policy_reset_per_finished_env_and_failure_ci() -> None:
    policy = _RecordingPolicy()
    with sim.make_env("reach-v3", num_envs=2, max_episode_steps=3) as env:
        result = sim.evaluate(env, policy, episodes=3, seed=0, progress=False)
    assert policy.resets == [[0, 1], [0, 1], [0, 1]]  # initial reset, then both envs finish together twice
    assert result["success_rate"] == 0.0 and result["lengths"] == [3, 3, 3]
    assert result["success_ci95"][0] == 0.0 and result["success_ci95"][1] == pytest.approx(0.5615, abs=1e-3)


def test_wilson_interval_known_values() -> None:
    assert sim.wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert sim.wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=1e-4)
    assert sim.wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)


def test_evaluate_writes_video_of_env0(tmp_path: Path) -> None:
    path = tmp_path / "videos" / "eval.mp4"
    with sim.make_env("reach-v3", num_envs=2) as env:
        result = sim.evaluate(
            env,
            sim.ScriptedExpert("reach-v3"),
            episodes=2,
            seed=1,
            video_path=path,
            video_episodes=1,
            video_size=64,
            progress=False,
        )
    assert result["videos"] == [str(path)]
    frames = imageio.mimread(path)
    assert len(frames) == result["lengths"][0] + 1  # initial frame + one per step, final state included
    assert frames[0].shape == (64, 64, 3)


def test_write_video_checks_frames(tmp_path: Path) -> None:
    out = sim.write_video(np.zeros((3, 15, 17, 3), np.uint8), tmp_path / "odd.mp4", fps=10)
    assert imageio.mimread(out)[0].shape == (16, 18, 3)
    with pytest.raises(ValueError, match="uint8"):
        sim.write_video(np.zeros((3, 16, 16, 3), np.float32), tmp_path / "bad.mp4")
    with pytest.raises(ValueError, match=r"\(T, H, W, 3\)"):
        sim.write_video(np.zeros((16, 16, 3), np.uint8), tmp_path / "bad.mp4")


def test_expert_rejects_image_only_obs() -> None:
    with pytest.raises(KeyError, match="obs\\['state'\\]"):
        sim.ScriptedExpert("reach-v3").act({"image/corner2": np.zeros((1, 8, 8, 3), np.uint8)})


def test_episode_max_is_each_episodes_largest_info_value_in_episode_order() -> None:
    """``episode_max`` keeps, per episode, the largest value a per-step info key took (by hand below: the
    same episodes stepped one env at a time), whatever the number of envs; an unknown key is named."""
    policy = _RecordingPolicy()  # zero actions: the object stays, the hand hovers
    keys = ("obj_to_target", "grasp_success")
    got = []
    for num_envs in (1, 2):
        with sim.make_env("pick-place-v3", num_envs=num_envs, max_episode_steps=3) as env:
            result = sim.evaluate(env, policy, episodes=3, seed=4, progress=False, episode_max=keys)
        got.append(result["episode_max"])
    assert got[0] == got[1]
    by_hand: dict[str, list[float]] = {k: [] for k in keys}
    with sim.make_env("pick-place-v3", num_envs=1, max_episode_steps=3) as env:
        for k in range(3):
            env.reset(seed=[sim.episode_seed(4, k)])
            steps = [env.step(np.zeros((1, 4), np.float32))[4] for _ in range(3)]
            for key in keys:
                by_hand[key].append(max(float(info[key][0]) for info in steps))
    assert got[0] == by_hand and by_hand["grasp_success"] == [0.0, 0.0, 0.0]
    assert len(set(by_hand["obj_to_target"])) == 3  # three initial states: a mix-up would show

    with sim.make_env("pick-place-v3", num_envs=1, max_episode_steps=3) as env:
        expert = sim.evaluate(env, sim.ScriptedExpert("pick-place-v3"), episodes=1, seed=0, progress=False)
        assert "episode_max" not in expert
        with pytest.raises(
            ValueError, match=r"'grasped' is not a per-step info key of pick-place-v3: \[.*'grasp_success'"
        ):
            sim.evaluate(env, policy, episodes=1, seed=0, progress=False, episode_max=("grasped",))


def _spec(seed: int) -> tuple[int, bool, float]:
    """A fake episode's (length, success, reward per step), all set by its seed."""
    return 1 + seed % 4, seed % 3 == 0, (seed % 7) / 2


class _ScriptedEnv:
    """A BatchedEnv stand-in: env i plays the episode its seed scripts, auto-resets on the same step to its
    next queued seed, and records whether each env was given the action computed from its own observation."""

    task = "fake-v0"
    action_chunk = None

    def __init__(self, num_envs: int, randomization: object = None) -> None:
        self.num_envs, self.randomization = num_envs, randomization
        self.queue: dict[int, list[int]] = {}
        self.mixed_rows = 0
        self.steps = 0

    def _obs(self) -> dict[str, np.ndarray]:
        return {"state": np.stack([self.seeds % 1000, self.t], 1).astype(np.float64)}

    def reset(self, seed: list[int]) -> dict[str, np.ndarray]:
        self.seeds, self.t = np.array(seed, np.int64), np.zeros(self.num_envs, np.int64)
        self.surplus = 10**6
        return self._obs()

    def queue_episode_seeds(self, seeds: dict[int, list[int]]) -> None:
        self.queue = {i: list(s) for i, s in seeds.items()}

    def step(self, action: np.ndarray):
        expected = _row_action(self._obs())
        self.mixed_rows += int((np.abs(action - expected).max(1) > 0).sum())
        self.t += 1
        self.steps += 1
        b = self.num_envs
        info = {
            "success": np.zeros(b, bool),
            "episode_return": np.zeros(b),
            "episode_length": np.zeros(b, np.int64),
            "final_info": {"episode_seed": np.full(b, -1)},
            "grasp": np.array([t * ((s % 5) + 1) / 10 for s, t in zip(self.seeds, self.t)]),
            "dr_mass": (self.seeds % 11).astype(np.float64),
        }
        terminated, truncated = np.zeros(b, bool), np.zeros(b, bool)
        for i, (s, t) in enumerate(zip(self.seeds, self.t)):
            length, success, r = _spec(int(s))
            if t == length:
                terminated[i], truncated[i] = success, not success
                info["success"][i] = success
                info["episode_return"][i], info["episode_length"][i] = r * length, length
                info["final_info"]["episode_seed"][i] = s
                self.surplus += 1
                self.seeds[i] = self.queue[i].pop(0) if self.queue.get(i) else self.surplus
                self.t[i] = 0
        return self._obs(), None, terminated, truncated, info


def _row_action(obs: dict[str, np.ndarray]) -> np.ndarray:
    return np.stack([obs["state"][:, 0] + obs["state"][:, 1], -obs["state"][:, 1]], 1)


class _RowPolicy:
    """Acts from each row's own observation; records per-env resets."""

    def __init__(self) -> None:
        self.resets: list[list[int]] = []

    def reset(self, env_ids: list[int]) -> None:
        self.resets.append(list(env_ids))

    def act(self, obs: dict[str, np.ndarray]):
        import torch

        return torch.as_tensor(_row_action(obs))  # a tensor: evaluate converts it


class _Randomization:
    enabled = True

    def to_dict(self) -> dict:
        return {"mass": [0.5, 2.0]}


def test_evaluate_by_hand_on_a_scripted_env_with_rows_that_differ() -> None:
    """B = 3 envs of different episode lengths, 5 episodes: every figure is episode k's (seed
    episode_seed(7, k)) in episode order, each env executes its own row's action, and env 2's second
    episode (k = 5) runs but is not counted."""
    env, policy = _ScriptedEnv(3, _Randomization()), _RowPolicy()
    result = sim.evaluate(env, policy, episodes=5, seed=7, progress=False, episode_max=("grasp",))
    seeds = [sim.episode_seed(7, k) for k in range(5)]
    specs = [_spec(s) for s in seeds]
    assert env.mixed_rows == 0
    assert env.queue == {0: [], 1: [], 2: []}  # env i's later seeds: episode i + 3
    assert result["episode_seeds"] == seeds and result["num_envs"] == 3 and result["seed"] == 7
    assert result["lengths"] == [n for n, _, _ in specs]
    assert result["successes"] == [ok for _, ok, _ in specs]
    assert result["returns"] == [n * r for n, _, r in specs]
    assert result["success_rate"] == sum(ok for _, ok, _ in specs) / 5
    assert result["success_ci95"] == list(sim.wilson_interval(sum(ok for _, ok, _ in specs), 5))
    assert result["mean_return"] == pytest.approx(np.mean([n * r for n, _, r in specs]))
    assert result["mean_episode_length"] == pytest.approx(np.mean([n for n, _, _ in specs]))
    assert result["env_steps"] == 3 * env.steps  # one step per env per call (no steps_executed here)
    assert result["episode_max"] == {"grasp": [n * ((s % 5) + 1) / 10 for s, (n, _, _) in zip(seeds, specs)]}
    assert result["episode_params"] == [{"dr_mass": float(s % 11)} for s in seeds]
    masses = [float(s % 11) for s in seeds]
    assert result["randomization"] == {
        "config": {"mass": [0.5, 2.0]},
        "params": {
            "dr_mass": {
                "mean": pytest.approx(np.mean(masses)),
                "std": pytest.approx(np.std(masses)),
                "min": min(masses),
                "max": max(masses),
            }
        },
    }
    assert policy.resets[0] == [0, 1, 2] and result["policy_reset"] == "per_env"
    finished = sorted(i for ids in policy.resets[1:] for i in ids)
    assert finished.count(0) >= 2 and finished.count(1) >= 2 and finished.count(2) >= 1


def test_evaluate_refuses_bad_episode_counts_and_warns_on_all_env_resets() -> None:
    for bad in (0, True, 2.0):
        with pytest.raises(ValueError, match="episodes"):
            sim.evaluate(_ScriptedEnv(1), _RowPolicy(), episodes=bad, progress=False)

    class AllReset(_RowPolicy):
        def reset(self) -> None:  # type: ignore[override]
            self.resets.append([])

    policy = AllReset()
    with pytest.warns(UserWarning, match="takes no env ids"):
        result = sim.evaluate(_ScriptedEnv(2), policy, episodes=2, seed=1, progress=False)
    assert result["policy_reset"] == "all" and policy.resets[0] == []
    result = sim.evaluate(_ScriptedEnv(1), AllReset(), episodes=2, seed=1, progress=False)
    assert result["policy_reset"] == "per_env"  # one env: a full reset is exact
    assert "randomization" not in result and "episode_max" not in result


def test_actions_asks_act_chunk_only_on_a_chunked_env_and_returns_float32() -> None:
    import torch

    from robosteer.sim.evaluate import _actions

    class Both:
        def act(self, obs):  # a tensor still attached to a graph: evaluate detaches it
            return (torch.as_tensor(obs["state"]) + 1).requires_grad_()

        def act_chunk(self, obs):
            return np.repeat(obs["state"][:, None] + 2, 4, axis=1)  # (B, Ta, A)

    class ActOnly:
        def act(self, obs):
            return (obs["state"] + 5).tolist()

    obs = {"state": np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]])}
    chunked, plain = SimpleNamespace(action_chunk=4), SimpleNamespace(action_chunk=None)
    got = _actions(Both(), obs, chunked)
    assert got.dtype == np.float32 and got.shape == (2, 4, 3)
    assert got[:, 0].tolist() == [[2.0, 3.0, 4.0], [5.0, 6.0, 7.0]]
    got = _actions(Both(), obs, plain)
    assert got.dtype == np.float32 and got.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    got = _actions(ActOnly(), obs, chunked)  # no act_chunk: act's answer
    assert got.dtype == np.float32 and got.tolist() == [[5.0, 6.0, 7.0], [8.0, 9.0, 10.0]]


def test_reset_fn_reads_whether_reset_takes_env_ids() -> None:
    from robosteer.sim.evaluate import _reset_fn

    class Ids:
        def reset(self, env_ids=None): ...

    class NoIds:
        def reset(self): ...

    class Opaque:
        """A reset whose signature cannot be read: treated as a full reset."""

        class _Reset:
            __signature__ = "not a signature"

            def __call__(self, *args): ...

        reset = _Reset()

    assert _reset_fn(object()) == (None, False)
    assert _reset_fn(Ids())[1] is True and _reset_fn(NoIds())[1] is False
    reset, per_env = _reset_fn(Opaque())
    assert reset is Opaque.reset and per_env is False
    result = sim.evaluate(_ScriptedEnv(2), SimpleNamespace(act=_RowPolicy().act), episodes=2, progress=False)
    assert result["episodes"] == 2  # a policy without reset() is evaluated as is


# ----------------------------------------------------------------------------- mutation survivors (issue 59)
class _Bar:
    """Stands in for tqdm: what the progress bar was built with and shown."""

    made: ClassVar[list[dict]] = []

    def __init__(self, **kwargs) -> None:
        self.kwargs, self.n, self.postfix, self.closed = kwargs, 0, [], False
        _Bar.made.append(self.__dict__)

    def update(self, n: int) -> None:
        self.n += n

    def set_postfix(self, **kwargs) -> None:
        self.postfix.append(kwargs)

    def close(self) -> None:
        self.closed = True


def test_the_progress_bar_counts_episodes_and_shows_the_running_success(monkeypatch) -> None:
    import importlib

    harness = importlib.import_module("robosteer.sim.evaluate")  # the module (sim.evaluate is the function)
    monkeypatch.setattr(harness, "tqdm", _Bar)
    _Bar.made = []
    result = sim.evaluate(_ScriptedEnv(3), _RowPolicy(), episodes=5, seed=7)  # progress: on by default
    sim.evaluate(_ScriptedEnv(3), _RowPolicy(), episodes=2, seed=7, progress=False)
    shown, quiet = _Bar.made
    assert shown["kwargs"] == {
        "total": 5,
        "desc": "eval fake-v0",
        "unit": "ep",
        "disable": False,
        "leave": False,
    }
    assert quiet["kwargs"]["disable"] is True and quiet["closed"] and shown["closed"]
    assert shown["n"] == 5  # one per counted episode, the surplus one not counted
    # after each counted episode, the success rate so far; after the last, the result's
    assert len(shown["postfix"]) == 5 and shown["postfix"][-1] == {"success": f"{result['success_rate']:.0%}"}


def test_defaults_seed_0_and_one_video_at_256_px_of_env_0() -> None:
    class Recording(_ScriptedEnv):
        def start_recording(self, camera="corner2", size=256, episodes=1, env_index=0) -> None:
            self.recording = (camera, size, episodes, env_index)

        def pop_recordings(self, env_index=0) -> list:
            return []

    env = Recording(2)
    result = sim.evaluate(env, _RowPolicy(), episodes=6, video_path="v.mp4", progress=False)
    assert result["episode_seeds"] == [sim.episode_seed(0, k) for k in range(6)] and result["seed"] == 0
    assert env.recording == ("corner2", 256, 1, 0)
    env = Recording(2)
    sim.evaluate(env, _RowPolicy(), episodes=6, video_path="v.mp4", video_episodes=2, progress=False)
    assert env.recording[2] == 2  # as many as asked, at most an env's share (3 here)
    env = Recording(2)
    sim.evaluate(env, _RowPolicy(), episodes=6, video_path="v.mp4", video_episodes=0, progress=False)
    assert not hasattr(env, "recording")  # no video asked for: nothing recorded


def test_env_steps_count_the_steps_a_chunked_env_executed() -> None:
    class Chunked(_ScriptedEnv):
        executed = 0

        def step(self, action):
            out = super().step(action)
            steps = 1 + (self.t + np.arange(self.num_envs)) % 3  # (B,) differ per env and call
            out[4]["steps_executed"] = steps
            self.executed += int(steps.sum())
            return out

    env = Chunked(3)
    result = sim.evaluate(env, _RowPolicy(), episodes=5, seed=7, progress=False)
    assert result["env_steps"] == env.executed != 3 * env.steps


def test_a_success_before_the_episode_ends_counts() -> None:
    """An env that does not stop on success (terminate_on_success=False): the flag at an earlier step counts."""

    class SuccessMidway(_ScriptedEnv):
        def step(self, action):
            midway = self.t == 0  # about to take each episode's first step
            obs, reward, terminated, truncated, info = super().step(action)
            ended = terminated | truncated
            info["success"] = (
                midway & ~ended
            )  # success at step 1 of episodes longer than 1 step, never at the end
            return obs, reward, np.zeros_like(terminated), ended, info

    result = sim.evaluate(SuccessMidway(3), _RowPolicy(), episodes=5, seed=7, progress=False)
    lengths = [_spec(sim.episode_seed(7, k))[0] for k in range(5)]
    assert result["successes"] == [n > 1 for n in lengths] == [False, False, True, True, True]


def test_a_missing_episode_max_key_lists_the_per_step_keys_only() -> None:
    class Flagged(_ScriptedEnv):
        def step(self, action):
            out = super().step(action)
            out[4]["_final_info"] = np.zeros(self.num_envs, bool)
            return out

    known = ["dr_mass", "episode_length", "episode_return", "grasp", "success"]
    with pytest.raises(ValueError, match=re.escape(f"of fake-v0: {known}")):
        sim.evaluate(Flagged(2), _RowPolicy(), episodes=2, progress=False, episode_max=("grasped",))


def test_only_an_inexact_all_env_reset_warns() -> None:
    class AllReset(_RowPolicy):
        def reset(self) -> None:  # type: ignore[override]
            self.resets.append([])

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sim.evaluate(_ScriptedEnv(2), _RowPolicy(), episodes=2, progress=False)  # per-env resets
        sim.evaluate(_ScriptedEnv(1), AllReset(), episodes=2, progress=False)  # one env: exact
        sim.evaluate(_ScriptedEnv(2), SimpleNamespace(act=_RowPolicy().act), episodes=2, progress=False)
    with pytest.warns(UserWarning, match="all 2 envs' policy state is reset"):
        sim.evaluate(_ScriptedEnv(2), AllReset(), episodes=2, progress=False)


def test_wilson_interval_edges_stay_inside_0_1() -> None:
    assert sim.wilson_interval(0, 0) == (0.0, 1.0)  # no episodes: nothing is known
    assert sim.wilson_interval(1, 1) == pytest.approx((0.2065, 1.0), abs=1e-4)  # one episode is a measurement
    assert sim.wilson_interval(5, 5)[1] == 1.0  # unclipped, the formula gives 1 + 2e-16 here
    bounds = [b for n in range(1, 60) for k in (0, n) for b in sim.wilson_interval(k, n)]
    assert all(0.0 <= b <= 1.0 for b in bounds)


def test_the_result_names_its_task_wall_time_and_rate_and_numbers_later_videos(tmp_path: Path) -> None:
    class TwoVideos(_ScriptedEnv):
        def start_recording(self, camera="corner2", size=256, episodes=1, env_index=0) -> None: ...

        def pop_recordings(self, env_index=0) -> list:
            return [np.zeros((3, 8, 8, 3), np.uint8), np.full((2, 8, 8, 3), 255, np.uint8)]

    class Bare(_ScriptedEnv):  # an env with no randomization attribute at all
        def __init__(self, num_envs: int) -> None:
            super().__init__(num_envs)
            del self.randomization

    before = time.perf_counter()
    result = sim.evaluate(Bare(2), _RowPolicy(), episodes=3, progress=False)
    assert result["task"] == "fake-v0" and 0 < result["wall_time_s"] <= time.perf_counter() - before
    assert result["env_steps_per_s"] == pytest.approx(result["env_steps"] / result["wall_time_s"])
    out = sim.evaluate(TwoVideos(2), _RowPolicy(), episodes=4, video_path=tmp_path / "v.mp4", video_episodes=2,
                       progress=False)  # fmt: skip
    assert out["videos"] == [str(tmp_path / "v.mp4"), str(tmp_path / "v_1.mp4")]
    reader = imageio.get_reader(tmp_path / "v_1.mp4", format="FFMPEG")
    assert reader.get_meta_data()["fps"] == sim.video.DEFAULT_FPS and reader.count_frames() == 2

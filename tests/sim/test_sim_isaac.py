"""The Isaac backends (sim.isaac) against small torch fakes of Isaac Lab's and Isaac Gym's documented env APIs.

Real Isaac is not installable here: these tests check the import guard and the adapters' protocol
logic (auto-reset, final_obs, success, time-outs as truncation, chunking, history, sim.evaluate).
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from robosteer.sim import evaluate, make_env
from robosteer.sim.errors import InvalidChoiceError
from robosteer.sim.isaac import IsaacGymEnv, IsaacLabEnv, IsaacNotInstalledError, make_isaac_env

torch.set_num_threads(1)

# The Isaac Lab fake lives in the stand-in package the command tests put on PYTHONPATH; loaded here by path, so
# this process never has an ``isaaclab_tasks`` module (test_import_sim_never_imports_isaac).
_POINT = Path(__file__).resolve().parents[1] / "fixtures" / "isaaclab_fake" / "isaaclab_tasks" / "point.py"
_spec = importlib.util.spec_from_file_location("isaaclab_fake_point", _POINT)
point = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(point)
FakeLabEnv, T, GOAL_TOL = point.FakeLabEnv, point.T, point.GOAL_TOL


# ----------------------------------------------------------------------------- fakes
class FakeGym:
    def __init__(self) -> None:
        self.destroyed: list[str] = []

    def destroy_sim(self, sim: object) -> None:
        self.destroyed.append("sim")

    def destroy_viewer(self, viewer: object) -> None:
        self.destroyed.append("viewer")


class FakeVecTask:
    """The same point mass with IsaacGymEnvs' VecTask conventions: resets deferred to the next step."""

    def __init__(self, num_envs: int = 2) -> None:
        self.gym = FakeGym()
        self.sim = object()
        self.viewer = None
        self.num_envs = num_envs
        self.num_obs = 3
        self.num_actions = 2
        self.rl_device = "cpu"
        self.max_episode_length = T
        self.pos = torch.zeros(num_envs, 2)
        self.obs_buf = torch.zeros(num_envs, 3)
        self.reset_buf = torch.ones(num_envs, dtype=torch.long)
        self.progress_buf = torch.zeros(num_envs, dtype=torch.long)
        self.timeout_buf = torch.zeros(num_envs, dtype=torch.long)
        self.extras: dict[str, Any] = {}

    def reset_idx(self, env_ids: torch.Tensor) -> None:
        self.pos[env_ids] = torch.rand(len(env_ids), 2) * 2 - 1  # the global torch RNG, as VecTask tasks do
        self.progress_buf[env_ids] = 0
        self.reset_buf[env_ids] = 0

    def compute_observations(self) -> torch.Tensor:
        self.obs_buf[:] = torch.cat([self.pos, (self.progress_buf.float() / T)[:, None]], dim=1)
        return self.obs_buf

    def step(self, actions: torch.Tensor) -> tuple[dict, torch.Tensor, torch.Tensor, dict]:
        ids = torch.nonzero(self.reset_buf).flatten()  # pre_physics_step: the deferred resets
        if len(ids):
            self.reset_idx(ids)
        self.pos += actions
        self.progress_buf += 1
        self.compute_observations()
        success = self.pos.norm(dim=1) < GOAL_TOL
        self.timeout_buf = (self.progress_buf >= T).long()
        self.reset_buf = (success | self.timeout_buf.bool()).long()
        self.extras = {"time_outs": self.timeout_buf, "successes": success.float()}
        return {"obs": self.obs_buf.clone()}, -self.pos.norm(dim=1), self.reset_buf.clone(), self.extras


class ReachPolicy:
    """Moves toward the origin by at most ``speed`` per step; acts on {"state": (B, 3)} or (B, To, 3)."""

    def __init__(self, speed: float = 0.4) -> None:
        self.speed = speed
        self.resets = 0

    def reset(self, env_ids: list[int] | None = None) -> None:
        self.resets += 1

    def act(self, obs: dict[str, Any]) -> torch.Tensor:
        state = torch.as_tensor(obs["state"])
        pos = state[..., -1, :2] if state.dim() == 3 else state[:, :2]
        return (-pos).clamp(-self.speed, self.speed)  # (B, 2)

    def act_chunk(self, obs: dict[str, Any], horizon: int = 4) -> torch.Tensor:
        """The open-loop plan of ``horizon`` reach steps, (B, Ta, 2)."""
        state = torch.as_tensor(obs["state"])
        pos = (state[..., -1, :2] if state.dim() == 3 else state[:, :2]).clone()
        steps = []
        for _ in range(horizon):
            steps.append((-pos).clamp(-self.speed, self.speed))
            pos += steps[-1]
        return torch.stack(steps, dim=1)


def _place(env: FakeLabEnv | FakeVecTask, positions: list[list[float]]) -> None:
    env.pos[:] = torch.tensor(positions)


# ----------------------------------------------------------------------------- import guard
def test_missing_isaac_raises_install_help() -> None:
    with pytest.raises(IsaacNotInstalledError) as lab:
        make_isaac_env("Isaac-Lift-Cube-Franka-v0", sim="isaaclab")
    msg = str(lab.value)
    assert "'isaaclab'" in msg and "isaacsim" in msg and "Python 3.11" in msg and "'metaworld'" in msg
    with pytest.raises(IsaacNotInstalledError) as gym_err:
        make_env("FrankaCabinet", sim="isaacgym")
    msg = str(gym_err.value)
    assert "'isaacgym'" in msg and "Preview 4" in msg and "3.6-3.8" in msg and "'isaaclab'" in msg
    with pytest.raises(InvalidChoiceError, match="did you mean 'isaaclab'"):
        make_env("push-v3", sim="isaaclabs")


def test_import_sim_never_imports_isaac(tmp_path: Any) -> None:
    """A poisoned ``isaaclab`` on the path: importing sim is fine, asking for it names the failure."""
    (tmp_path / "isaaclab").mkdir()
    (tmp_path / "isaaclab" / "__init__.py").write_text("raise ImportError('Isaac Sim is not running')\n")
    code = (
        "import sys\nfrom robosteer import sim\nimport robosteer.sim.isaac\n"
        "assert 'isaaclab' not in sys.modules\n"
        "try:\n    sim.isaac.make_isaac_env('Isaac-Lift-Cube-Franka-v0')\n"
        "except sim.isaac.IsaacNotInstalledError as e:\n    print('GUARD', e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "MUJOCO_GL": "egl", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert (
        "GUARD" in out.stdout
        and "failed to import" in out.stdout
        and "Isaac Sim is not running" in out.stdout
    )


def test_make_env_default_and_refused_options() -> None:
    with pytest.raises(ValueError, match=r"make_env\(obs='image'\) is not valid with sim='isaaclab'"):
        make_env("Isaac-Lift-Cube-Franka-v0", sim="isaaclab", obs="image")
    with pytest.raises(ValueError, match=r"make_env\(device='cuda:0'\) is not valid with sim='metaworld'"):
        make_env("push-v3", device="cuda:0")


# ----------------------------------------------------------------------------- Isaac Lab adapter
def test_lab_success_terminates_with_terminal_final_obs() -> None:
    fake = FakeLabEnv()
    env = IsaacLabEnv(fake, task="fake-lift")
    obs = env.reset(seed=3)
    assert obs["state"].shape == (2, 3) and obs["state"].dtype == torch.float32
    assert env.single_observation_space["state"].shape == (3,) and env.single_action_space.shape == (2,)
    _place(fake, [[0.3, 0.0], [0.9, 0.9]])
    obs, reward, terminated, truncated, info = env.step(np.array([[-0.25, 0.0], [0.0, 0.0]], np.float32))
    assert terminated.tolist() == [True, False] and truncated.tolist() == [False, False]
    assert info["success"].tolist() == [True, False] and info["success"].dtype == torch.bool
    assert info["_final_obs"].tolist() == [True, False]
    assert torch.allclose(info["final_obs"]["state"][0], torch.tensor([0.05, 0.0, 0.1]))  # terminal obs
    assert obs["state"][0, 2] == 0.0 and not torch.allclose(obs["state"][0, :2], torch.tensor([0.05, 0.0]))
    assert torch.equal(info["final_obs"]["state"][1], obs["state"][1])
    assert info["episode_length"].tolist() == [1, 1]
    assert torch.allclose(reward, torch.tensor([-0.05, -((0.81 * 2) ** 0.5)]))
    assert info["final_info"]["episode_seed"].tolist() == [-1, -1]
    env.close()
    assert fake.closed and fake._reset_idx == FakeLabEnv._reset_idx.__get__(fake)


def test_lab_time_out_is_truncation() -> None:
    fake = FakeLabEnv(num_envs=1)
    env = IsaacLabEnv(fake, output="numpy")
    env.reset(seed=0)
    _place(fake, [[0.9, 0.9]])
    for _ in range(T - 1):
        _, _, terminated, truncated, _ = env.step(np.zeros((1, 2), np.float32))
        assert not terminated[0] and not truncated[0]
    _, _, terminated, truncated, info = env.step(np.zeros((1, 2), np.float32))
    assert isinstance(terminated, np.ndarray) and terminated.dtype == bool
    assert (
        truncated.tolist() == [True]
        and terminated.tolist() == [False]
        and info["success"].tolist() == [False]
    )
    assert info["final_obs"]["state"][0, 2] == pytest.approx(1.0) and info["episode_length"][0] == T
    assert info["episode_return"][0] == pytest.approx(-T * (0.81 * 2) ** 0.5, rel=1e-5)


def test_lab_without_success_term_warns_and_bad_env_rejected() -> None:
    fake = FakeLabEnv()
    with pytest.warns(UserWarning, match="no success signal"):
        env = IsaacLabEnv(fake, success_term="object_lifted")
    assert env.success_source is None
    with pytest.raises(TypeError, match="not an Isaac Lab RL env"):
        IsaacLabEnv(object())
    with pytest.raises(ValueError, match=r"action of shape \(2, 3\) is not valid"):
        env.reset()
        env.step(np.zeros((2, 3), np.float32))


def test_lab_action_chunk_stops_each_env_at_its_end() -> None:
    fake = FakeLabEnv()
    env = IsaacLabEnv(fake, action_chunk=4)
    assert env.single_action_space.shape == (4, 2)
    env.reset(seed=1)
    _place(fake, [[0.3, 0.0], [0.9, 0.9]])
    chunk = torch.zeros(2, 4, 2)
    chunk[0, :, 0] = -0.125  # env 0 reaches the goal at chunk step 2 (0.3 -> 0.175 -> 0.05)
    obs, reward, terminated, _, info = env.step(chunk)
    assert info["steps_executed"].tolist() == [2, 4]
    assert info["step_success"][0].tolist() == [False, True, False, False]
    assert terminated.tolist() == [True, False] and info["success"].tolist() == [True, False]
    assert reward[0] == pytest.approx(-(0.175 + 0.05))
    assert info["episode_length"].tolist() == [2, 4]
    assert info["final_obs"]["state"][0, 0] == pytest.approx(0.05)
    assert obs["state"][0, 2] == pytest.approx(0.2)  # two idle steps into its new episode
    assert fake.episode_length_buf.tolist() == [2, 4]
    assert [a[0, 0].item() for a in fake.actions] == [-0.125, -0.125, 0.0, 0.0]  # idle after its end


def test_lab_obs_history_window_and_terminal_window() -> None:
    fake = FakeLabEnv(num_envs=1)
    env = IsaacLabEnv(fake, obs_history=2)
    first = env.reset(seed=2)["state"]  # (1, 2, 3)
    assert first.shape == (1, 2, 3) and torch.equal(first[0, 0], first[0, 1])
    _place(fake, [[0.3, 0.0]])
    obs, *_ = env.step(torch.tensor([[-0.125, 0.0]]))
    assert obs["state"][0, 1, 0] == pytest.approx(0.175) and torch.equal(obs["state"][0, 0], first[0, 1])
    obs2, _, terminated, _, info = env.step(torch.tensor([[-0.125, 0.0]]))
    assert terminated[0]
    assert torch.allclose(info["final_obs"]["state"][0], torch.tensor([[0.175, 0.0, 0.1], [0.05, 0.0, 0.2]]))
    assert torch.equal(obs2["state"][0, 0], obs2["state"][0, 1]) and obs2["state"][0, 1, 2] == 0.0


def test_evaluate_runs_unchanged_on_isaac_lab_fake() -> None:
    for chunk in (None, 4):
        env = IsaacLabEnv(FakeLabEnv(num_envs=3), task="fake-lift", action_chunk=chunk, obs_history=2)
        out = evaluate(env, ReachPolicy(), episodes=7, seed=0, progress=False)
        assert out["success_rate"] == 1.0 and out["episodes"] == 7 and len(out["lengths"]) == 7
        assert all(
            1 <= n <= 4 for n in out["lengths"]
        )  # |x|, |y| <= 1 at speed 0.4: <= 3 steps (+ tolerance)
    still = evaluate(IsaacLabEnv(FakeLabEnv(num_envs=2)), ReachPolicy(speed=0.0), episodes=3, progress=False)
    assert still["success_rate"] == 0.0 and still["lengths"] == [T, T, T]
    assert still["env_steps"] == 2 * 2 * T  # two rounds of both envs


# ----------------------------------------------------------------------------- Isaac Gym adapter
def test_isaacgym_deferred_reset_becomes_protocol_auto_reset() -> None:
    task = FakeVecTask()
    env = IsaacGymEnv(task, name="fake-cabinet")
    obs = env.reset(seed=5)
    assert obs["state"].shape == (2, 3) and obs["state"][:, 2].tolist() == [0.0, 0.0]
    _place(task, [[0.3, 0.0], [0.9, 0.9]])
    obs, _, terminated, truncated, info = env.step(torch.tensor([[-0.25, 0.0], [0.0, 0.0]]))
    assert terminated.tolist() == [True, False] and truncated.tolist() == [False, False]
    assert info["success"].tolist() == [True, False]
    assert torch.allclose(info["final_obs"]["state"][0], torch.tensor([0.05, 0.0, 0.1]))
    assert obs["state"][0, 2] == 0.0 and task.reset_buf[0] == 0  # reset now, not at the next step
    for _ in range(T - 1):
        obs, _, terminated, truncated, info = env.step(torch.zeros(2, 2))
    assert truncated.tolist() == [False, True] and terminated.tolist() == [False, False]
    assert info["episode_length"].tolist() == [T - 1, T]
    env.close()
    assert task.gym.destroyed == ["sim"]


def test_isaacgym_evaluate_and_seeded_reset_reproducible() -> None:
    a = evaluate(IsaacGymEnv(FakeVecTask()), ReachPolicy(), episodes=5, seed=4, progress=False)
    b = evaluate(IsaacGymEnv(FakeVecTask()), ReachPolicy(), episodes=5, seed=4, progress=False)
    assert a["success_rate"] == 1.0 and a["lengths"] == b["lengths"] and a["returns"] == b["returns"]
    with pytest.raises(TypeError, match=r"not an Isaac Gym VecTask: it lacks \['gym', 'sim', 'viewer'"):
        IsaacGymEnv(FakeLabEnv())  # type: ignore[arg-type]


def test_dsrl_loop_runs_unchanged_on_isaac_lab_fake(tmp_path: Any) -> None:
    """The steering loop (policies.steering) on the adapter with make_env's numpy outputs, eval on torch ones."""
    from robosteer.policies import make_policy
    from robosteer.policies.steering.dsrl import DSRL, DSRLConfig, DSRLRunConfig, run_dsrl

    to, ta = 2, 4
    stats = {
        k: {"min": -np.ones(d, np.float32), "max": np.ones(d, np.float32)}
        | {"mean": np.zeros(d, np.float32), "std": np.ones(d, np.float32)}
        for k, d in (("state", 3), ("action", 2))
    }
    shape_meta = {"obs": {"state": {"shape": [3], "type": "low_dim"}}, "action": {"shape": [2]}}
    torch.manual_seed(0)
    base = make_policy(
        "diffusion", shape_meta, stats, n_obs_steps=to, horizon=8, n_action_steps=ta,
        mlp_hidden_dim=32, mlp_n_blocks=1, num_inference_steps=2,
    ).eval()  # fmt: skip
    cfg = DSRLConfig(hidden=[32, 32], batch_size=16, noise_critic_steps=1)
    agent = DSRL(base, obs_dim=to * 3, exec_slice=slice(to - 1, to - 1 + ta), config=cfg)

    def eval_fn(policy: Any) -> dict[str, Any]:
        env = IsaacLabEnv(FakeLabEnv(num_envs=2), task="fake-lift")  # torch outputs
        return evaluate(env, policy, episodes=2, seed=5, progress=False)

    env = IsaacLabEnv(FakeLabEnv(num_envs=2), action_chunk=ta, obs_history=to, output="numpy")
    run = DSRLRunConfig(env_steps=80, warmup_chunks=4, eval_every=40, checkpoint_every=80, progress=False)
    m = run_dsrl(agent, env, run, str(tmp_path), eval_fn=eval_fn)
    assert m["env_steps"] >= 80 and m["updates"] > 0 and m["train_episodes"] >= 2
    assert len(m["history"]) >= 2 and 0.0 <= m["history"][-1]["success_rate"] <= 1.0

"""One Meta-World v3 task as a gymnasium env with dict observations and per-episode seeds.

This is the per-worker env that the batched env vectorises. It fixes the three things Meta-World does
not do for us: every reset draws a fresh random initial state (Meta-World freezes it by default), the
initial state is a function of the episode seed alone (so a dataset can be regenerated bit for bit), and
success can end the episode (Meta-World never terminates).
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import mujoco
import numpy as np

from robosteer.sim.errors import check_choice
from robosteer.sim.obs_modes import OBS_MODES, PROPRIO_SLICE, REWARD_MODES
from robosteer.sim.randomization import RandomizationConfig, Randomizer, as_config
from robosteer.sim.render import CameraRenderer, camera_names
from robosteer.sim.tasks import METAWORLD_MAX_STEPS, get_task, make_metaworld_env


def episode_seed(seed: int, index: int) -> int:
    """Seed of stream ``index`` under ``seed``: independent uint32 streams from numpy's SeedSequence."""
    return int(np.random.SeedSequence([int(seed), int(index)]).generate_state(1, dtype=np.uint32)[0])


def check_seed(seed: object) -> int:
    """Return ``seed`` as an int if it is a non-negative integer, else raise ValueError naming it."""
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or int(seed) < 0:
        raise ValueError(f"seed {seed!r} is not valid: expected a non-negative int (e.g. 0)")
    return int(seed)


class MetaWorldEnv(gym.Env):
    """A Meta-World v3 task (goal observable) with ``state`` / ``proprio`` / ``image/<camera>`` dict observations.

    Observation modes: ``state`` (the 39-d privileged vector), ``image`` (cameras only), ``pixels`` (``proprio``,
    the hand position and gripper opening a real arm measures, plus the cameras), and ``state+image`` /
    ``state+pixels`` (the same with ``state`` added, for the scripted expert and for diagnostics).

    Episode seeds: ``reset(seed=s)`` starts an episode whose initial state depends only on ``s`` and
    re-seeds the stream that later seed-less resets (auto-resets) draw from, so everything after a seeded
    reset is reproducible. ``reset()`` without a seed takes the next seed from ``queue_episode_seeds`` if
    any, else from that stream (seeded at construction from ``seed``).

    Actions are clipped to ``[-1, 1]^4``. ``terminated`` is True at the first success step when
    ``terminate_on_success``; ``truncated`` is True after ``max_episode_steps`` steps.

    ``randomization`` (sim.randomization): per-episode domain randomization, noise and actuation latency,
    drawn from the episode seed; the drawn parameters are ``dr_*`` keys of the reset and step infos.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 80}

    def __init__(
        self,
        task: str,
        obs: str = "state",
        image_size: int = 84,
        cameras: tuple[str, ...] = ("corner2",),
        max_episode_steps: int | None = None,
        terminate_on_success: bool = True,
        reward: str = "dense",
        seed: int = 0,
        env_index: int = 0,
        randomization: RandomizationConfig | dict[str, Any] | None = None,
    ) -> None:
        spec = get_task(task)
        self.task = spec.name
        self.obs_mode = check_choice("obs mode", obs, OBS_MODES)
        self.reward_mode = check_choice("reward mode", reward, REWARD_MODES)
        self.max_episode_steps = (
            spec.max_episode_steps if max_episode_steps is None else int(max_episode_steps)
        )
        if not 1 <= self.max_episode_steps <= METAWORLD_MAX_STEPS:
            raise ValueError(
                f"max_episode_steps={max_episode_steps!r} is not valid: expected 1..{METAWORLD_MAX_STEPS} "
                f"(Meta-World raises past {METAWORLD_MAX_STEPS}); {self.task}'s default is {spec.max_episode_steps}"
            )
        self.terminate_on_success = bool(terminate_on_success)
        self.env_index = int(env_index)

        self._mw = make_metaworld_env(self.task)
        self.model: mujoco.MjModel = self._mw.model
        self.data: mujoco.MjData = self._mw.data
        self.frame_skip = int(self._mw.frame_skip)
        self.dt = float(self.model.opt.timestep) * self.frame_skip
        self.cameras = tuple(cameras) if self.obs_mode != "state" else ()
        for cam in cameras:
            check_choice("camera", cam, camera_names(self.model))
        if self.obs_mode != "state" and not self.cameras:
            raise ValueError(f"obs={obs!r} needs at least one camera: expected e.g. cameras=('corner2',)")
        self.image_size = int(image_size)
        self.randomization = as_config(randomization)
        # None when nominal: the env then runs exactly the code path it had before randomization existed.
        self._randomizer = (
            Randomizer(self.randomization, self._mw, self.dt) if self.randomization.enabled else None
        )

        spaces: dict[str, gym.Space] = {}
        box = self._mw.sawyer_observation_space
        low, high = box.low.astype(np.float32), box.high.astype(np.float32)
        if self.obs_mode in ("state", "state+image", "state+pixels"):
            spaces["state"] = gym.spaces.Box(low, high, dtype=np.float32)
        if self.obs_mode in ("pixels", "state+pixels"):
            spaces["proprio"] = gym.spaces.Box(low[PROPRIO_SLICE], high[PROPRIO_SLICE], dtype=np.float32)
        for cam in self.cameras:
            shape = (self.image_size, self.image_size, 3)
            spaces[f"image/{cam}"] = gym.spaces.Box(0, 255, shape, dtype=np.uint8)
        self.observation_space = gym.spaces.Dict(spaces)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)

        # False (set per step by a chunk wrapper with render="policy_steps"): this step's images repeat the last
        # rendered frames, as a camera that was not read. The step that ends an episode always renders.
        self.render_images = True
        self._last_images: dict[str, np.ndarray] = {}
        self._renderers: dict[int, CameraRenderer] = {}  # image size -> renderer (obs and video sizes)
        if self.cameras:
            self._renderers[self.image_size] = CameraRenderer(self.model, self.image_size)
        self._seed_rng = np.random.default_rng(episode_seed(check_seed(seed), self.env_index))
        self._seed_queue: list[int] = []
        self.current_episode_seed = -1
        self._steps = 0
        self._return = 0.0
        # Video recording (see start_recording): frames of the current episode and finished episodes.
        self._rec: dict[str, Any] | None = None
        self._rec_frames: list[np.ndarray] = []
        self._rec_done: list[np.ndarray] = []

    # ----------------------------------------------------------------- seeds and reset
    def queue_episode_seeds(self, seeds_by_env: dict[int, list[int]]) -> None:
        """Make this env's next seed-less resets use ``seeds_by_env[env_index]`` (others are ignored)."""
        self._seed_queue = [check_seed(s) for s in seeds_by_env.get(self.env_index, [])]

    def seed_stream_state(self) -> dict[str, Any]:
        """Where the auto-resets' seed stream stands (its generator and queue), for an exact resume."""
        return {"rng": self._seed_rng.bit_generator.state, "queue": list(self._seed_queue)}

    def set_seed_stream_state(self, state: dict[str, Any]) -> None:
        """Put back :meth:`seed_stream_state`: the next auto-resets draw the seeds they would have drawn."""
        self._seed_rng.bit_generator.state = state["rng"]
        self._seed_queue = [check_seed(s) for s in state["queue"]]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode from the initial state that ``seed`` (or the next drawn seed) determines."""
        if seed is not None:
            ep_seed = check_seed(seed)
            self._seed_rng = np.random.default_rng([ep_seed, 1])
            self._seed_queue = []
        elif self._seed_queue:
            ep_seed = self._seed_queue.pop(0)
        else:
            ep_seed = int(self._seed_rng.integers(0, 2**32, dtype=np.uint64))
        self.current_episode_seed = ep_seed
        params = self._randomizer.reset(ep_seed) if self._randomizer is not None else {}
        self._mw.seed(ep_seed)
        state, _ = self._mw.reset()
        self._steps = 0
        self._return = 0.0
        self._record("reset")
        return self._obs(state, render=True), {"episode_seed": ep_seed, **params}

    # ----------------------------------------------------------------- step
    def step(self, action: np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Advance one control step (``frame_skip`` physics steps) with a (4,) action."""
        action = np.clip(np.asarray(action, dtype=np.float64).reshape(4), -1.0, 1.0)  # (A,)
        if self._randomizer is not None:
            action = self._randomizer.action(action)  # the delayed, noised command applied now
        state, mw_reward, _, _, mw_info = self._mw.step(action)
        self._steps += 1
        success = bool(mw_info["success"])
        reward = float(mw_reward) if self.reward_mode == "dense" else (0.0 if success else -1.0)
        self._return += reward
        terminated = success and self.terminate_on_success
        truncated = self._steps >= self.max_episode_steps and not terminated
        info = {k: float(v) for k, v in mw_info.items() if k != "success"}
        info.update(
            success=success,
            episode_seed=self.current_episode_seed,
            episode_length=self._steps,
            episode_return=self._return,
        )
        if self._randomizer is not None:
            info.update(self._randomizer.params)
        self._record("done" if terminated or truncated else "step")
        render = self.render_images or terminated or truncated
        return self._obs(state, render), reward, terminated, truncated, info

    @property
    def steps_left(self) -> int:
        """Steps until the time limit truncates the current episode."""
        return self.max_episode_steps - self._steps

    def _obs(self, state: np.ndarray, render: bool = True) -> dict[str, np.ndarray]:
        obs: dict[str, np.ndarray] = {}
        if self.obs_mode != "image":
            full = state.astype(np.float32)  # (39,)
            if self._randomizer is not None:
                full = self._randomizer.observe(full)
            if self.obs_mode in ("state", "state+image", "state+pixels"):
                obs["state"] = full
            if self.obs_mode in ("pixels", "state+pixels"):
                obs["proprio"] = full[PROPRIO_SLICE].copy()  # (4,) hand xyz, gripper opening
        for cam in self.cameras:
            key = f"image/{cam}"
            if render or key not in self._last_images:
                self._last_images[key] = self._renderers[self.image_size].render(self.data, cam)  # (H, W, 3)
            obs[key] = self._last_images[key]
        return obs

    # ----------------------------------------------------------------- rendering and state
    def render_frame(
        self, camera: str = "corner2", size: int = 256, only_index: int | None = None
    ) -> np.ndarray | None:
        """Render ``camera`` at ``size`` px: (size, size, 3) uint8; None when ``only_index`` is another env."""
        if only_index is not None and only_index != self.env_index:
            return None
        if size not in self._renderers:
            self._renderers[size] = CameraRenderer(self.model, size)
        return self._renderers[size].render(self.data, camera)

    def render(self) -> np.ndarray:
        """gymnasium's render(): the first camera (or corner2) at the observation size."""
        return self.render_frame(self.cameras[0] if self.cameras else "corner2", self.image_size)

    def start_recording(self, camera: str, size: int, episodes: int, only_index: int | None = None) -> None:
        """Record the next ``episodes`` episodes (starting at the next reset) as frames of ``camera``."""
        if only_index is not None and only_index != self.env_index:
            return
        check_choice("camera", camera, camera_names(self.model))
        self._rec = {"camera": camera, "size": int(size), "left": int(episodes)} if episodes > 0 else None
        self._rec_frames, self._rec_done = [], []

    def pop_recordings(self, only_index: int | None = None) -> list[np.ndarray] | None:
        """Finished recorded episodes, each (T+1, H, W, 3) uint8 (initial frame + one per step); clears them."""
        if only_index is not None and only_index != self.env_index:
            return None
        done, self._rec_done = self._rec_done, []
        return done

    def _record(self, event: str) -> None:
        """Recording state machine; ``event`` is "reset", "step" or "done" (the step that ends an episode)."""
        rec = self._rec
        if rec is None:
            return
        if event == "reset":
            if self._rec_frames:  # reset in mid-episode: keep the partial episode
                self._finish_recorded_episode()
                if self._rec is None:
                    return
            self._rec_frames = [self.render_frame(rec["camera"], rec["size"])]
        elif self._rec_frames:  # only episodes that started after start_recording are recorded
            self._rec_frames.append(self.render_frame(rec["camera"], rec["size"]))
            if event == "done":
                self._finish_recorded_episode()

    def _finish_recorded_episode(self) -> None:
        self._rec_done.append(np.stack(self._rec_frames))  # (T+1, H, W, 3)
        self._rec_frames = []
        self._rec["left"] -= 1
        if self._rec["left"] <= 0:
            self._rec = None

    def get_sim_state(self) -> np.ndarray:
        """The full MuJoCo integration state (time, qpos, qvel, act, warmstart, ctrl, mocap, ...): (S,) float64."""
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        state = np.empty(mujoco.mj_stateSize(self.model, spec), dtype=np.float64)
        mujoco.mj_getState(self.model, self.data, state, spec)
        return state

    def close(self) -> None:
        """Free the GL contexts and the Meta-World env."""
        for renderer in self._renderers.values():
            renderer.close()
        self._renderers.clear()
        self._mw.close()

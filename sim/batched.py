"""The CPU batched env: Meta-World tasks on gymnasium's vector envs (sync or one process per env).

It implements robosteer's batched-env protocol (docs/architecture.md): ``reset(seed) -> obs``,
``step(action) -> obs, reward, terminated, truncated, info`` over ``num_envs`` envs with auto-reset in
gymnasium's SAME_STEP mode, dict observations, ``info["success"]`` and ``info["episode_seed"]``.

Info layout after ``step`` (all arrays have a leading (B,) axis):
- every key describes the step just taken, also for envs that finished and auto-reset in it
  (``success``, ``episode_length``, ``episode_return``, Meta-World's reward terms, and with chunking
  ``step_success`` (B, Ta) and ``steps_executed``);
- ``episode_seed``: the seed of the episode each env is in *now* (the new one after an auto-reset);
- ``final_obs``: dict of (B, ...) arrays, the true next observation of this step for every env: the
  finished episode's last observation where ``_final_obs`` (B,) is True, the returned obs elsewhere
  (so RL code can bootstrap from it without masking);
- ``dr_*`` (only with randomization): the finished-or-running episode's drawn parameters (sim.randomization);
- ``final_info`` / ``_final_info``: gymnasium's own layout, present when some env finished.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv

from robosteer.sim.backends import SIMS, make_warp_env
from robosteer.sim.chunking import ActionChunkWrapper
from robosteer.sim.episode_state import EpisodeStateWrapper
from robosteer.sim.errors import check_choice
from robosteer.sim.history import ObsHistoryWrapper
from robosteer.sim.isaac import TorchBatchedEnv, make_isaac_env  # imports no Isaac package
from robosteer.sim.metaworld_env import MetaWorldEnv, check_seed, episode_seed
from robosteer.sim.randomization import RandomizationConfig, as_config

VECTORIZATIONS = ("sync", "async")


RENDER_MODES = ("every_step", "policy_steps")


def _make_single_env(
    kwargs: dict[str, Any],
    action_chunk: int | None,
    obs_history: int | None = None,
    render: str = "every_step",
) -> gym.Env:
    """Worker-side constructor (module level so async workers can unpickle it)."""
    env: gym.Env = MetaWorldEnv(**kwargs)
    if obs_history is not None:  # below the chunk wrapper: the window advances every executed step
        env = ObsHistoryWrapper(env, obs_history)
    if action_chunk is not None:
        render_last = (obs_history or 1) if render == "policy_steps" else None
        env = ActionChunkWrapper(env, action_chunk, render_last)
    return EpisodeStateWrapper(env)  # outermost: it records the actions the batched env steps with


class BatchedEnv:
    """``num_envs`` copies of one task, stepped together; see the module docstring for the info layout."""

    def __init__(
        self,
        task: str,
        num_envs: int = 1,
        seed: int = 0,
        obs: str = "state",
        image_size: int = 84,
        cameras: Sequence[str] = ("corner2",),
        action_chunk: int | None = None,
        max_episode_steps: int | None = None,
        terminate_on_success: bool = True,
        reward: str = "dense",
        vectorization: str = "sync",
        obs_history: int | None = None,
        randomization: RandomizationConfig | dict[str, Any] | None = None,
        render: str = "every_step",
    ) -> None:
        if isinstance(num_envs, bool) or not isinstance(num_envs, int | np.integer) or num_envs < 1:
            raise ValueError(f"num_envs={num_envs!r} is not valid: expected an int >= 1")
        if isinstance(cameras, str):
            cameras = (cameras,)
        check_choice("vectorization", vectorization, VECTORIZATIONS)
        self.render_steps = check_choice("render", render, RENDER_MODES)
        self.seed = check_seed(seed)
        self.num_envs = int(num_envs)
        self.vectorization = vectorization
        self.action_chunk = None if action_chunk is None else int(action_chunk)
        self.obs_history = None if obs_history is None else int(obs_history)
        self.randomization = as_config(randomization)
        common = dict(
            task=task,
            obs=obs,
            image_size=int(image_size),
            cameras=tuple(cameras),
            max_episode_steps=max_episode_steps,
            terminate_on_success=terminate_on_success,
            reward=reward,
            seed=self.seed,
            randomization=self.randomization,
        )
        # Build env 0 here first: it validates every argument with a clear error before any worker starts.
        probe = _make_single_env(
            {**common, "env_index": 0}, self.action_chunk, self.obs_history, self.render_steps
        )
        base: MetaWorldEnv = probe.unwrapped  # type: ignore[assignment]
        self.task = base.task
        self.obs_mode = base.obs_mode
        self.cameras = base.cameras
        self.image_size = base.image_size
        self.max_episode_steps = base.max_episode_steps
        self.terminate_on_success = base.terminate_on_success
        self.reward_mode = base.reward_mode
        self.dt = base.dt
        self.frame_skip = base.frame_skip
        fns = [
            functools.partial(
                _make_single_env,
                {**common, "env_index": i},
                self.action_chunk,
                self.obs_history,
                self.render_steps,
            )
            for i in range(self.num_envs)
        ]
        if vectorization == "sync":
            fns[0] = lambda: probe
            self._venv: gym.vector.VectorEnv = SyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP)
        else:
            probe.close()
            # "spawn": a forked worker inherits the parent's EGL state and hangs in its first render once
            # the parent has rendered (measured here); spawned workers start clean (~1 s of imports each).
            self._venv = AsyncVectorEnv(fns, autoreset_mode=AutoresetMode.SAME_STEP, context="spawn")
        self.single_observation_space: gym.spaces.Dict = self._venv.single_observation_space
        self.single_action_space: gym.spaces.Box = self._venv.single_action_space  # (A,) or (Ta, A)
        self.observation_space = self._venv.observation_space
        self.action_space = self._venv.action_space
        self.obs_keys = list(self.single_observation_space.spaces)
        self.episode_seeds = np.full(self.num_envs, -1, dtype=np.int64)  # (B,) seed of each env's episode
        self._needs_reset = True
        self._closed = False

    # ----------------------------------------------------------------- protocol
    def reset(self, seed: int | Sequence[int] | None = None) -> dict[str, np.ndarray]:
        """Reset every env; return the batched first observations (dict of (B, ...) arrays).

        ``seed=None``: each env takes the next seed of its own stream (seeded at construction);
        ``seed=int``: env i gets episode seed ``episode_seed(seed, i)``; a list: exactly those seeds.
        The episode seeds are in ``self.episode_seeds`` (B,).
        """
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, int | np.integer) and not isinstance(seed, bool):
            seeds = [episode_seed(check_seed(seed), i) for i in range(self.num_envs)]
        else:
            seeds = [check_seed(s) for s in seed]
            if len(seeds) != self.num_envs:
                raise ValueError(
                    f"reset got {len(seeds)} seeds: expected one per env, num_envs={self.num_envs}"
                )
        obs, info = self._venv.reset(seed=seeds)
        self.episode_seeds = np.asarray(info["episode_seed"], dtype=np.int64)
        self._needs_reset = False
        return obs

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every env with ``action`` (B, A) or (B, Ta, A); finished envs auto-reset in the same call.

        Returns obs (dict of (B, ...)), reward (B,) float64 (summed over a chunk), terminated (B,),
        truncated (B,) and info (see the module docstring).
        """
        if self._needs_reset:
            raise RuntimeError("BatchedEnv.step called before reset(): call env.reset(seed=...) first")
        action = np.asarray(action, dtype=np.float32)
        expected = (self.num_envs, *self.single_action_space.shape)
        if action.shape != expected:
            chunk_hint = f" (action_chunk={self.action_chunk})" if self.action_chunk else ""
            raise ValueError(f"action of shape {action.shape} is not valid: expected {expected}{chunk_hint}")
        if not np.isfinite(action).all():
            bad = np.unique(np.nonzero(~np.isfinite(action))[0]).tolist()
            raise ValueError(f"action has NaN/inf entries for envs {bad}: expected finite values in [-1, 1]")
        obs, reward, terminated, truncated, raw = self._venv.step(action)
        done = terminated | truncated  # (B,)
        info = self._merge_info(raw, obs, done)
        self.episode_seeds = info["episode_seed"]
        return obs, reward, terminated, truncated, info

    def _merge_info(
        self, raw: dict[str, Any], obs: dict[str, np.ndarray], done: np.ndarray
    ) -> dict[str, Any]:
        """Make every per-step key describe the step just taken (gymnasium puts reset info there for done envs)."""
        final_info = raw.get("final_info", {})
        info: dict[str, Any] = {}
        for key, value in raw.items():
            if key.startswith("_") or key in ("final_obs", "final_info"):
                continue
            info[key] = np.array(value)
        for key, value in final_info.items():
            if key.startswith("_") or key == "episode_seed":
                continue
            value = np.asarray(value)
            if key not in info:
                info[key] = value.copy()
            else:
                info[key][done] = value[done]
        final_obs = {k: v.copy() for k, v in obs.items()}
        if done.any():
            for i in np.nonzero(done)[0]:
                for k in final_obs:
                    final_obs[k][i] = raw["final_obs"][i][k]
            info["final_info"] = final_info
            info["_final_info"] = done.copy()
        info["final_obs"] = final_obs
        info["_final_obs"] = done.copy()
        info["success"] = np.asarray(info["success"], dtype=bool)  # (B,)
        info["episode_seed"] = np.asarray(info["episode_seed"], dtype=np.int64)  # (B,)
        return info

    # ----------------------------------------------------------------- extras
    def queue_episode_seeds(self, seeds_by_env: dict[int, list[int]]) -> None:
        """Give env i the seeds of its next auto-resets (used by ``evaluate`` for B-independent episodes)."""
        self._venv.call("queue_episode_seeds", {int(i): [int(s) for s in v] for i, v in seeds_by_env.items()})

    def episode_states(self) -> list[dict[str, Any]]:
        """Each env's episode in flight (seed, seed stream, actions since its reset; sim.episode_state), so a
        resumed run can continue it exactly with :meth:`restore_episodes`."""
        return list(self._venv.call("episode_state"))

    def restore_episodes(self, states: Sequence[dict[str, Any]]) -> dict[str, np.ndarray] | None:
        """Rebuild the episodes :meth:`episode_states` recorded (one per env) by replaying them; returns the
        batched observations they had, or None (every env reset afresh is then up to the caller) when the
        replay does not reproduce them: another MuJoCo build, task or ``num_envs``."""
        if len(states) != self.num_envs:
            return None
        self.reset(seed=[int(s["seed"]) for s in states])
        results = self._venv.call("restore_episode", {i: dict(s) for i, s in enumerate(states)})
        if not all(same for _, same in results):
            return None
        obs = [o for o, _ in results]  # (the reset above set episode_seeds to the states' seeds)
        return {k: np.stack([o[k] for o in obs]) for k in obs[0]}

    def render(self, camera: str = "corner2", size: int = 256, env_index: int = 0) -> np.ndarray:
        """Render env ``env_index``'s current state: (size, size, 3) uint8, with its own renderer per size."""
        self._check_index(env_index)
        return self._venv.call("render_frame", camera, int(size), only_index=env_index)[env_index]

    def start_recording(
        self, camera: str = "corner2", size: int = 256, episodes: int = 1, env_index: int = 0
    ) -> None:
        """Record the next ``episodes`` episodes of env ``env_index`` (from its next reset); see pop_recordings."""
        self._check_index(env_index)
        self._venv.call("start_recording", camera, int(size), int(episodes), only_index=env_index)

    def pop_recordings(self, env_index: int = 0) -> list[np.ndarray]:
        """Finished recorded episodes of env ``env_index``, each (T+1, H, W, 3) uint8; clears them."""
        self._check_index(env_index)
        return self._venv.call("pop_recordings", only_index=env_index)[env_index]

    def get_sim_states(self) -> np.ndarray:
        """Each env's full MuJoCo integration state (robomimic's ``states``): (B, S) float64."""
        return np.stack(self._venv.call("get_sim_state"))

    def _check_index(self, env_index: int) -> None:
        if not 0 <= env_index < self.num_envs:
            raise ValueError(f"env_index={env_index} is not valid: expected 0..{self.num_envs - 1}")

    @property
    def unwrapped_envs(self) -> list[MetaWorldEnv]:
        """The single envs (sync vectorization only: async envs live in worker processes)."""
        if not isinstance(self._venv, SyncVectorEnv):
            raise RuntimeError("unwrapped_envs is only available with vectorization='sync'")
        return [e.unwrapped for e in self._venv.envs]  # type: ignore[misc]

    def close(self) -> None:
        """Close every env (and its GL contexts / worker processes); safe to call twice."""
        if not self._closed:
            self._closed = True
            self._venv.close()

    def __enter__(self) -> BatchedEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        chunk = f", action_chunk={self.action_chunk}" if self.action_chunk else ""
        return (
            f"BatchedEnv({self.task!r}, num_envs={self.num_envs}, obs={self.obs_mode!r}{chunk}, "
            f"max_episode_steps={self.max_episode_steps}, vectorization={self.vectorization!r})"
        )


def make_env(
    task: str,
    num_envs: int = 1,
    seed: int = 0,
    obs: str = "state",
    image_size: int = 84,
    cameras: Sequence[str] = ("corner2",),
    action_chunk: int | None = None,
    max_episode_steps: int | None = None,
    terminate_on_success: bool = True,
    vectorization: str = "sync",
    reward: str = "dense",
    obs_history: int | None = None,
    randomization: RandomizationConfig | dict[str, Any] | None = None,
    render: str = "every_step",
    sim: str = "metaworld",
    device: str | None = None,
    output: str = "numpy",
    **isaac_kwargs: Any,
) -> BatchedEnv | TorchBatchedEnv:
    """Build the batched env of a Meta-World v3 task (the one entry point scripts and tests use).

    ``obs``: "state" | "image" | "state+image" | "pixels" (proprio + cameras) | "state+pixels"; ``cameras`` name Meta-World cameras (image obs only);
    ``max_episode_steps``: None takes the task's default (sim.tasks), at most 500; ``reward``: "dense"
    (Meta-World's shaped reward) or "sparse" (-1 per step, 0 on a success step); ``obs_history=To``: every
    observation is the window of the last To observations, (B, To, ...) (steering code over chunked envs);
    ``randomization``: a ``sim.RandomizationConfig`` or dict (configs/randomization/*.yaml) of per-episode
    domain randomization, noise and actuation latency; None (or all-nominal) changes nothing.
    ``render``: "every_step", or "policy_steps" with ``action_chunk``: camera images are rendered only for
    the observations a chunked policy reads (a chunk's last To steps, the last To before the time limit, an
    episode's end); the skipped steps repeat the last frame (at To=2, Ta=8: 2 renders per chunk instead of 8).
    ``sim`` (sim/backends.py): "metaworld" (this, CPU MuJoCo), "warp" (the MuJoCo Warp ports of sim/gpu,
    state observations, on ``device`` "cpu" or "cuda"; numpy outputs), or an Isaac backend, "isaaclab" |
    "isaacgym" (then ``task`` is an Isaac task id, ``isaac_kwargs`` go to ``sim.isaac.make_isaac_env`` and
    outputs are numpy unless ``output="torch"``); ``device``: None is the backend's own (cpu; Isaac: cuda:0).
    ``output``: "numpy", or "torch" for a GPU sim's tensors on its device (the steering loop keeps them there).
    Options a backend does not have must keep their defaults.
    """
    check_choice("sim", sim, SIMS)
    if sim == "warp":
        _refuse_options(sim, locals(), ("obs", "vectorization", "randomization", "render", "isaac_kwargs"))
        return make_warp_env(
            task,
            num_envs,
            seed,
            device or "cpu",
            max_episode_steps=max_episode_steps,
            terminate_on_success=terminate_on_success,
            reward=reward,
            action_chunk=action_chunk,
            obs_history=obs_history,
            output=output,
        )
    if sim != "metaworld":
        return _make_isaac(task, sim, num_envs, seed, action_chunk, obs_history, isaac_kwargs, locals())
    if isaac_kwargs:
        raise TypeError(f"make_env got unexpected arguments {sorted(isaac_kwargs)} for sim='metaworld'")
    if device not in (None, "cpu") or output != "numpy":
        shown = f"device={device!r}" if device not in (None, "cpu") else f"output={output!r}"
        raise ValueError(f"make_env({shown}) is not valid with sim='metaworld': it runs on 'cpu', in numpy")
    return BatchedEnv(
        task,
        num_envs=num_envs,
        seed=seed,
        obs=obs,
        image_size=image_size,
        cameras=cameras,
        action_chunk=action_chunk,
        max_episode_steps=max_episode_steps,
        terminate_on_success=terminate_on_success,
        reward=reward,
        vectorization=vectorization,
        obs_history=obs_history,
        randomization=randomization,
        render=render,
    )


def _refuse_options(sim: str, given: dict[str, Any], names: tuple[str, ...]) -> None:
    """Options ``sim`` does not have must keep make_env's defaults: refused, never ignored."""
    defaults = inspect.signature(make_env).parameters
    for name in names:
        default = {} if name == "isaac_kwargs" else defaults[name].default
        if name == "randomization" and not as_config(given[name]).enabled:
            continue  # all-nominal (randomization=none) is no randomization
        if given[name] != default:
            shown = sorted(given[name]) if name == "isaac_kwargs" else repr(given[name])
            raise ValueError(
                f"make_env({name}={shown}) is not valid with sim={sim!r}: that backend has no such option; "
                f"leave it at {default!r}"
            )


def _make_isaac(
    task: str,
    sim: str,
    num_envs: int,
    seed: int,
    action_chunk: int | None,
    obs_history: int | None,
    isaac_kwargs: dict[str, Any],
    given: dict[str, Any],
) -> TorchBatchedEnv:
    """``make_env`` for the Isaac backends: refuse Meta-World-only options rather than ignore them (Isaac
    tasks set them in their own env cfg); ``device`` goes to the factory when given."""
    options = ("obs", "max_episode_steps", "terminate_on_success", "vectorization", "reward", "randomization")
    _refuse_options(sim, given, (*options, "render"))
    device = given["device"]
    names = ("device",) if sim == "isaaclab" else ("sim_device", "rl_device")
    devices = {} if device is None else dict.fromkeys(names, device)
    kwargs = {"output": given["output"], **devices, **isaac_kwargs}
    return make_isaac_env(
        task,
        sim=sim,
        num_envs=num_envs,
        seed=seed,
        action_chunk=action_chunk,
        obs_history=obs_history,
        **kwargs,
    )

"""Domain randomization and actuation latency for the Meta-World envs (seeded per episode, recorded).

A ``RandomizationConfig`` says what varies and by how much; a ``Randomizer`` owned by one
``MetaWorldEnv`` applies it. At every reset it first restores the nominal model (so nothing drifts over
episodes), then draws this episode's parameters from an RNG seeded by the episode seed alone and writes
them into the MuJoCo model: friction, object mass, joint damping, actuator gain (the gripper's position
actuators and the mocap-driven arm's action scale), the width of Meta-World's object/goal pose ranges
(its ``_random_reset_space``), camera poses and lighting. During the episode it adds Gaussian observation
and action noise and delays actions: the action applied at step t is the one commanded at t - d_t, with
d_t = round(latency_s / dt) + a per-step jitter; before any command is due a hold action (zero arm delta,
gripper unchanged) is applied. So an episode (dynamics, noise, delays) is a function of (config, episode
seed), and the drawn scalars are returned as ``dr_*`` info keys, which datasets and evaluation record.

The all-nominal config (``RandomizationConfig()``, configs/randomization/none.yaml) is "off": the env
then never calls into this module and behaves bit for bit as without it.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

SCALE_FIELDS = ("friction", "object_mass", "joint_damping", "actuator_gain", "light_diffuse")
STD_FIELDS = ("camera_pos_std", "camera_rot_std", "light_pos_std", "obs_noise_std", "action_noise_std")
PARAM_KEYS = (
    "dr_friction",
    "dr_object_mass",
    "dr_joint_damping",
    "dr_actuator_gain",
    "dr_pose_range_scale",
    "dr_light_diffuse",
    "dr_latency_steps",
)
GRIPPER_OPEN = -1.0  # Meta-World's reset leaves the gripper commanded open (do_simulation([-1, 1]))
_RNG_TAG_MODEL, _RNG_TAG_EPISODE = 2, 3  # SeedSequence tags: 1 is the env's seed stream (metaworld_env)


@dataclass(frozen=True)
class RandomizationConfig:
    """What is randomized per episode; every default is nominal (no randomization).

    Scale ranges ``(lo, hi)`` multiply the nominal value by a factor drawn uniformly per episode (one
    factor per quantity and episode). ``pose_range_scale`` widens (> 1) or narrows Meta-World's object and
    goal position ranges around their centres. Stds are Gaussian, in metres / radians / observation units
    / action units. Latency and jitter are in seconds and are rounded to env steps (Meta-World: 12.5 ms).
    """

    friction: tuple[float, float] = (1.0, 1.0)  # sliding friction of every geom
    object_mass: tuple[float, float] = (1.0, 1.0)  # mass and inertia of movable non-robot bodies
    joint_damping: tuple[float, float] = (1.0, 1.0)  # every dof's damping
    actuator_gain: tuple[float, float] = (1.0, 1.0)  # gripper kp and the arm's action -> mocap delta scale
    pose_range_scale: tuple[float, float] = (1.0, 1.0)  # width of the object/goal initial position ranges
    camera_pos_std: float = 0.0  # m, per camera and axis (world-fixed cameras)
    camera_rot_std: float = 0.0  # rad, a random rotation per camera
    light_pos_std: float = 0.0  # m, per light and axis
    light_diffuse: tuple[float, float] = (1.0, 1.0)  # brightness scale of every light
    obs_noise_std: float = 0.0  # added to obs["state"] every step
    action_noise_std: float = 0.0  # added to the applied action every step (then clipped to [-1, 1])
    latency_s: float = 0.0  # delay between commanding and applying an action
    latency_jitter_s: float = 0.0  # per-step uniform jitter of the delay, +-this (control-rate jitter)

    def __post_init__(self) -> None:
        for name in (*SCALE_FIELDS, "pose_range_scale"):
            value = getattr(self, name)
            try:
                lo, hi = (float(v) for v in value)
            except (TypeError, ValueError):
                raise ValueError(
                    f"randomization.{name}={value!r} is not valid: expected a [lo, hi] pair, e.g. [0.8, 1.2]"
                ) from None
            if not 0.0 < lo <= hi:
                raise ValueError(
                    f"randomization.{name}=[{lo}, {hi}] is not valid: expected 0 < lo <= hi "
                    f"(a scale of the nominal value; [1.0, 1.0] is nominal)"
                )
            object.__setattr__(self, name, (lo, hi))
        for name in (*STD_FIELDS, "latency_s", "latency_jitter_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0.0:
                raise ValueError(
                    f"randomization.{name}={value!r} is not valid: expected a number >= 0 (0: off)"
                )
            object.__setattr__(self, name, float(value))

    @property
    def enabled(self) -> bool:
        """False for the all-nominal config: the env then skips randomization entirely."""
        return self != RandomizationConfig()

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (pairs as lists): what datasets' env_args and metrics.json record."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> RandomizationConfig:
        """Build from a dict / Hydra node; unknown keys raise naming the nearest field. ``name`` is ignored."""
        fields = [f.name for f in dataclasses.fields(cls)]
        kwargs: dict[str, Any] = {}
        for key, value in dict(values).items():
            if key == "name":  # the Hydra group's label (none / default / strong)
                continue
            if key not in fields:
                near = difflib.get_close_matches(str(key), fields, n=1, cutoff=0.5)
                hint = f"; did you mean {near[0]!r}?" if near else ""
                raise ValueError(f"unknown randomization key {key!r}: expected one of {fields}{hint}")
            iterable = hasattr(value, "__iter__") and not isinstance(value, str | bytes)
            kwargs[key] = tuple(value) if iterable else value  # Hydra ListConfig -> tuple
        return cls(**kwargs)


def as_config(randomization: RandomizationConfig | Mapping[str, Any] | None) -> RandomizationConfig:
    """Accept a config, a dict / Hydra node, or None (nominal)."""
    if randomization is None:
        return RandomizationConfig()
    if isinstance(randomization, RandomizationConfig):
        return randomization
    if isinstance(randomization, Mapping) or hasattr(randomization, "items"):
        return RandomizationConfig.from_dict(dict(randomization.items()))
    raise TypeError(
        f"randomization={randomization!r} is not valid: expected a RandomizationConfig, a dict, or None"
    )


def _random_rotation_quat(rng: np.random.Generator, std: float) -> np.ndarray:
    """A small rotation as a unit quaternion (w, x, y, z): axis-angle with angle ~ N(0, std^2)."""
    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis) + 1e-12
    angle = rng.normal(0.0, std)
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis])


class Randomizer:
    """Applies a ``RandomizationConfig`` to one Meta-World env: model parameters, noise and latency.

    ``mw_env`` is Meta-World's env (its ``model``, ``action_scale`` and ``_random_reset_space``);
    ``dt`` its control period in seconds. Call ``reset(episode_seed)`` before Meta-World's reset,
    ``action(a)`` to get the action to apply this step and ``observe(state)`` for the observed state.
    """

    def __init__(self, config: RandomizationConfig, mw_env: Any, dt: float) -> None:
        self.config = config
        self._mw = mw_env
        self.model: mujoco.MjModel = mw_env.model
        self.dt = float(dt)
        m = self.model
        robot_root = int(m.body_rootid[m.body("hand").id])
        movable = (m.body_weldid != 0) & (m.body_rootid != robot_root) & (m.body_mass > 0)  # (nbody,)
        self._object_bodies = np.nonzero(movable)[0]
        self._gripper = np.nonzero(m.actuator_gaintype == mujoco.mjtGain.mjGAIN_FIXED)[0]
        self._fixed_cams = np.nonzero(m.cam_bodyid == 0)[0]
        space = mw_env._random_reset_space
        self._nominal = {
            "geom_friction": m.geom_friction.copy(),
            "body_mass": m.body_mass.copy(),
            "body_inertia": m.body_inertia.copy(),
            "dof_damping": m.dof_damping.copy(),
            "actuator_gainprm": m.actuator_gainprm.copy(),
            "actuator_biasprm": m.actuator_biasprm.copy(),
            "cam_pos": m.cam_pos.copy(),
            "cam_quat": m.cam_quat.copy(),
            "light_pos": m.light_pos.copy(),
            "light_diffuse": m.light_diffuse.copy(),
            "action_scale": float(mw_env.action_scale),
            "reset_low": None if space is None else space.low.copy(),
            "reset_high": None if space is None else space.high.copy(),
        }
        self._delay = round(config.latency_s / self.dt)
        self._jitter = round(config.latency_jitter_s / self.dt)
        self._rng = np.random.default_rng(0)
        self._commands: deque[np.ndarray] = deque()
        self._step = 0
        self._applied_index = -1  # index of the command applied last (-1: none yet, holding)
        self._gripper_cmd = GRIPPER_OPEN
        self.params: dict[str, float] = {}

    # ----------------------------------------------------------------- model parameters
    def restore(self) -> None:
        """Put every randomized model field back to its nominal value."""
        m, nom = self.model, self._nominal
        m.geom_friction[:] = nom["geom_friction"]
        m.body_mass[:] = nom["body_mass"]
        m.body_inertia[:] = nom["body_inertia"]
        m.dof_damping[:] = nom["dof_damping"]
        m.actuator_gainprm[:] = nom["actuator_gainprm"]
        m.actuator_biasprm[:] = nom["actuator_biasprm"]
        m.cam_pos[:] = nom["cam_pos"]
        m.cam_quat[:] = nom["cam_quat"]
        m.light_pos[:] = nom["light_pos"]
        m.light_diffuse[:] = nom["light_diffuse"]
        self._mw.action_scale = nom["action_scale"]
        if nom["reset_low"] is not None:
            self._mw._random_reset_space.low[:] = nom["reset_low"]
            self._mw._random_reset_space.high[:] = nom["reset_high"]

    def reset(self, episode_seed: int) -> dict[str, float]:
        """Restore nominal, draw and apply this episode's parameters; return them (``dr_*`` keys)."""
        cfg, m, nom = self.config, self.model, self._nominal
        self.restore()
        rng = np.random.default_rng([int(episode_seed), _RNG_TAG_MODEL])
        scale = {name: float(rng.uniform(*getattr(cfg, name))) for name in SCALE_FIELDS}
        pose = float(rng.uniform(*cfg.pose_range_scale))
        m.geom_friction[:, 0] = nom["geom_friction"][:, 0] * scale["friction"]
        m.body_mass[self._object_bodies] *= scale["object_mass"]
        m.body_inertia[self._object_bodies] *= scale["object_mass"]
        m.dof_damping[:] = nom["dof_damping"] * scale["joint_damping"]
        gain = scale["actuator_gain"]
        m.actuator_gainprm[self._gripper, 0] *= gain  # position actuator: gain kp, bias (0, -kp, -kv)
        m.actuator_biasprm[self._gripper, 1] *= gain
        self._mw.action_scale = nom["action_scale"] * gain
        if nom["reset_low"] is not None:
            centre = (nom["reset_low"] + nom["reset_high"]) / 2
            half = (nom["reset_high"] - nom["reset_low"]) / 2 * pose
            self._mw._random_reset_space.low[:] = centre - half
            self._mw._random_reset_space.high[:] = centre + half
        for cam in self._fixed_cams:
            m.cam_pos[cam] = nom["cam_pos"][cam] + rng.normal(0.0, cfg.camera_pos_std, 3)
            if cfg.camera_rot_std > 0:
                q = np.empty(4)
                mujoco.mju_mulQuat(q, _random_rotation_quat(rng, cfg.camera_rot_std), nom["cam_quat"][cam])
                m.cam_quat[cam] = q
        m.light_pos[:] = nom["light_pos"] + rng.normal(0.0, cfg.light_pos_std, nom["light_pos"].shape)
        m.light_diffuse[:] = np.clip(nom["light_diffuse"] * scale["light_diffuse"], 0.0, 1.0)

        self._rng = np.random.default_rng([int(episode_seed), _RNG_TAG_EPISODE])
        self._commands.clear()
        self._step = 0
        self._applied_index = -1
        self._gripper_cmd = GRIPPER_OPEN
        self.params = {
            "dr_friction": scale["friction"],
            "dr_object_mass": scale["object_mass"],
            "dr_joint_damping": scale["joint_damping"],
            "dr_actuator_gain": gain,
            "dr_pose_range_scale": pose,
            "dr_light_diffuse": scale["light_diffuse"],
            "dr_latency_steps": float(self._delay),
        }
        return dict(self.params)

    # ----------------------------------------------------------------- per step
    def action(self, commanded: np.ndarray) -> np.ndarray:
        """The (4,) action to apply now, given the one commanded now: delayed, noised, clipped."""
        self._commands.append(np.asarray(commanded, dtype=np.float64).copy())
        delay = self._delay
        if self._jitter:
            delay = max(0, delay + int(self._rng.integers(-self._jitter, self._jitter + 1)))
        # Commands are applied in order: jitter may hold an action longer, never replay an older one.
        index = max(self._applied_index, self._step - delay)
        self._step += 1
        if index < 0:
            applied = np.array([0.0, 0.0, 0.0, self._gripper_cmd])  # hold: nothing commanded is due yet
        else:
            oldest = self._step - len(self._commands)  # command index of self._commands[0]
            applied = self._commands[index - oldest].copy()
            while self._step - len(self._commands) < index:  # drop commands that can never be applied
                self._commands.popleft()
            self._applied_index = index
        if self.config.action_noise_std > 0:
            applied = applied + self._rng.normal(0.0, self.config.action_noise_std, applied.shape)
        applied = np.clip(applied, -1.0, 1.0)
        self._gripper_cmd = float(applied[3])
        return applied

    def observe(self, state: np.ndarray) -> np.ndarray:
        """The observed (39,) state: the true one plus Gaussian noise (float32 like the clean obs)."""
        if self.config.obs_noise_std <= 0:
            return state
        noise = self._rng.normal(0.0, self.config.obs_noise_std, state.shape)
        return (state + noise).astype(state.dtype)

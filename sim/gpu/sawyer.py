"""Meta-World's Sawyer scene on MuJoCo Warp: thousands of worlds stepped together, task logic in torch.

Meta-World's task code is per-env Python, so it cannot run on a GPU batch. This module ports the part every
Sawyer task shares (``metaworld/sawyer_xyz_env.py``, metaworld==3.1.1) to batched tensor code over the
same MJCF: the mocap-driven hand (``action[:3] * 0.01`` added to the mocap position, clipped to the task's
mocap box; gripper ctrl ``[a3, -a3]``; ``frame_skip=5`` physics steps), the 39-d goal-observable
observation (hand pos, gripper opening, object pos/quat padded to 14, previous frame, goal) clipped to
Meta-World's observation box, the settled-hand reset (``_reset_hand``: 50 control steps at
``hand_init_pos`` with the gripper open) and seeded per-episode initial states. Tasks subclass
``WarpSawyerEnv`` and supply the reset distribution, reward and success (``sim/gpu/reach.py``, ``sim/gpu/push.py``).

Protocol: ``WarpSawyerEnv`` is a ``sim.lockstep.TorchBatchedEnv`` (the lockstep protocol shared with the
Isaac backends), so it has the same auto-reset, info layout, ``action_chunk`` (B, Ta, 4),
``obs_history`` (B, To, 39) and ``output`` ("torch" | "numpy") as every batched env, and ``sim.evaluate``
and the steering loops run on it unchanged: ``reset(seed) -> {"state": (B, 39)}``, ``step(action (B, 4))
-> obs, reward (B,), terminated (B,), truncated (B,), info`` with Meta-World's reward terms in ``info``.
This module supplies only the simulator: ``_sim_reset`` / ``_sim_step``.

Episode seeds: ``reset(seed=s)`` gives world i the episode seed ``sim.episode_seed(s, i)`` (the same seeds
the CPU env uses), ``reset(seed=[s_0, ..., s_B-1])`` exactly those, and each auto-reset the next seed queued
for world i (``queue_episode_seeds``, as ``sim.evaluate`` does) or else the next of its own stream. An
initial state is a function of its episode seed alone (a counter-based hash, so it does not depend on B or
the device), but it is *not* the CPU env's initial state for that seed (Meta-World draws from numpy's
generator): the distribution is the same, the samples differ.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections import deque
from pathlib import Path
from typing import Any

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from robosteer.sim.lockstep import SimStep, TorchBatchedEnv

FRAME_SKIP = 5  # SawyerXYZEnv's frame_skip
ACTION_SCALE = 0.01  # SawyerXYZEnv's action_scale: metres of mocap motion per unit action
RESET_HAND_STEPS = 50  # SawyerXYZEnv._reset_hand's control steps
MOCAP_QUAT = (1.0, 0.0, 1.0, 0.0)  # set_xyz_action's mocap orientation (MuJoCo normalises it)
# Constraint rows allocated per world (ours). MuJoCo Warp sizes them from the state it is given (64 for the
# settled hand), and a world past that drops the rest of its constraints for the step: the gripper passes
# into the puck or the table. Warp's collision pipeline makes more rows than CPU MuJoCo's (up to 51 for the
# push-v3 expert here, 29 on CPU) and a steered or noisy hand up to 89; 256 leaves room and costs nothing
# measurable on warp's CPU device (push-v3, 64 worlds, 200 noisy steps: 19.3 s at 64, 18.9 s at 256).
NJMAX = 256
WELD_EQ_DATA = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, 5.0)  # SawyerMocapBase.reset_mocap_welds
HAND_SPACE_LOW = (-0.525, 0.348, -0.0525)  # SawyerXYZEnv._HAND_SPACE: the observation box of the hand
HAND_SPACE_HIGH = (0.525, 1.025, 0.7)
OBS_DIM = 39
OBJ_OBS_LEN = 14  # SawyerXYZEnv._obs_obj_max_len
REWARD_MODES = ("dense", "sparse")
_MASK64 = (1 << 64) - 1


def metaworld_asset(relative: str) -> Path:
    """Path of a Meta-World MJCF asset, found without importing metaworld (its code needs mujoco 3.3.0)."""
    spec = importlib.util.find_spec("metaworld")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "metaworld is not installed in this environment: expected metaworld==3.1.1 (installed with "
            "--no-deps by `make gpu-env`) for its MJCF assets"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "assets" / relative
    if not path.is_file():
        raise FileNotFoundError(
            f"Meta-World asset {relative!r} not found at {path}: expected metaworld==3.1.1"
        )
    return path


def load_sawyer_model(xml: Path) -> mujoco.MjModel:
    """The task's MjModel as Meta-World builds it (``reset_mocap_welds`` rewrites the weld's eq_data)."""
    model = mujoco.MjModel.from_xml_path(str(xml))
    for i in range(model.neq):
        if model.eq_type[i] == mujoco.mjtEq.mjEQ_WELD:
            model.eq_data[i, : len(WELD_EQ_DATA)] = WELD_EQ_DATA
    return model


def quat_xyzw_from_matrix(mat: torch.Tensor) -> torch.Tensor:
    """Rotation matrices (..., 3, 3) -> quaternions (..., 4) in scipy's ``Rotation.as_quat`` convention.

    Same branch choice and sign as scipy (Meta-World's object quaternion comes from it), so the
    observation's quaternion matches Meta-World's, not just up to sign.
    """
    m = mat
    diag = torch.diagonal(m, dim1=-2, dim2=-1)  # (..., 3)
    trace = diag.sum(-1, keepdim=True)  # (..., 1)
    choice = torch.cat([diag, trace], dim=-1).argmax(-1)  # (...,)
    out = torch.empty((*m.shape[:-2], 4), dtype=m.dtype, device=m.device)
    out[..., 0] = m[..., 2, 1] - m[..., 1, 2]  # choice == 3 (trace largest)
    out[..., 1] = m[..., 0, 2] - m[..., 2, 0]
    out[..., 2] = m[..., 1, 0] - m[..., 0, 1]
    out[..., 3] = 1.0 + trace[..., 0]
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        q = torch.empty_like(out)
        q[..., i] = 1.0 - trace[..., 0] + 2.0 * m[..., i, i]
        q[..., j] = m[..., j, i] + m[..., i, j]
        q[..., k] = m[..., k, i] + m[..., i, k]
        q[..., 3] = m[..., k, j] - m[..., j, k]
        out = torch.where((choice == i)[..., None], q, out)
    return out / out.norm(dim=-1, keepdim=True)


def _tolerance(
    x: torch.Tensor, upper: float, margin: torch.Tensor, lower: float, sigmoid: Any
) -> torch.Tensor:
    """``reward_utils.tolerance`` with ``sigmoid`` a function of the scaled distance ``d`` (1 at ``margin``)."""
    margin = torch.as_tensor(margin, dtype=x.dtype, device=x.device)
    d = torch.where(x < lower, lower - x, x - upper) / torch.where(
        margin > 0, margin, torch.ones_like(margin)
    )
    outside = torch.where(margin > 0, sigmoid(d), torch.zeros_like(d))
    return torch.where((x >= lower) & (x <= upper), torch.ones_like(x), outside)


def long_tail_tolerance(
    x: torch.Tensor,
    upper: float,
    margin: torch.Tensor,
    lower: float = 0.0,
    value_at_margin: float = 0.1,
) -> torch.Tensor:
    """Meta-World's ``reward_utils.tolerance(x, bounds=(lower, upper), margin, sigmoid="long_tail")``.

    1 inside the bounds, ``1 / ((d * scale)**2 + 1)`` outside with ``d`` the distance to the nearest bound over
    ``margin`` (0 outside where ``margin == 0``), ``scale`` such that ``d == 1`` gives ``value_at_margin``.
    """
    scale = (1.0 / value_at_margin - 1.0) ** 0.5
    return _tolerance(x, upper, margin, lower, lambda d: 1.0 / ((d * scale) ** 2 + 1.0))


def gaussian_tolerance(
    x: torch.Tensor,
    upper: float,
    margin: torch.Tensor,
    lower: float = 0.0,
    value_at_margin: float = 0.1,
) -> torch.Tensor:
    """``reward_utils.tolerance(..., sigmoid="gaussian")``: ``exp(-(d * scale)**2 / 2)`` outside the bounds."""
    scale = (-2.0 * np.log(value_at_margin)) ** 0.5
    return _tolerance(x, upper, margin, lower, lambda d: torch.exp(-0.5 * (d * scale) ** 2))


def hamacher_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Meta-World's ``reward_utils.hamacher_product``: ab / (a + b - ab), 0 where the denominator is 0."""
    den = a + b - a * b
    return torch.where(
        den > 0, a * b / torch.where(den > 0, den, torch.ones_like(den)), torch.zeros_like(den)
    )


def _splitmix64(x: torch.Tensor) -> torch.Tensor:
    """SplitMix64 finaliser on int64 tensors (wrapping arithmetic; logical shifts emulated by masks)."""

    def srl(v: torch.Tensor, s: int) -> torch.Tensor:
        return (v >> s) & ((1 << (64 - s)) - 1)

    x = x + np.int64(0x9E3779B97F4A7C15 - (1 << 64))
    x = (x ^ srl(x, 30)) * np.int64(0xBF58476D1CE4E5B9 - (1 << 64))
    x = (x ^ srl(x, 27)) * np.int64(0x94D049BB133111EB - (1 << 64))
    return x ^ srl(x, 31)


def hashed_uniform(seeds: torch.Tensor, counter: int, n: int) -> torch.Tensor:
    """(B,) int64 seeds -> (B, n) float64 uniforms in [0, 1), a function of (seed, counter, column) alone."""
    cols = torch.arange(n, device=seeds.device, dtype=torch.int64)
    key = _splitmix64(seeds)[:, None] ^ _splitmix64(cols + np.int64(counter * 1_000_003 + 1))[None, :]
    bits = (_splitmix64(key) >> 11) & ((1 << 53) - 1)  # (B, n) 53 random bits
    return bits.to(torch.float64) / float(1 << 53)


def sample_obj_goal(
    seeds: torch.Tensor,
    low: tuple[float, ...],
    high: tuple[float, ...],
    min_xy: float = 0.15,
    max_redraws: int = 64,
) -> torch.Tensor:
    """(n,) seeds -> (n, 6) [object xyz, goal xyz] uniform in [low, high], redrawn while their xy are closer
    than ``min_xy`` (Meta-World's reach/push ``reset_model`` loop; 64 redraws in a row: p < 1e-30 there)."""
    lo = torch.tensor(low, dtype=torch.float64, device=seeds.device)  # (6,)
    hi = torch.tensor(high, dtype=torch.float64, device=seeds.device)
    vec = lo + (hi - lo) * hashed_uniform(seeds, 0, 6)  # (n, 6)
    for k in range(1, max_redraws):
        bad = (vec[:, :2] - vec[:, 3:5]).norm(dim=-1) < min_xy  # (n,)
        if not bool(bad.any()):
            break
        vec = torch.where(bad[:, None], lo + (hi - lo) * hashed_uniform(seeds, k, 6), vec)
    return vec.to(torch.float32)


def sample_box(seeds: torch.Tensor, low: tuple[float, ...], high: tuple[float, ...]) -> torch.Tensor:
    """(n,) seeds -> (n, len(low)) float32 uniform in [low, high]: Meta-World's ``_get_state_rand_vec``."""
    lo = torch.tensor(low, dtype=torch.float64, device=seeds.device)
    hi = torch.tensor(high, dtype=torch.float64, device=seeds.device)
    return (lo + (hi - lo) * hashed_uniform(seeds, 0, len(low))).to(torch.float32)


def next_seed(seeds: torch.Tensor) -> torch.Tensor:
    """The next episode seed of each world's stream: (B,) int64 in [0, 2**32)."""
    return _splitmix64(seeds ^ np.int64(0x5DEECE66D)) & 0xFFFFFFFF


class WarpSawyerEnv(TorchBatchedEnv):
    """Batched Meta-World Sawyer task on MuJoCo Warp; subclasses define the task (see the module docstring).

    The protocol (chunking, history, bookkeeping) comes from ``TorchBatchedEnv``, so the GPU backend behaves
    exactly as the Isaac ones and DSRL/EXPO/``sim.evaluate`` need no GPU-specific code.
    """

    XML: str = ""  # asset path under metaworld/assets
    TASK: str = ""
    HAND_INIT_POS: tuple[float, float, float] = (0.0, 0.6, 0.2)
    MOCAP_LOW: tuple[float, float, float] = (-0.2, 0.5, 0.06)
    MOCAP_HIGH: tuple[float, float, float] = (0.2, 0.7, 0.6)
    GOAL_LOW: tuple[float, float, float] = (0.0, 0.0, 0.0)
    GOAL_HIGH: tuple[float, float, float] = (0.0, 0.0, 0.0)
    OBJ_BODY = "obj"
    OBJ_GEOM = "objGeom"
    OBJ_QPOS = slice(9, 12)  # _set_obj_xyz writes qpos[9:12] and zeroes qvel[9:15]
    OBJ_QVEL = slice(9, 15)
    # Articulated tasks (door, drawer, window, button): Meta-World moves this body per episode
    # (``model.body(ROOT_BODY).pos = rand_vec``), so its model position is kept per world, and the object's
    # joint (OBJ_QPOS) starts at JOINT_INIT. None: a free object placed through qpos[OBJ_QPOS].
    ROOT_BODY: str | None = None
    JOINT_INIT = 0.0
    DEFAULT_MAX_STEPS = 200

    def __init__(
        self,
        num_worlds: int = 1,
        seed: int = 0,
        device: str = "cpu",
        max_episode_steps: int | None = None,
        terminate_on_success: bool = True,
        reward: str = "dense",
        action_chunk: int | None = None,
        obs_history: int | None = None,
        output: str = "torch",
    ) -> None:
        from robosteer.sim.errors import check_choice
        from robosteer.sim.metaworld_env import check_seed

        if isinstance(num_worlds, bool) or not isinstance(num_worlds, int) or num_worlds < 1:
            raise ValueError(f"num_worlds={num_worlds!r} is not valid: expected an int >= 1")
        self.num_worlds = self.num_envs = num_worlds
        self.seed = check_seed(seed)
        self.reward_mode = check_choice("reward mode", reward, REWARD_MODES)
        self.max_episode_steps = (
            self.DEFAULT_MAX_STEPS if max_episode_steps is None else int(max_episode_steps)
        )
        if not 1 <= self.max_episode_steps <= 500:
            raise ValueError(f"max_episode_steps={max_episode_steps!r} is not valid: expected 1..500")
        self.terminate_on_success = bool(terminate_on_success)
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        if self.device.type not in ("cpu", "cuda"):
            raise ValueError(f"device={device!r} is not valid: expected 'cpu' or 'cuda[:N]'")
        super().__init__(
            task=self.TASK,
            num_envs=num_worlds,
            obs_dim=OBS_DIM,
            action_dim=4,
            device=self.device,
            action_chunk=action_chunk,
            obs_history=obs_history,
            output=output,
            max_episode_steps=self.max_episode_steps,
        )
        self.wp_device = wp.get_device(str(self.device))

        self.model = load_sawyer_model(metaworld_asset(self.XML))
        self.dt = float(self.model.opt.timestep) * FRAME_SKIP
        self.frame_skip = FRAME_SKIP
        settled = self._settled_hand_state()
        B, dev = num_worlds, self.device
        per_world = {"body_pos": B} if self.ROOT_BODY else None
        with wp.ScopedDevice(self.wp_device):
            self._m = mjw.put_model(self.model, batch_sizes=per_world)
            self._d = mjw.put_data(self.model, settled, nworld=B, njmax=NJMAX)
        # Zero-copy torch views of the warp state: writing them writes the simulation.
        t = {k: wp.to_torch(getattr(self._d, k)) for k in ("qpos", "qvel", "qacc_warmstart", "ctrl", "time")}
        self._qpos, self._qvel, self._warm, self._ctrl, self._time = (
            t["qpos"],
            t["qvel"],
            t["qacc_warmstart"],
            t["ctrl"],
            t["time"],
        )  # (B, nq), (B, nv), (B, nv), (B, nu), (B,)
        self._mocap_pos = wp.to_torch(self._d.mocap_pos)  # (B, 1, 3)
        self._mocap_quat = wp.to_torch(self._d.mocap_quat)  # (B, 1, 4)
        self._xpos = wp.to_torch(self._d.xpos)  # (B, nbody, 3)
        self._site_xpos = wp.to_torch(self._d.site_xpos)  # (B, nsite, 3)
        self._site_xmat = wp.to_torch(self._d.site_xmat)  # (B, nsite, 3, 3)
        self._geom_xmat = wp.to_torch(self._d.geom_xmat)  # (B, ngeom, 3, 3)
        self._geom_xpos = wp.to_torch(self._d.geom_xpos)  # (B, ngeom, 3)
        self._xquat = wp.to_torch(self._d.xquat)  # (B, nbody, 4) wxyz
        self._body_pos = wp.to_torch(
            self._m.body_pos
        )  # (B or 1, nbody, 3): the model's, per world if ROOT_BODY
        # The settled reset state every episode starts from (before its object is placed).
        f32 = dict(dtype=torch.float32, device=dev)
        self._init = {
            "qpos": torch.tensor(settled.qpos, **f32),
            "qvel": torch.tensor(settled.qvel, **f32),
            "qacc_warmstart": torch.tensor(settled.qacc_warmstart, **f32),
            "ctrl": torch.tensor(settled.ctrl, **f32),
            "mocap_pos": torch.tensor(settled.mocap_pos, **f32),
            "mocap_quat": torch.tensor(settled.mocap_quat, **f32),
        }
        name = lambda kind, n: mujoco.mj_name2id(self.model, kind, n)  # noqa: E731
        self._hand = name(mujoco.mjtObj.mjOBJ_BODY, "hand")
        self._claws = (
            name(mujoco.mjtObj.mjOBJ_BODY, "rightclaw"),
            name(mujoco.mjtObj.mjOBJ_BODY, "leftclaw"),
        )
        self._obj = name(mujoco.mjtObj.mjOBJ_BODY, self.OBJ_BODY)
        self._obj_geom = name(mujoco.mjtObj.mjOBJ_GEOM, self.OBJ_GEOM)
        self._root = name(mujoco.mjtObj.mjOBJ_BODY, self.ROOT_BODY) if self.ROOT_BODY else -1
        self._static_geoms = self._static_geoms_under_root()  # (k,) long
        self._static_geom_xpos0 = torch.tensor(settled.geom_xpos[self._static_geoms.numpy()], **f32)  # (k, 3)
        self._static_geoms = self._static_geoms.to(dev)
        self._root_pos0 = torch.tensor(self.model.body_pos[max(self._root, 0)], **f32)  # (3,)
        self._pads = (
            name(mujoco.mjtObj.mjOBJ_SITE, "rightEndEffector"),
            name(mujoco.mjtObj.mjOBJ_SITE, "leftEndEffector"),
        )
        # Meta-World's init_tcp and the object's resting position after _reset_hand (tasks' reward margins).
        self.init_tcp = torch.tensor(
            0.5 * (settled.site_xpos[self._pads[0]] + settled.site_xpos[self._pads[1]]), **f32
        )
        self.settled_obj_pos = torch.tensor(settled.xpos[self._obj], **f32)  # (3,)
        self._mocap_low = torch.tensor(self.MOCAP_LOW, **f32)
        self._mocap_high = torch.tensor(self.MOCAP_HIGH, **f32)
        self._mocap_quat_cmd = torch.tensor(MOCAP_QUAT, **f32) / 2**0.5
        self._obs_low = torch.tensor(
            [*HAND_SPACE_LOW, -1.0]
            + [-np.inf] * OBJ_OBS_LEN
            + [*HAND_SPACE_LOW, -1.0]
            + [-np.inf] * OBJ_OBS_LEN
            + list(self.GOAL_LOW),
            **f32,
        )  # (39,)
        self._obs_high = torch.tensor(
            [*HAND_SPACE_HIGH, 1.0]
            + [np.inf] * OBJ_OBS_LEN
            + [*HAND_SPACE_HIGH, 1.0]
            + [np.inf] * OBJ_OBS_LEN
            + list(self.GOAL_HIGH),
            **f32,
        )  # (39,)
        self.goal = torch.zeros(B, 3, **f32)  # (B, 3) each world's target
        self.obj_init_pos = torch.zeros(B, 3, **f32)  # (B, 3)
        self._prev = torch.zeros(B, 18, **f32)  # (B, 18) previous frame of the observation
        self.episode_seeds = torch.full((B,), -1, dtype=torch.int64, device=dev)  # (B,) torch, unlike CPU's
        self._steps = torch.zeros(B, dtype=torch.int64, device=dev)  # (B,) for the time limit
        self._queued: list[deque[int]] = [deque() for _ in range(B)]  # per world: seeds of later episodes
        self._graph: Any = None
        self._state_data = mujoco.MjData(self.model)  # get_sim_states lays each world out through it

    # ----------------------------------------------------------------- task hooks
    def _sample_initial(self, seeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(n,) episode seeds -> object positions (n, 3), goals (n, 3): the task's reset distribution."""
        raise NotImplementedError(f"{type(self).__name__} must define its reset distribution")

    def _evaluate(
        self, obs: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """(B, 39) clipped obs, (B, 4) action -> dense reward (B,), success (B,) bool, Meta-World's info terms."""
        raise NotImplementedError(f"{type(self).__name__} must define its reward and success")

    def _object_pos(self) -> torch.Tensor:
        """(B, 3) the observation's object position (Meta-World's ``_get_pos_objects``)."""
        return self._xpos[:, self._obj]

    def _object_quat(self) -> torch.Tensor:
        """(B, 4) the observation's object quaternion (``_get_quat_objects``: scipy xyzw of the geom here)."""
        return quat_xyzw_from_matrix(self._geom_xmat[:, self._obj_geom])

    def _start_episodes(self, mask: torch.Tensor) -> None:
        """Per-episode quantities that need the placed scene's kinematics (worlds ``mask`` (B,)); none here."""

    def site_pos(self, name: str) -> torch.Tensor:
        """(B, 3) world position of site ``name`` (Meta-World's ``_get_site_pos``)."""
        return self._site_xpos[:, self._index(mujoco.mjtObj.mjOBJ_SITE, "site", name)]

    def _index(self, kind: mujoco.mjtObj, label: str, name: str) -> int:
        """The model's index of the ``label`` (body, site) called ``name``; a name it lacks is one line."""
        i = mujoco.mj_name2id(self.model, kind, name)
        if i < 0:
            raise ValueError(
                f"{label} {name!r} is not in {self.XML}: expected one of the model's {label} names"
            )
        return i

    # ----------------------------------------------------------------- per-world placement
    def _static_geoms_under_root(self) -> torch.Tensor:
        """Geoms of ROOT_BODY's subtree that are welded to the world: (k,) long (empty without ROOT_BODY).

        MuJoCo Warp computes a static geom's world pose once, when the data is made, and never again, so
        moving ROOT_BODY per world would leave its static geoms (the drawer's case, the window's frame, the
        button's box) where the model put them while their jointed children move: the drawer then collides
        with a case that is not there (measured: 2 cm penetrations at the first step). ``_place_root`` moves them.
        """
        m = self.model
        if self._root < 0:
            return torch.zeros(0, dtype=torch.long)
        if m.body_parentid[self._root] != 0:
            raise ValueError(f"{self.ROOT_BODY!r} must be a child of the world body to be placed per world")

        def under_root(body: int) -> bool:
            while body > 0 and body != self._root:
                body = int(m.body_parentid[body])
            return body == self._root

        static = [
            g
            for g in range(m.ngeom)
            if m.body_weldid[m.geom_bodyid[g]] == 0 and under_root(int(m.geom_bodyid[g]))
        ]
        return torch.tensor(static, dtype=torch.long)

    def _place(self, idx: torch.Tensor, obj: torch.Tensor, goal: torch.Tensor, qpos: torch.Tensor) -> None:
        """Place worlds ``idx`` (n,)'s scene from ``_sample_initial``'s ``obj`` (n, 3): a free object through
        ``qpos`` (n, nq), or ROOT_BODY at ``obj`` with the object's joint at JOINT_INIT."""
        if self.ROOT_BODY:
            self._place_root(idx, obj)
            qpos[:, self.OBJ_QPOS] = self.JOINT_INIT
        else:
            qpos[:, self.OBJ_QPOS] = obj

    def _place_root(self, idx: torch.Tensor, pos: torch.Tensor) -> None:
        """Put ROOT_BODY of worlds ``idx`` (n,) at ``pos`` (n, 3), its static geoms with it (a translation:
        the root's parent is the world and its orientation does not change)."""
        self._body_pos[idx, self._root] = pos
        shift = (pos - self._root_pos0)[:, None]  # (n, 1, 3)
        self._geom_xpos[idx[:, None], self._static_geoms[None]] = self._static_geom_xpos0 + shift

    # ----------------------------------------------------------------- physics
    def _settled_hand_state(self) -> mujoco.MjData:
        """Meta-World's ``_reset_hand`` on CPU MuJoCo: the state every episode starts from."""
        data = mujoco.MjData(self.model)
        mujoco.mj_resetData(self.model, data)
        for _ in range(RESET_HAND_STEPS):
            data.mocap_pos[0] = self.HAND_INIT_POS
            data.mocap_quat[0] = MOCAP_QUAT
            data.ctrl[:] = (-1.0, 1.0)
            mujoco.mj_step(self.model, data, nstep=FRAME_SKIP)
        mujoco.mj_forward(self.model, data)
        return data

    def _physics(self) -> None:
        """frame_skip physics steps, then kinematics at the new state (Meta-World's mj_forward after stepping)."""
        for _ in range(FRAME_SKIP):
            mjw.step(self._m, self._d)
        mjw.kinematics(self._m, self._d)

    def _run_physics(self) -> None:
        """Run ``_physics`` on the env's device; on CUDA as one captured graph on torch's stream.

        The CUDA path has not been run yet (no GPU with these packages here); the CPU path is tested.
        """
        if self.device.type != "cuda":
            with wp.ScopedDevice(self.wp_device):
                self._physics()
            return
        stream = wp.stream_from_torch(torch.cuda.current_stream(self.device))
        with wp.ScopedDevice(self.wp_device), wp.ScopedStream(stream):
            if self._graph is None:
                self._physics()  # compile and load every kernel before capturing
                with wp.ScopedCapture() as capture:
                    self._physics()
                self._graph = capture.graph
            else:
                wp.capture_launch(self._graph)

    def _kinematics(self) -> None:
        """Body, geom and site poses of the current qpos (after a reset wrote it)."""
        cuda = self.device.type == "cuda"
        stream = wp.stream_from_torch(torch.cuda.current_stream(self.device)) if cuda else None
        with wp.ScopedDevice(self.wp_device), wp.ScopedStream(stream) if cuda else contextlib.nullcontext():
            mjw.kinematics(self._m, self._d)

    # ----------------------------------------------------------------- observation
    def body_pos(self, name: str) -> torch.Tensor:
        """(B, 3) world position of body ``name`` (Meta-World's ``get_body_com``)."""
        return self._xpos[:, self._index(mujoco.mjtObj.mjOBJ_BODY, "body", name)]

    def tcp_center(self) -> torch.Tensor:
        """(B, 3) midpoint of the two finger pads (Meta-World's ``tcp_center``)."""
        return 0.5 * (self._site_xpos[:, self._pads[0]] + self._site_xpos[:, self._pads[1]])

    def _gripper_caging(
        self, action: torch.Tensor, obj: torch.Tensor, obj_radius: float, pad_success_thresh: float
    ) -> torch.Tensor:
        """Meta-World's ``SawyerXYZEnv._gripper_caging_reward`` (xz_thresh 0.005, high density): (B,) in [0, 1].

        y caging of each finger pad: ``tolerance(|pad_y - obj_y|, (obj_radius, pad_success_thresh), long_tail)``
        with margin ``| |pad_y - obj_init_y| - pad_success_thresh |``; then ``_caging_with_grip``.
        """
        pad_y = torch.stack([self.body_pos("leftpad")[:, 1], self.body_pos("rightpad")[:, 1]], -1)  # (B, 2)
        pad_to_obj = (pad_y - obj[:, 1:2]).abs()  # (B, 2)
        margin = ((pad_y - self.obj_init_pos[:, 1:2]).abs() - pad_success_thresh).abs()  # (B, 2)
        lr = long_tail_tolerance(pad_to_obj, pad_success_thresh, margin, lower=obj_radius)  # (B, 2)
        return self._caging_with_grip(hamacher_product(lr[:, 0], lr[:, 1]), action, obj)

    def _caging_with_grip(
        self, caging_y: torch.Tensor, action: torch.Tensor, obj: torch.Tensor
    ) -> torch.Tensor:
        """The end of Meta-World's ``_gripper_caging_reward`` that every task shares (their y caging differs):
        xz caging of the TCP (margin 0.005), gripping ``clip(a3, 0, 1)`` once caging > 0.97. (B,) in [0, 1]."""
        xz = [0, 2]
        xz_margin = (self.obj_init_pos[:, xz] - self.init_tcp[xz]).norm(dim=-1) - 0.005  # (B,)
        caging_xz = long_tail_tolerance(
            (self.tcp_center()[:, xz] - obj[:, xz]).norm(dim=-1), 0.005, xz_margin
        )
        closed = action[:, 3].clamp(0.0, 1.0)  # (B,)
        caging = hamacher_product(caging_y, caging_xz)
        gripping = torch.where(caging > 0.97, closed, torch.zeros_like(closed))
        return (hamacher_product(caging, gripping) + caging) / 2

    def _current_frame(self) -> torch.Tensor:
        """(B, 18): hand pos, gripper opening, object pos and quat (xyzw), zero padding."""
        hand = self._xpos[:, self._hand]  # (B, 3)
        gap = (self._xpos[:, self._claws[0]] - self._xpos[:, self._claws[1]]).norm(dim=-1)  # (B,)
        gripper = (gap / 0.1).clamp(0.0, 1.0)[:, None]  # (B, 1)
        obj = self._object_pos()  # (B, 3)
        quat = self._object_quat()  # (B, 4)
        pad = torch.zeros(hand.shape[0], OBJ_OBS_LEN - 7, dtype=hand.dtype, device=hand.device)
        return torch.cat([hand, gripper, obj, quat, pad], dim=-1)

    # ----------------------------------------------------------------- reset
    def _reset_worlds(self, mask: torch.Tensor, seeds: torch.Tensor) -> None:
        """Start new episodes in worlds ``mask`` (B,) bool with episode seeds ``seeds`` (B,) (others unchanged)."""
        idx = mask.nonzero()[:, 0]  # (n,)
        if idx.numel() == 0:
            return
        obj, goal = self._sample_initial(seeds[idx])  # (n, 3), (n, 3)
        qpos = self._init["qpos"].expand(idx.numel(), -1).clone()  # (n, nq)
        self._place(idx, obj, goal, qpos)
        qvel = self._init["qvel"].expand(idx.numel(), -1).clone()  # (n, nv)
        qvel[:, self.OBJ_QVEL] = 0.0
        self._qpos[idx] = qpos
        self._qvel[idx] = qvel
        self._warm[idx] = self._init["qacc_warmstart"]
        self._ctrl[idx] = self._init["ctrl"]
        self._mocap_pos[idx] = self._init["mocap_pos"]
        self._mocap_quat[idx] = self._init["mocap_quat"]
        self._time[idx] = 0.0
        self.goal[idx] = goal
        self.obj_init_pos[idx] = obj
        self.episode_seeds[idx] = seeds[idx]
        self._steps[idx] = 0

    def set_state(
        self,
        qpos: torch.Tensor,
        qvel: torch.Tensor,
        mocap_pos: torch.Tensor,
        goal: torch.Tensor,
        qacc_warmstart: torch.Tensor | None = None,
        ctrl: torch.Tensor | None = None,
        root_pos: torch.Tensor | None = None,
    ) -> dict[str, Any]:
        """Start every world's episode from a given state (e.g. one recorded from CPU Meta-World).

        Shapes: qpos (B, nq), qvel (B, nv), mocap_pos (B, 3), goal (B, 3), qacc_warmstart (B, nv), ctrl (B, nu),
        root_pos (B, 3) the position of ``ROOT_BODY`` (articulated tasks only, where it is required).
        Returns the reset observation, as ``reset`` does.
        """
        B, m = self.num_worlds, self.model
        if (root_pos is None) != (self.ROOT_BODY is None):
            need = f"the (B, 3) position of body {self.ROOT_BODY!r}" if self.ROOT_BODY else "None"
            raise ValueError(f"set_state root_pos={'None' if root_pos is None else 'given'}: expected {need}")
        for key, value, shape in (
            ("qpos", qpos, (B, m.nq)),
            ("qvel", qvel, (B, m.nv)),
            ("mocap_pos", mocap_pos, (B, 3)),
            ("goal", goal, (B, 3)),
        ):
            if tuple(value.shape) != shape:
                raise ValueError(f"set_state {key} has shape {tuple(value.shape)}: expected {shape}")
        f = lambda x: torch.as_tensor(x, dtype=torch.float32, device=self.device)  # noqa: E731
        self._qpos[:] = f(qpos)
        self._qvel[:] = f(qvel)
        self._mocap_pos[:, 0] = f(mocap_pos)
        self._mocap_quat[:] = self._init["mocap_quat"]
        self._warm[:] = self._init["qacc_warmstart"] if qacc_warmstart is None else f(qacc_warmstart)
        self._ctrl[:] = self._init["ctrl"] if ctrl is None else f(ctrl)
        self._time[:] = 0.0
        self.goal[:] = f(goal)
        if root_pos is not None:
            self._place_root(torch.arange(B, device=self.device), f(root_pos))
        free_object = self.OBJ_QPOS.stop - self.OBJ_QPOS.start == 3  # else a joint of ROOT_BODY's object
        self.obj_init_pos[:] = self._qpos[:, self.OBJ_QPOS] if free_object else f(root_pos)
        self._steps.zero_()
        self._clear_queue()
        return self._begin(self._reset_obs(torch.ones(B, dtype=torch.bool, device=self.device)))

    def _reset_obs(self, mask: torch.Tensor) -> torch.Tensor:
        """Kinematics, then the reset observation [frame, frame, goal] (B, 39) for worlds ``mask`` (B,)."""
        self._kinematics()
        self._start_episodes(mask)
        frame = self._current_frame()  # (B, 18)
        self._prev = torch.where(mask[:, None], frame, self._prev)
        return torch.cat([frame, self._prev, self.goal], dim=-1)  # (B, 39)

    def _sim_reset(self, seed: int | None) -> torch.Tensor:
        """Reset every world; returns obs (B, 39) float32 on ``device``.

        ``seed=int``: world i gets episode seed ``sim.episode_seed(seed, i)``; None: the next seed of each
        world's stream (from the construction seed on the first call).
        """
        from robosteer.sim.metaworld_env import check_seed, episode_seed

        if seed is None and self._needs_reset:
            seed = self.seed
        if seed is None:
            seeds = next_seed(self.episode_seeds)
        else:
            s = check_seed(seed)
            seeds = torch.tensor(
                [episode_seed(s, i) for i in range(self.num_worlds)], dtype=torch.int64, device=self.device
            )
        return self._reset_all(seeds)

    def _sim_reset_envs(self, seeds: list[int]) -> torch.Tensor:
        """Reset world i from episode seed ``seeds[i]`` exactly (``sim.evaluate``'s per-env seeds): (B, 39)."""
        from robosteer.sim.metaworld_env import check_seed

        return self._reset_all(
            torch.tensor([check_seed(s) for s in seeds], dtype=torch.int64, device=self.device)
        )

    def _reset_all(self, seeds: torch.Tensor) -> torch.Tensor:
        """New episodes in every world from seeds (B,); a full reset drops queued seeds. Returns (B, 39)."""
        every = torch.ones(self.num_worlds, dtype=torch.bool, device=self.device)
        self._clear_queue()
        self._reset_worlds(every, seeds)
        return self._reset_obs(every)

    # ----------------------------------------------------------------- episode seeds
    def _sim_episode_seeds(self) -> torch.Tensor:
        """(B,) the seed of each world's current episode (``info["episode_seed"]``, ``sim.evaluate``)."""
        return self.episode_seeds

    def queue_episode_seeds(self, seeds_by_env: dict[int, list[int]]) -> None:
        """Seeds for world i's next auto-resets, in order (``sim.evaluate``); a reset clears the queues."""
        for i, seeds in seeds_by_env.items():
            if not 0 <= int(i) < self.num_worlds:
                raise ValueError(f"queue_episode_seeds got env {i}: expected 0..{self.num_worlds - 1}")
            self._queued[int(i)].extend(int(s) for s in seeds)

    def _clear_queue(self) -> None:
        for queue in self._queued:
            queue.clear()

    def _auto_reset_seeds(self, done: torch.Tensor) -> torch.Tensor:
        """(B,) seeds for the worlds ``done`` (B,) starts: queued ones first, else each stream's next."""
        seeds = next_seed(self.episode_seeds)  # (B,)
        if any(self._queued):
            for i in done.nonzero()[:, 0].tolist():
                if self._queued[i]:
                    seeds[i] = self._queued[i].popleft()
        return seeds

    # ----------------------------------------------------------------- step
    def _sim_step(self, action: torch.Tensor) -> SimStep:
        """One control step of every world with ``action`` (B, 4), clipped to [-1, 1]; finished worlds
        auto-reset. ``terms`` carries Meta-World's reward terms (B,) of this step."""
        action = action.clamp(-1.0, 1.0)  # (B, 4)
        target = self._mocap_pos[:, 0] + action[:, :3] * ACTION_SCALE  # (B, 3)
        self._mocap_pos[:, 0] = torch.maximum(torch.minimum(target, self._mocap_high), self._mocap_low)
        self._mocap_quat[:, 0] = self._mocap_quat_cmd
        self._ctrl[:, 0] = action[:, 3]
        self._ctrl[:, 1] = -action[:, 3]
        self._run_physics()

        frame = self._current_frame()  # (B, 18)
        obs = torch.cat([frame, self._prev, self.goal], dim=-1)  # (B, 39)
        obs = torch.maximum(torch.minimum(obs, self._obs_high), self._obs_low)
        self._prev = frame
        dense, success, terms = self._evaluate(obs, action)
        reward = dense if self.reward_mode == "dense" else success.float() - 1.0  # (B,)
        self._steps += 1
        terminated = success & self.terminate_on_success
        truncated = (self._steps >= self.max_episode_steps) & ~terminated
        done = terminated | truncated  # (B,)
        out = obs
        if bool(done.any()):
            self._reset_worlds(done, self._auto_reset_seeds(done))
            out = torch.where(done[:, None], self._reset_obs(done), obs)
        return SimStep(
            obs=out,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            final_obs=obs,
            success=success,
            terms=terms,
        )

    def get_sim_states(self) -> np.ndarray:
        """Each world's MuJoCo integration state laid out as CPU MuJoCo's ``mj_getState(mjSTATE_INTEGRATION)``
        (time, qpos, qvel, warmstart, ctrl, mocap pos and quat, ...): (B, S) float64, for a dataset's ``states``
        (as ``sim.BatchedEnv.get_sim_states``). ROOT_BODY's per-world position is the model's, not the state's,
        as in Meta-World."""
        data, spec = self._state_data, mujoco.mjtState.mjSTATE_INTEGRATION
        fields = {
            "time": self._time, "qpos": self._qpos, "qvel": self._qvel, "qacc_warmstart": self._warm,
            "ctrl": self._ctrl, "mocap_pos": self._mocap_pos, "mocap_quat": self._mocap_quat,
        }  # fmt: skip
        host = {k: v.detach().double().cpu().numpy() for k, v in fields.items()}  # one copy per field
        out = np.empty((self.num_worlds, mujoco.mj_stateSize(self.model, spec)), dtype=np.float64)
        for i in range(self.num_worlds):
            data.time = host["time"][i]
            for key in ("qpos", "qvel", "qacc_warmstart", "ctrl", "mocap_pos", "mocap_quat"):
                getattr(data, key)[:] = host[key][i]
            mujoco.mj_getState(self.model, data, out[i], spec)
        return out

    def _sim_close(self) -> None:
        """Release the captured graph (warp frees device arrays with the env)."""
        self._graph = None

    def start_recording(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            f"{type(self).__name__} does not record videos: evaluate with the CPU env "
            "(sim.make_env(..., sim='metaworld')) to write videos"
        )

    def __repr__(self) -> str:
        chunk = f", action_chunk={self.action_chunk}" if self.action_chunk else ""
        return (
            f"{type(self).__name__}(num_worlds={self.num_worlds}, device={str(self.device)!r}, "
            f"max_episode_steps={self.max_episode_steps}{chunk})"
        )

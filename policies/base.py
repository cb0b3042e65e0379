"""The generative-policy contract that training, evaluation and steering (DSRL, EXPO, V-GPS) rely on.

A policy maps a window of To observations to a chunk of Tp actions by transforming a noise chunk of shape
``noise_shape = (Tp, Da)``. Everything outside this file talks to policies only through:
``loss(batch)``, ``sample(obs, noise=None)``, ``noise_shape``, ``reset(env_ids=None)``, ``act(obs)``,
``get_config()`` and ``shape_meta``. The normaliser is a submodule, so it lives in the state dict.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np
import torch
from torch import nn

from robosteer.policies.acting import ActionQueue
from robosteer.policies.encoders import RGB_ARCHS, ObsEncoder
from robosteer.policies.nets import ConditionalUnet1D, MLPDenoiser
from robosteer.policies.normalizer import Normalizer

C = TypeVar("C", bound="PolicyConfig")


@dataclass
class PolicyConfig:
    """Hyperparameters shared by every generative policy (To / Tp / Ta, backbone, encoders)."""

    n_obs_steps: int = 2  # To: observation window
    horizon: int = 16  # Tp: predicted action chunk
    n_action_steps: int = 8  # Ta: executed actions per plan (indices To-1 .. To-1+Ta-1 of the chunk)
    backbone: str = "mlp"  # "mlp" | "unet"
    # MLP denoiser (~1.1M params with 39-d state, To=2)
    mlp_hidden_dim: int = 256  # MLP denoiser width
    mlp_n_blocks: int = 4  # residual FiLM blocks of the MLP denoiser
    mlp_cond_mode: str = "film"  # "film" | "concat"
    time_embed_dim: int = 128  # timestep embedding width (both backbones)
    level_embed_dim: int = 32  # per-position level embedding width (streaming only)
    # 1-D UNet (~4.7M params with these sizes)
    unet_down_dims: tuple[int, ...] = (
        64,
        128,
        256,
    )  # channels per UNet level (diffusion_policy's: 256, 512, 1024)
    unet_kernel_size: int = 5  # 1-D convolution kernel of the UNet
    unet_n_groups: int = 8  # GroupNorm groups of the UNet
    unet_cond_predict_scale: bool = True  # FiLM predicts scale and bias (diffusion_policy's), not bias only
    # observation encoders
    lowdim_hidden: tuple[int, ...] = ()  # () = identity on normalised state (diffusion_policy's choice)
    # ours: conv channels of the small image encoder, sized for a 2-core CPU (docs/experiments/imitation.md)
    rgb_channels: tuple[int, ...] = (16, 32, 32)
    rgb_num_kp: int = 32
    rgb_feature_dim: int = 64
    share_rgb_encoder: bool = False
    rgb_arch: str = "small"  # "small" (sized for a 2-core CPU) | "resnet18" (diffusion_policy's, GroupNorm)
    # reference: diffusion_policy's random crop, 76 of 84 px (train), the centre crop at evaluation; 1.0: off
    rgb_crop: float = 0.9
    image_range: str = "-1_1"  # "-1_1" | "0_1"
    # multi-task generalist: task names (task id = position) -> a learned embedding fused into the condition
    task_names: tuple[str, ...] = ()
    task_embed_dim: int = 32

    def validate(self) -> None:
        """Raise ValueError on inconsistent values (called by ``from_dict`` and policy constructors)."""
        if self.n_obs_steps < 1 or self.horizon < 1 or self.n_action_steps < 1:
            raise ValueError("n_obs_steps, horizon and n_action_steps must be >= 1")
        if self.n_obs_steps - 1 + self.n_action_steps > self.horizon:
            raise ValueError(
                f"n_obs_steps-1+n_action_steps = {self.n_obs_steps - 1 + self.n_action_steps} exceeds horizon "
                f"{self.horizon}: executed actions are indices To-1 .. To-1+Ta-1 of the chunk"
            )
        _check_choice("backbone", self.backbone, ("mlp", "unet"))
        _check_choice("mlp_cond_mode", self.mlp_cond_mode, ("film", "concat"))
        _check_choice("image_range", self.image_range, ("-1_1", "0_1"))
        _check_choice("rgb_arch", self.rgb_arch, RGB_ARCHS)
        if not 0.0 < self.rgb_crop <= 1.0:
            raise ValueError(
                f"rgb_crop must be the kept fraction of the image side in (0, 1], got {self.rgb_crop}"
            )

    @classmethod
    def from_dict(cls: type[C], values: Mapping[str, Any], policy_name: str = "") -> C:
        """Build from keyword overrides; unknown keys raise naming the key and the nearest valid key."""
        fields = {f.name: f for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            if key not in fields:
                near = difflib.get_close_matches(key, list(fields), n=1, cutoff=0.0)
                hint = f"; did you mean {near[0]!r}?" if near else ""
                raise ValueError(
                    f"unknown config key {key!r} for policy {policy_name or cls.__name__!r}{hint} "
                    f"(valid keys: {', '.join(sorted(fields))})"
                )
            default = fields[key].default
            if isinstance(default, tuple) and not isinstance(value, str):
                value = tuple(value)  # Hydra ListConfig / list -> tuple
            kwargs[key] = value
        cfg = cls(**kwargs)
        cfg.validate()
        return cfg

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


def _check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    if value not in choices:
        near = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=0.0)
        hint = f"; nearest valid choice: {near[0]!r}" if near else ""
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}{hint}")


ObsLike = Mapping[str, Any]


class GenerativePolicy(nn.Module, ABC):
    """Base class: normaliser + observation encoder + denoiser, the act() queue, and per-row resets.

    ``act`` keeps per-row state: an observation history of To steps (the first observation of an episode
    is repeated To times, as diffusion_policy's MultiStepWrapper pads) and a queue of Ta actions per row.
    When some rows' queues are empty, only those rows are re-planned (``plan`` on the row subset); the
    other rows keep serving their queues. The queue is :class:`policies.acting.ActionQueue`, the same one
    steered policies act through. ``reset(env_ids)`` empties those rows' queues and restarts their
    history, so batched evaluation with envs finishing at different times stays correct.
    """

    name: ClassVar[str] = ""
    config_class: ClassVar[type[PolicyConfig]] = PolicyConfig
    per_position_levels: ClassVar[bool] = False

    def __init__(
        self, shape_meta: Mapping[str, Any], config: PolicyConfig, stats: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__()
        config.validate()
        self.config = config
        self.shape_meta: dict[str, Any] = _plain(shape_meta)
        self.obs_keys: list[str] = list(self.shape_meta["obs"].keys())
        self.action_dim = int(np.prod(self.shape_meta["action"]["shape"]))
        self.normalizer = Normalizer(self.shape_meta, stats, image_range=config.image_range)
        self.obs_encoder = ObsEncoder(
            self.shape_meta,
            config.n_obs_steps,
            lowdim_hidden=config.lowdim_hidden,
            rgb_channels=config.rgb_channels,
            rgb_num_kp=config.rgb_num_kp,
            rgb_feature_dim=config.rgb_feature_dim,
            share_rgb_encoder=config.share_rgb_encoder,
            rgb_arch=config.rgb_arch,
            rgb_crop=config.rgb_crop,
            num_tasks=len(config.task_names),
            task_embed_dim=config.task_embed_dim,
        )
        self.task_names: list[str] = list(config.task_names)
        self._task_id: int | None = None  # the task ``act``/``sample`` use when obs carry no "task_id"
        self.model = self._build_denoiser()
        # per-key facts the per-call obs checks need, precomputed: (key, expected shape, is_rgb)
        self._obs_specs: list[tuple[str, tuple[int, ...], bool]] = [
            (k, tuple(int(d) for d in m["shape"]), m.get("type", "low_dim") == "rgb")
            for k, m in self.shape_meta["obs"].items()
        ]
        self._device = torch.device("cpu")
        self._refresh_device()
        self._clear_act_state()

    # ------------------------------------------------------------------ construction helpers
    def _position_levels(self) -> bool:
        """Whether the denoiser takes one noise level per chunk position (B, Tp) instead of one per sample."""
        return self.per_position_levels

    def _build_denoiser(self) -> nn.Module:
        c = self.config
        if c.backbone == "mlp":
            return MLPDenoiser(
                self.action_dim,
                c.horizon,
                self.obs_encoder.out_dim,
                c.mlp_hidden_dim,
                c.mlp_n_blocks,
                c.time_embed_dim,
                c.mlp_cond_mode,
                self._position_levels(),
                c.level_embed_dim,
            )
        return ConditionalUnet1D(
            self.action_dim,
            self.obs_encoder.out_dim,
            c.horizon,
            c.time_embed_dim,
            c.unet_down_dims,
            c.unet_kernel_size,
            c.unet_n_groups,
            c.unet_cond_predict_scale,
            self._position_levels(),
            c.level_embed_dim,
        )

    def get_config(self) -> dict[str, Any]:
        """The config as a JSON-serialisable dict; ``make_policy(name, shape_meta, **get_config())`` rebuilds it."""
        return self.config.to_dict()

    @property
    def device(self) -> torch.device:
        """Device of the policy's tensors; cached (walking ``parameters()`` costs ~10 us per call), refreshed by
        ``.to()`` / ``.cuda()`` / ``.float()`` (``_apply``) and ``load_state_dict``."""
        return self._device

    def _refresh_device(self) -> None:
        first = next(self.parameters(), None)
        if first is None:
            first = next(self.buffers(), None)
        self._device = first.device if first is not None else torch.device("cpu")

    def _apply(self, fn: Any, recurse: bool = True) -> GenerativePolicy:
        out = super()._apply(fn, recurse)
        self._refresh_device()
        return out

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        out = super().load_state_dict(state_dict, strict=strict, assign=assign)
        self._refresh_device()
        return out

    @property
    def noise_shape(self) -> tuple[int, int]:
        """Shape of one noise sample (Tp, Da): what ``sample(obs, noise)`` takes per batch row."""
        return (self.config.horizon, self.action_dim)

    # ------------------------------------------------------------------ observation handling
    def _obs_to_tensors(self, obs: ObsLike, steps: bool) -> dict[str, torch.Tensor]:
        """Validate keys and shapes: (B, To, *shape) when ``steps`` else (B, *shape)."""
        out = {}
        lead = 2 if steps else 1
        for key, shape, rgb in self._obs_specs:
            if key not in obs:
                raise KeyError(
                    f"observation lacks key {key!r}; policy expects {self.obs_keys}, got {sorted(obs)}"
                )
            t = obs[key]
            if not (isinstance(t, torch.Tensor) and t.device == self._device):
                t = torch.as_tensor(t, device=self._device)
            if not rgb and t.dtype != torch.float32:
                t = t.float()  # images stay uint8: the normaliser converts them
            if t.shape[lead:] != shape or t.dim() != lead + len(shape):
                want = "(B, To, " if steps else "(B, "
                raise ValueError(
                    f"obs[{key!r}] has shape {tuple(t.shape)}, expected {want}{', '.join(map(str, shape))})"
                )
            if steps and t.shape[1] != self.config.n_obs_steps:
                raise ValueError(
                    f"obs[{key!r}] has {t.shape[1]} steps, policy uses n_obs_steps={self.config.n_obs_steps}"
                )
            out[key] = t
        return out

    def set_task(self, task: str | int | None) -> None:
        """Which task a multi-task policy acts on when obs carry no ``"task_id"`` (a name or an index)."""
        if task is None or not self.task_names:
            self._task_id = None
            return
        if isinstance(task, str):
            if task not in self.task_names:
                near = difflib.get_close_matches(task, self.task_names, n=1, cutoff=0.0)
                raise ValueError(
                    f"task {task!r} is not one of this policy's tasks {self.task_names}; nearest: {near[0]!r}"
                )
            task = self.task_names.index(task)
        if not 0 <= int(task) < len(self.task_names):
            raise ValueError(f"task id {task} out of range [0, {len(self.task_names)})")
        self._task_id = int(task)

    def _task_ids(self, obs: ObsLike, task_id: Any, batch: int) -> torch.Tensor | None:
        """Task ids (B,) for a multi-task policy: the argument, else obs["task_id"], else ``set_task``'s."""
        if not self.task_names:
            return None
        if task_id is None:
            task_id = obs.get("task_id", self._task_id)
        if task_id is None:
            raise ValueError(
                f"multi-task policy (tasks {self.task_names}): call set_task(name) or pass obs['task_id']"
            )
        return torch.as_tensor(task_id, dtype=torch.long, device=self._device).reshape(-1).expand(batch)

    def encode_obs(self, obs: ObsLike, task_id: Any = None) -> torch.Tensor:
        """Raw obs window {key: (B, To, ...)} -> global condition (B, G). Run once per sample call."""
        t = self._obs_to_tensors(obs, steps=True)
        tid = self._task_ids(obs, task_id, next(iter(t.values())).shape[0]) if self.task_names else None
        return self.obs_encoder(self.normalizer.normalize_obs(t), tid)

    def _noise(self, noise: Any, batch: int) -> torch.Tensor:
        if noise is None:
            return torch.randn(batch, self.config.horizon, self.action_dim, device=self._device)
        n = torch.as_tensor(noise, device=self._device, dtype=torch.float32)
        if tuple(n.shape) != (batch, *self.noise_shape):
            raise ValueError(
                f"noise has shape {tuple(n.shape)}, expected (B, *noise_shape) = {(batch, *self.noise_shape)}"
            )
        return n

    # ------------------------------------------------------------------ the contract
    @abstractmethod
    def loss(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """Training loss on a raw-unit batch {"obs": {key: (B, To, ...)}, "action": (B, Tp, Da)}."""

    @abstractmethod
    def _sample_normalized(self, cond: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Deterministic map (cond (B, G), noise (B, Tp, Da)) -> normalised action chunk (B, Tp, Da)."""

    # Policies that can condition a chunk on its known first actions (``sample(..., prefix=)``).
    supports_prefix: bool = False

    def _sample_normalized_prefix(
        self, cond: torch.Tensor, noise: torch.Tensor, prefix: torch.Tensor
    ) -> torch.Tensor:
        """Like ``_sample_normalized`` with chunk positions [0, P) pinned to ``prefix`` (B, P, Da), normalised."""
        raise NotImplementedError(f"policy {self.name!r} cannot condition on an action prefix")

    def sample(self, obs: ObsLike, noise: Any = None, prefix: Any = None) -> torch.Tensor:
        """Action chunk (B, Tp, Da) in raw units; with ``noise`` given, a deterministic function of (obs, noise).

        ``prefix`` (B, P, Da) raw actions, P <= Tp, already decided (e.g. in flight to the robot): the chunk
        starts with them and its rest is sampled consistent with them (real-time chunking). Policies with
        ``supports_prefix`` only; P = 0 is the plain sample.
        """
        with torch.no_grad():
            cond = self.encode_obs(obs)  # (B, G)
            n = self._noise(noise, cond.shape[0])  # (B, Tp, Da)
            pre = self._prefix(prefix, cond.shape[0])
            if pre is None:
                x0 = self._sample_normalized(cond, n)  # (B, Tp, Da)
            else:
                x0 = self._sample_normalized_prefix(cond, n, pre)
                x0[:, : pre.shape[1]] = pre  # exactly the given actions
            return self.normalizer.unnormalize("action", x0)

    def sample_from_cond(self, cond: torch.Tensor, noise: Any = None) -> torch.Tensor:
        """Action chunk (B, Tp, Da) in raw units from an encoded window ``cond`` (B, G) (:meth:`encode_obs`):
        ``sample`` without its encoder pass, for callers that keep the embedding (steering from pixels)."""
        with torch.no_grad():
            n = self._noise(noise, cond.shape[0])  # (B, Tp, Da)
            return self.normalizer.unnormalize("action", self._sample_normalized(cond, n))

    def _prefix(self, prefix: Any, batch: int) -> torch.Tensor | None:
        """Raw prefix (B, P, Da) -> normalised tensor, or None for no prefix; clear errors for bad input."""
        if prefix is None:
            return None
        p = torch.as_tensor(prefix, device=self._device, dtype=torch.float32)
        tp = self.config.horizon
        if p.ndim != 3 or p.shape[0] != batch or p.shape[2] != self.action_dim or p.shape[1] > tp:
            raise ValueError(
                f"prefix has shape {tuple(p.shape)}, expected (B, P, Da) = ({batch}, P <= {tp}, {self.action_dim})"
            )
        if p.shape[1] == 0:
            return None
        if not self.supports_prefix:
            raise ValueError(
                f"policy {self.name!r} cannot condition on an action prefix (supported: diffusion, flow)"
            )
        if not torch.isfinite(p).all():
            raise ValueError("prefix holds NaN/Inf")
        return self.normalizer.normalize("action", p)

    def _prepare_batch(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """Raw batch -> (cond (B, G), normalised action (B, Tp, Da)); gradients flow into the encoder.

        A batch may give the encoded window ``cond`` (B, G) instead of ``obs``: the denoiser then trains on a
        frozen encoder's output (EXPO's base from pixels imitates from stored embeddings)."""
        if "cond" in batch:
            cond = torch.as_tensor(batch["cond"], device=self.device, dtype=torch.float32)
            if cond.ndim != 2 or cond.shape[1] != self.obs_encoder.out_dim:
                raise ValueError(
                    f"batch['cond'] has shape {tuple(cond.shape)}, expected (B, {self.obs_encoder.out_dim}): "
                    "this policy's encoded observation window"
                )
        else:
            cond = self.encode_obs(batch["obs"], batch.get("task_id"))
        action = torch.as_tensor(batch["action"], device=self.device, dtype=torch.float32)
        if tuple(action.shape[1:]) != self.noise_shape:
            raise ValueError(
                f"batch['action'] has shape {tuple(action.shape)}, expected (B, {self.config.horizon}, {self.action_dim})"
            )
        return cond, self.normalizer.normalize("action", action)

    # ------------------------------------------------------------------ acting
    def _clear_act_state(self) -> None:
        """A fresh action queue over this policy's own planner, for the current To/Ta."""
        self.acting = ActionQueue(self, self.config.n_obs_steps, self.config.n_action_steps)

    def reset_rows(self, rows: torch.Tensor | None) -> None:
        """Hook for per-episode planning state beyond the queue (SDP's buffer); ``None`` = all rows."""

    def reset(self, env_ids: Sequence[int] | np.ndarray | torch.Tensor | None = None) -> None:
        """Clear per-episode state for all rows, or only for ``env_ids`` (their queue and history restart)."""
        self.acting.reset(env_ids)

    def plan(self, obs: dict[str, torch.Tensor], rows: torch.Tensor | None) -> torch.Tensor:
        """Plan chunks (n, Tp, Da) for ``rows`` (None = all) from their obs windows; SDP overrides this."""
        return self.sample(obs)

    def act(self, obs: ObsLike) -> torch.Tensor | np.ndarray:
        """Next action (B, Da) for the current single-step obs {key: (B, ...)}; numpy in -> numpy out."""
        to_numpy = any(isinstance(v, np.ndarray) for v in obs.values())
        action = self.acting.act(self._obs_to_tensors(obs, steps=False))
        return action.cpu().numpy() if to_numpy else action

    def __deepcopy__(self, memo: dict[int, Any]) -> GenerativePolicy:
        """Deep copy without the episode state (e.g. the trainer's EMA copy)."""
        cls = self.__class__
        new = cls.__new__(cls)
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            setattr(new, k, copy.deepcopy(v, memo))
        new._clear_act_state()
        new.reset_rows(None)
        return new


def _plain(x: Any) -> Any:
    """Hydra/OmegaConf containers and tuples -> plain dicts/lists (JSON-serialisable shape_meta)."""
    if isinstance(x, Mapping):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)) or (
        hasattr(x, "__iter__") and not isinstance(x, (str, bytes, np.ndarray, torch.Tensor))
    ):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return x

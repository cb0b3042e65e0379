"""Steering from pixels: the frozen base's own observation embedding is what the steering networks see.

A base that reads camera images conditions its denoiser on one vector per observation window: its encoder's
output ``cond`` (B, G), G = To × 68 for one 84 px camera and proprio. The steering learners (DSRL's actor
and critics) take that vector as their observation, as steering a large generalist must (its encoder is
frozen and far too slow to train beside the critics). So:

- the replay stores embeddings, not images (To × 68 floats per state instead of To × 84 × 84 × 3 bytes);
- the base decodes chunks from the stored embedding (``sample_from_cond``), so each state's images go
  through the CNN once;
- no privileged state is read anywhere: the embedding is made from the base's own inputs.

DSRL's ``actor_obs=encoder`` is the other choice: its actor trains a :class:`PixelEncoder` of its own (a copy of
the base's encoder), so the replay keeps the raw windows too (uint8 images) beside the embedding the base
decodes from.

:class:`BaseEmbedding` is the base seen this way (DSRL's noise decoder over embeddings); :class:`TrainableEmbedding`
the same base as a module whose denoiser keeps imitating from stored embeddings (EXPO's base);
:class:`EmbeddedObsEnv` turns a batched env's observation windows into embeddings for the online loop;
:func:`embed_windows` does the same for offline demonstration windows.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

EMBED_KEY = "base_embed"  # the one observation key a learner over embeddings reads: (B, 1, G)


def reads_images(shape_meta: Mapping[str, Any]) -> bool:
    """Whether a policy's inputs include a camera (its steering then goes through :class:`BaseEmbedding`)."""
    return any(m.get("type", "low_dim") == "rgb" for m in shape_meta["obs"].values())


class BaseEmbedding:
    """A frozen base seen through its observation embedding.

    ``embed`` maps raw observation windows {key: (B, To, ...)} to ``{EMBED_KEY: (B, 1, G)}``; ``sample``
    decodes a chunk from such an embedding and an initial noise, exactly as ``base.sample`` would from the
    raw window (the same encoder output feeds the same sampler).
    """

    def __init__(self, base: Any) -> None:
        if getattr(base, "task_names", None):
            raise ValueError(
                "steering through the base's embedding needs a single-task base: this one is multi-task "
                f"({list(base.task_names)})"
            )
        self.base = base
        self.noise_shape = tuple(base.noise_shape)  # (Tp, Da)
        self.dim = int(base.obs_encoder.out_dim)  # G
        self.raw_keys = tuple(base.shape_meta["obs"])

    @torch.no_grad()
    def embed(self, obs: Mapping[str, Any]) -> dict[str, torch.Tensor]:
        """Raw windows {key: (B, To, ...)} → {EMBED_KEY: (B, 1, G)} on the base's device."""
        missing = [k for k in self.raw_keys if k not in obs]
        if missing:
            raise KeyError(f"the base's embedding needs obs keys {list(self.raw_keys)}; missing {missing}")
        cond = self.base.encode_obs({k: obs[k] for k in self.raw_keys})  # (B, G)
        return {EMBED_KEY: cond.unsqueeze(1)}

    def transform(self, windows: Mapping[str, np.ndarray], keep_raw: bool = False) -> dict[str, np.ndarray]:
        """Raw numpy windows {key: (N, To, ...)} → {EMBED_KEY: (N, 1, G)} float32: the demonstrations'
        ``obs_transform`` (``chunk_transitions``) and the env wrapper's observations alike. Keys the base does
        not read (the privileged ``state`` an asymmetric critic reads in simulation) pass through unchanged;
        ``keep_raw``: the base's own raw windows too (an actor with its own encoder reads them)."""
        kept = {k: v for k, v in windows.items() if keep_raw or k not in self.raw_keys}
        return {EMBED_KEY: embed_windows(self, {k: windows[k] for k in self.raw_keys}), **kept}

    @torch.no_grad()
    def sample(self, obs: Mapping[str, torch.Tensor], noise: Any = None) -> torch.Tensor:
        """Raw action chunk (B, Tp, Da) decoded from ``obs[EMBED_KEY]`` (B, 1, G) and ``noise`` (B, Tp, Da)."""
        cond = torch.as_tensor(obs[EMBED_KEY], dtype=torch.float32, device=self.base.device)  # (B, 1, G)
        return self.base.sample_from_cond(cond[:, 0], noise)


class TrainableEmbedding(nn.Module, BaseEmbedding):
    """A pixel base whose denoiser keeps training on its own frozen embedding: EXPO's base from pixels.

    EXPO's base imitates demonstration and online windows beside its critics. From pixels those windows are
    kept as the base's embeddings, as DSRL's replay keeps them, and only the denoiser trains: the encoder stays
    frozen at the base's weights (it takes no gradient, and ``requires_grad_`` leaves it off), so every stored
    embedding remains the one the current base would compute. ``loss`` takes ``{"obs": {EMBED_KEY: (B, 1, G)},
    "action": (B, Tp, Da)}``; ``sample`` and ``embed`` are :class:`BaseEmbedding`'s.
    """

    def __init__(self, base: nn.Module) -> None:
        nn.Module.__init__(self)
        BaseEmbedding.__init__(self, base)  # self.base (a submodule here), noise_shape, dim, raw_keys
        base.obs_encoder.requires_grad_(False)
        self.config = base.config  # To, Ta, Tp: the chunk the base decodes
        self.shape_meta = {
            "obs": {EMBED_KEY: {"shape": [self.dim], "type": "low_dim"}},
            "action": base.shape_meta["action"],
        }

    def requires_grad_(self, requires_grad: bool = True) -> TrainableEmbedding:
        super().requires_grad_(requires_grad)
        self.base.obs_encoder.requires_grad_(False)  # frozen: the stored embeddings stay valid
        return self

    def loss(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """The base's own denoising loss, conditioned on the stored embedding instead of its encoder's pass."""
        cond = torch.as_tensor(batch["obs"][EMBED_KEY], dtype=torch.float32)  # (B, 1, G)
        return self.base.loss({"cond": cond[:, 0], "action": batch["action"]})


class PixelEncoder(nn.Module):
    """A trainable copy of a pixel base's observation encoder, behind a frozen copy of its normaliser: raw
    windows {key: (B, To, ...)} (uint8 images) → (B, G). It starts as the base's embedding, so a zero-initialised
    actor on top starts at the base's own chunks, and then learns what its loss needs: the base's embedding,
    trained only to imitate, can drop what steering needs (push-v3's σ 0.3 base: the goal's y)."""

    def __init__(self, base: nn.Module) -> None:
        super().__init__()
        self.keys = tuple(base.shape_meta["obs"])
        self.normalizer = copy.deepcopy(base.normalizer).requires_grad_(False)
        self.encoder = copy.deepcopy(base.obs_encoder).requires_grad_(True)
        self.out_dim = int(self.encoder.out_dim)  # G

    def forward(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """Raw windows → (B, G); the images' random crop (the base's augmentation) only in training mode."""
        return self.encoder(self.normalizer.normalize_obs({k: obs[k] for k in self.keys}))


def embed_windows(
    embedding: BaseEmbedding, windows: Mapping[str, np.ndarray], batch: int = 256
) -> np.ndarray:
    """Raw windows {key: (N, To, ...)} (numpy) → embeddings (N, 1, G) float32, ``batch`` rows at a time."""
    n = len(next(iter(windows.values())))
    out = np.empty((n, 1, embedding.dim), dtype=np.float32)
    for i in range(0, n, batch):
        part = {k: torch.as_tensor(np.asarray(v[i : i + batch])) for k, v in windows.items()}
        out[i : i + batch] = embedding.embed(part)[EMBED_KEY].cpu().numpy()
    return out


class EmbeddedObsEnv:
    """A batched env with observation windows of the base's To, whose observations are the base's
    embeddings ``{EMBED_KEY: (B, 1, G)}`` (also in ``info["final_obs"]``): what the steering loop stores.
    The env's keys the base does not read (``state`` for an asymmetric critic) pass through as they are, and
    with ``keep_raw`` the base's own windows too."""

    def __init__(self, env: Any, embedding: BaseEmbedding, keep_raw: bool = False) -> None:
        self.env, self.embedding, self.keep_raw = env, embedding, keep_raw
        self.num_envs = env.num_envs
        self.single_action_space = env.single_action_space
        shape = (1, embedding.dim)
        raw = env.single_observation_space
        self.kept_keys = tuple(k for k in raw.spaces if keep_raw or k not in embedding.raw_keys)
        self.single_observation_space = spaces.Dict(
            {
                EMBED_KEY: spaces.Box(-np.inf, np.inf, shape=shape, dtype=np.float32),
                **{k: raw[k] for k in self.kept_keys},
            }
        )

    def _embed(self, obs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        return self.embedding.transform(obs, self.keep_raw)

    def reset(self, seed: Any = None) -> dict[str, np.ndarray]:
        return self._embed(self.env.reset(seed=seed))

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        embedded = self._embed(obs)
        done = np.asarray(info.get("_final_obs", np.asarray(terminated) | np.asarray(truncated)), dtype=bool)
        final = {k: v.copy() for k, v in embedded.items()}
        if done.any():  # only the finished rows' last windows differ from the returned ones
            rows = {k: np.asarray(info["final_obs"][k])[done] for k in self.embedding.raw_keys}
            final[EMBED_KEY][done] = embed_windows(self.embedding, rows)
            for k in self.kept_keys:
                final[k][done] = np.asarray(info["final_obs"][k])[done]
        info = {**info, "final_obs": final}
        return embedded, reward, terminated, truncated, info

    def episode_states(self) -> list[dict[str, Any]] | None:
        """The wrapped env's episodes in flight (None: it cannot record them), for an exact resume."""
        record = getattr(self.env, "episode_states", None)
        return None if record is None else record()

    def restore_episodes(self, states: Any) -> dict[str, np.ndarray] | None:
        """The wrapped env replays them; their embedded observations (None: they do not replay)."""
        restore = getattr(self.env, "restore_episodes", None)
        obs = None if restore is None else restore(states)
        return None if obs is None else self._embed(obs)

    def close(self) -> None:
        self.env.close()

    def __enter__(self) -> EmbeddedObsEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EmbeddedObsEnv({self.env!r}, G={self.embedding.dim})"


class EmbeddedCritic:
    """An offline critic trained on a frozen base's embedding (``robosteer-value embed=<base run>``), scoring
    raw observation windows through that base: V-GPS from pixels with the critic's usual interface."""

    def __init__(self, critic: Any, embedding: BaseEmbedding) -> None:
        self.critic, self.embedding = critic, embedding
        self.action_steps = critic.action_steps
        self.num_tasks = critic.num_tasks
        self.task_names = list(getattr(critic, "task_names", []))
        self.algo = getattr(critic, "algo", None)

    @torch.no_grad()
    def score(self, obs: Mapping[str, Any], action: torch.Tensor, task_id: Any = None) -> torch.Tensor:
        """min over heads of the target Q (B,) for raw windows {key: (B, To, ...)} and raw actions."""
        return self.critic.score(self.embedding.embed(obs), action, task_id)

    def eval(self) -> EmbeddedCritic:
        self.critic.eval()
        return self

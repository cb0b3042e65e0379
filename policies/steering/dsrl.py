"""DSRL: steer a frozen diffusion/flow policy by RL over its initial noise (Wagenmaker et al.).

The base policy is a black box ``sample(obs, noise) -> (B, Tp, Da)`` (DDIM with eta=0 or the flow ODE),
so a latent ``w`` deterministically decodes to an action chunk. Two variants, as in ``ajwagen/dsrl``:

- ``sac``: plain SAC whose action is the latent, ``w = M·tanh(u)``; critic Q(s, w) with a Polyak target.
- ``na`` (noise-aliased): Q^A(s, a) is learned on *executed* action chunks (so offline demonstrations can
  fill the buffer) and distilled into Q^W(s, w) ≈ Q^A(s, π(s, w)) with w ~ N(0, I); the actor trains only
  against Q^W. The latent is bounded by tanh to ±``latent_bound`` (the reference uses the env bound, 1).

The base is never handed to an optimizer, never registered as a sub-module (so it is not in this module's
state dict), and always decoded under ``torch.no_grad()``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from robosteer.policies.acting import ChunkPolicy
from robosteer.policies.bases import load_run
from robosteer.policies.rl import (
    CriticEnsemble,
    EncodedActor,
    ReplayBuffer,
    TanhGaussianActor,
    Temperature,
    polyak_update,
)
from robosteer.policies.rl.nets import optimizer_step
from robosteer.policies.rl.replay import sample_mixed
from robosteer.policies.steering.embedding import EMBED_KEY, BaseEmbedding
from robosteer.policies.steering.loop import (
    Flags,
    Obs,
    OnlineLearner,
    OnlineRunConfig,
    Sampler,
    flat_features,
    run_online,
)
from robosteer.policies.steering.obs_spec import ObsSpec

VARIANTS = ("na", "sac")
BACKUPS = ("min", "mean")  # over the target heads
# Fields measured not to help and retired (docs/experiments/dsrl_settings.md keeps their rows), each with the
# value every run kept: a saved config holding it loads without it; any other value is refused by name.
RETIRED = {"actor_lr_decay": "none", "backup_latent": "sampled", "latent": "full"}
# encoder_aux: standardise by at least this spread (1 cm of a Meta-World position), so an entry that barely
# moves (a padded slot, a resting quaternion) is not blown up to unit-variance noise
AUX_STD_FLOOR = 0.01
AUX_MOMENTUM = 0.01  # encoder_aux: the running statistics' rate per actor step (the first batch sets them)


class NoiseDecoder(Protocol):
    """What DSRL needs of a base policy: a deterministic noise → chunk map."""

    noise_shape: tuple[int, ...]

    def sample(self, obs: dict[str, torch.Tensor], noise: torch.Tensor | None = None) -> torch.Tensor: ...


@dataclass
class DSRLConfig:
    """Every DSRL hyperparameter, each default written once here and labelled: "reference" is
    ``ajwagen/dsrl``'s own value (cfg/robomimic + the SB3 fork's dsrl.py; checked by
    tests/configs/test_reference_labels.py), "ours" differs, with a one-line reason (the runs behind each:
    docs/experiments/dsrl_settings.md). configs/algo/dsrl.yaml composes these and sets none;
    ``preset=reference`` restores the reference's values. ``robosteer-steer --cfg job`` prints them all."""

    variant: str = "na"  # reference: na (noise-aliased, preferred by the authors) | sac
    # per chunk transition of Ta=8 steps: with tau, values settle within a CPU's budget
    gamma: float = 0.95  # ours (CPU): reference 0.99 per Ta=4 chunk
    tau: float = 0.02  # ours (CPU): Polyak rate of the target critic, with gamma (reference 0.005)
    actor_lr: float = 3e-4  # reference
    critic_lr: float = 3e-4  # reference
    # 0: α stays at init_temperature; learned, α decays and success swings (docs/experiments/dsrl_settings.md)
    temperature_lr: float = 0.0  # ours (CPU): reference 3e-4, learned toward target_entropy
    batch_size: int = 128  # ours (CPU): NA decodes the base for every TD target (reference 256)
    hidden: list[int] = field(
        default_factory=lambda: [256, 256, 256]
    )  # ours (CPU): reference 3×2048 on a GPU
    activation: str = "tanh"  # reference (Tanh + LayerNorm in actor and critics)
    num_critics: int = 2  # reference
    backup: str = "min"  # reference: min | mean over target heads (the actor loss combines heads alike)
    latent_bound: float = 1.0  # reference: NA uses the env bound (action_magnitude unused); SAC: ~1.5
    init_temperature: float = 0.1  # ours (CPU): the fixed α with temperature_lr 0 (reference 1.0)
    target_entropy: float = 0.0  # reference target_ent
    # NA: Q^W distillation steps per vector-env step (num_envs=4 transitions); cheap with the noise bank
    noise_critic_steps: int = 16  # ours (CPU): reference 10 per 20 critic steps
    # NA: latents per state in a distillation batch. 1 (reference): Q^W(s, w) ≈ Q^A(s, π(s, w)). K > 1 (ours):
    # Q^W learns the within-state advantage the actor's gradient uses (docs/experiments/dsrl_settings.md)
    noise_critic_samples: int = 8  # ours: reference 1
    # NA: > 0 keeps that many observed states, each with K latents decoded once (K − 1 from N(0, I), the one
    # played): distillation skips decoding, fits Q^W where the actor lives (docs/experiments/dsrl_settings.md)
    noise_bank: int = 50_000  # ours: reference 0, fresh latents on replay batches
    # Subtract α·log π(w'|s') in the TD target (SB3 SAC); a 64-d latent's entropy swamps the -1/chunk reward
    backup_entropy: bool = False  # ours (CPU): reference true
    # > 0 (ours): Polyak rate, per actor step, of an averaged actor that acts wherever the run is judged
    # (evaluation, ``best``, checkpoints, deployment); the trained actor explores, its success swings
    # (docs/experiments/dsrl_settings.md)
    actor_tau: float = 0.002  # ours: about the last 500 actor steps (reference 0: the trained actor acts)
    # The actor and critics read observations the base's own normaliser maps min-max to [-1, 1] (its low-dim
    # keys; others stay raw), as the reference's DPPO env wrapper does (docs/experiments/dsrl_settings.md)
    normalize_obs: bool = True  # reference
    # > 0 (ours; simulation only, ``actor_obs=encoder`` with ``critic_obs=state``): weight of an auxiliary loss on
    # the actor's own encoder, a linear head regressing the critics' privileged state window (standardised,
    # spread floored at ``AUX_STD_FLOOR``; never used to act): the actor's loss alone trains that encoder
    # slowly (docs/experiments/dsrl_settings.md)
    encoder_aux: float = 0.0  # ours: 0, off (no reference trains an actor's encoder on privileged labels)

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"DSRL variant {self.variant!r} is not known: expected one of {VARIANTS}")
        if self.backup not in BACKUPS:
            raise ValueError(f"DSRL backup {self.backup!r} is not known: expected 'min' or 'mean'")
        if self.noise_critic_samples < 1 or self.batch_size % self.noise_critic_samples:
            raise ValueError(
                f"DSRL noise_critic_samples={self.noise_critic_samples} must be >= 1 and divide "
                f"batch_size={self.batch_size} (e.g. 8 for batch 128)"
            )
        Temperature.check_lr("DSRL", self.temperature_lr)
        if self.noise_bank < 0:
            raise ValueError(f"DSRL noise_bank={self.noise_bank} must be >= 0 (0: decode fresh latents)")
        if not 0.0 <= self.actor_tau <= 1.0:
            raise ValueError(f"DSRL actor_tau={self.actor_tau} must be in [0, 1] (0: no averaged actor)")
        if self.encoder_aux < 0:
            raise ValueError(f"DSRL encoder_aux={self.encoder_aux} must be >= 0 (0: no auxiliary loss)")


class DSRL(OnlineLearner):
    """Latent-noise actor and critics over a frozen base policy.

    ``obs_dim``: size of the flattened observation features the actor sees (the concatenated low-dim
    observation history of ``obs_keys``). ``exec_slice``: which rows of the decoded (Tp, Da) chunk are executed.
    ``critic_keys`` / ``critic_obs_dim``: what the critics (Q^A, Q^W) read instead, when that differs: an
    asymmetric actor-critic, whose critics read the simulator's privileged ``state`` while the actor, the only
    network that acts, reads the policy's inputs. The replay keeps both (``obs_keys``).
    ``actor_encoder``: the actor reads raw windows of ``obs_keys`` through this trainable encoder (its
    ``out_dim`` replaces ``obs_dim``; e.g. :class:`~policies.steering.embedding.PixelEncoder`), which its loss
    trains; the critics then need ``critic_keys``. A base seen through its embedding adds ``EMBED_KEY`` to
    what the replay keeps: chunks decode from it.
    """

    def __init__(
        self,
        base: NoiseDecoder,
        obs_dim: int,
        exec_slice: slice,
        config: DSRLConfig | None = None,
        obs_keys: tuple[str, ...] = ("state",),
        device: str | torch.device = "cpu",
        critic_keys: tuple[str, ...] | None = None,
        critic_obs_dim: int | None = None,
        actor_encoder: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.config = cfg = config or DSRLConfig()
        object.__setattr__(self, "base", base)  # not a sub-module: stays out of state_dict and optimizers
        self._check_inputs(cfg, critic_keys, critic_obs_dim, actor_encoder)
        # the base's normaliser, used read-only by ``features`` (not a sub-module: it is the base's own state)
        norm = getattr(self.frozen_base, "normalizer", None) if cfg.normalize_obs else None
        object.__setattr__(self, "obs_normalizer", norm)
        self.normalized_keys = (
            frozenset(norm.lowdim_keys) if norm is not None else frozenset()
        )  # once, not per call
        self.actor_keys = tuple(obs_keys)
        self.critic_keys = tuple(critic_keys) if critic_keys is not None else self.actor_keys
        decode_keys = (EMBED_KEY,) if isinstance(base, BaseEmbedding) else ()
        # what the replay stores: the actor's inputs, the critics', and what the base decodes from
        self.obs_keys = tuple(dict.fromkeys(self.actor_keys + self.critic_keys + decode_keys))
        obs_dim = int(actor_encoder.out_dim) if actor_encoder is not None else obs_dim
        self.obs_dim = int(obs_dim)
        self.critic_obs_dim = int(critic_obs_dim) if critic_obs_dim is not None else self.obs_dim
        self.exec_slice = exec_slice
        self.noise_shape = tuple(base.noise_shape)  # (Tp, Da): what the base's sampler takes
        self.latent_shape = self.noise_shape  # one latent per (Tp, Da) noise entry, as the reference
        self.latent_dim = math.prod(self.latent_shape)
        self.exec_dim = len(range(*exec_slice.indices(self.noise_shape[0]))) * self.noise_shape[1]
        kw = {"hidden": cfg.hidden, "num_critics": cfg.num_critics, "layer_norm": True, "act": cfg.activation}
        head = TanhGaussianActor(
            obs_dim,
            self.latent_dim,
            hidden=cfg.hidden,
            scale=cfg.latent_bound,
            act=cfg.activation,
            layer_norm=True,
            zero_init=True,
            scale_in_log_prob=False,  # SB3 scores the [-1, 1] action and rescales outside the policy
        )
        self.actor: nn.Module = head if actor_encoder is None else EncodedActor(actor_encoder, head).eval()
        # the Polyak-averaged actor that acts where the run is judged (``actor_tau``); never optimised
        # (eval mode: it never trains, and an own encoder's random crop augments training steps only)
        self.actor_avg = copy.deepcopy(self.actor).requires_grad_(False).eval() if cfg.actor_tau > 0 else None
        self.temperature = Temperature(cfg.init_temperature, cfg.target_entropy)
        c_dim = self.critic_obs_dim
        self.critic = CriticEnsemble(c_dim, self.taken_dim, **kw)  # NA: Q^A(s, a_executed); SAC: Q(s, w)
        if cfg.variant == "na":
            self.noise_critic = CriticEnsemble(c_dim, self.latent_dim, **kw)  # Q^W(s, w), no target
            self.noise_critic_opt = torch.optim.Adam(self.noise_critic.parameters(), lr=cfg.critic_lr)
        self.critic_target = self.critic.make_target()
        use_bank = cfg.variant == "na" and cfg.noise_bank > 0
        self.bank = ReplayBuffer(cfg.noise_bank, self._bank_spec(), device) if use_bank else None
        # The offline states' bank (``bank_offline``): distillation draws the actor's offline share of its
        # states there, so Q^W is fitted wherever the actor's gradient comes from.
        self.offline_bank: ReplayBuffer | None = None
        self.offline_share = 0.0
        self._played: tuple[torch.Tensor, torch.Tensor] | None = None  # (latent, chunk) of the last action
        # encoder_aux: the head that reads the privileged state out of the actor's encoder (trained with the actor)
        self.aux_head = nn.Linear(obs_dim, self.critic_obs_dim) if cfg.encoder_aux > 0 else None
        if self.aux_head is not None:  # the state's running mean and variance (standardised targets)
            self.register_buffer("aux_mean", torch.zeros(self.critic_obs_dim))
            self.register_buffer("aux_var", torch.ones(self.critic_obs_dim))
            self.register_buffer("aux_count", torch.zeros(()))
        aux_params = list(self.aux_head.parameters()) if self.aux_head is not None else []
        self.actor_opt = torch.optim.Adam([*self.actor.parameters(), *aux_params], lr=cfg.actor_lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr)
        self.temperature_opt = torch.optim.Adam(self.temperature.parameters(), lr=cfg.temperature_lr)
        # The training device: networks (in place, so the optimizers keep their parameters) and the shared base.
        self.device = torch.device(device)
        self.to(self.device)
        if isinstance(self.frozen_base, nn.Module):
            self.frozen_base.requires_grad_(False).eval().to(self.device)

    @staticmethod
    def _check_inputs(
        cfg: DSRLConfig, critic_keys: Any, critic_obs_dim: int | None, actor_encoder: nn.Module | None
    ) -> None:
        """The constructor's arguments agree: an asymmetric critic's keys with its size, an own encoder with
        the critics' inputs, and encoder_aux with both."""
        if (critic_keys is None) != (critic_obs_dim is None):
            raise ValueError(
                "DSRL: critic_keys and critic_obs_dim go together (an asymmetric critic's inputs)"
            )
        if actor_encoder is not None and critic_keys is None:
            raise ValueError("DSRL: an actor with its own encoder needs the critics' inputs (critic_keys)")
        if cfg.encoder_aux > 0 and (actor_encoder is None or critic_keys is None):
            raise ValueError(
                f"DSRL encoder_aux={cfg.encoder_aux} trains the actor's own encoder on the privileged state the "
                "critics read: it needs actor_obs=encoder and critic_obs=state (or set dsrl.encoder_aux=0)"
            )

    def _bank_spec(self) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
        k = self.config.noise_critic_samples
        return {
            "features": ((self.critic_obs_dim,), torch.float32),  # the critics' features
            "latent": ((k, self.latent_dim), torch.float32),
            "executed": ((k, self.exec_dim), torch.float32),
        }

    # ----------------------------------------------------------------------------------------- acting
    @property
    def frozen_base(self) -> Any:
        """The generative policy itself (behind its embedding when it reads pixels): To, Ta, inputs."""
        return self.base.base if isinstance(self.base, BaseEmbedding) else self.base

    @property
    def encoded(self) -> bool:
        """Whether the actor reads raw windows through an encoder of its own (``actor_encoder``)."""
        return isinstance(self.actor, EncodedActor)

    @property
    def acting_actor(self) -> nn.Module:
        """The actor that evaluation and deployment act with: the averaged one when kept, else the trained."""
        return self.actor_avg if self.actor_avg is not None else self.actor

    def features(self, obs: dict[str, torch.Tensor]) -> torch.Tensor | dict[str, torch.Tensor]:
        """The actor's input (never the privileged state): its keys' flattened windows (B, obs_dim), or the
        raw windows {key: (B, To, ...)} its own encoder reads."""
        if self.encoded:
            return {k: obs[k] for k in self.actor_keys}
        return flat_features(self.normalized(obs, self.actor_keys), self.actor_keys)

    def critic_features(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """The critics' input (B, critic_obs_dim): the actor's, or the privileged state's (asymmetric)."""
        return flat_features(self.normalized(obs, self.critic_keys), self.critic_keys)

    def normalized(self, obs: dict[str, torch.Tensor], keys: tuple[str, ...]) -> dict[str, torch.Tensor]:
        """``keys``' windows {key: (B, To, D)}, those the base normalises (``normalize_obs``) in its [-1, 1]."""
        norm = self.obs_normalizer
        if norm is None:
            return obs
        return {k: norm.normalize(k, obs[k].float()) if k in self.normalized_keys else obs[k] for k in keys}

    @property
    def asymmetric(self) -> bool:
        return self.critic_keys != self.actor_keys

    def embed(self, obs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Raw obs windows → what the actor, the critics and the base read: the same windows, with the base's
        embedding added when the base is seen through it."""
        return {**obs, **self.base.embed(obs)} if isinstance(self.base, BaseEmbedding) else obs

    def to_noise(self, latent: torch.Tensor) -> torch.Tensor:
        """Latent (B, latent_dim) → the base's initial noise (B, Tp, Da)."""
        return latent.reshape(latent.shape[0], *self.noise_shape)

    @torch.no_grad()
    def decode(self, obs: dict[str, torch.Tensor], latent: torch.Tensor) -> torch.Tensor:
        """Executed chunk (B, Ta, Da) of the frozen base for latent (B, latent_dim); no autograd graph."""
        chunk = torch.as_tensor(self.base.sample(obs, noise=self.to_noise(latent)))  # (B, Tp, Da)
        return chunk[:, self.exec_slice]

    @torch.no_grad()
    def act(
        self,
        obs: dict[str, torch.Tensor],
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(latent (B, Tp·Da), executed chunk (B, Ta, Da)) for the current observation history."""
        latent, _ = self.actor(self.features(obs), deterministic=deterministic, generator=generator)
        return latent, self.decode(obs, latent)

    def random_latent(self, batch: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Warm-up latents: N(0, I), unclipped for NA; clipped to the bound for SAC (as the reference)."""
        w = torch.randn(batch, self.latent_dim, generator=generator, device=self.device)
        bound = self.config.latent_bound
        return w if self.config.variant == "na" else w.clamp(-bound, bound)

    # ---------------------------------------------------------------------------------------- learning
    def update(self, batch: dict[str, Any], generator: torch.Generator | None = None) -> dict[str, float]:
        """One critic + actor + temperature step on a replay batch: ``obs``/``next_obs`` {k: (B, To, D)},
        ``reward``, ``done`` (B,), and ``action`` (B, Ta·Da) executed chunks (NA) or ``latent`` (SAC)."""
        cfg = self.config
        self.actor.train()  # an own encoder's random crop augments the gradient steps only (acting: centre)
        s, s2 = self.features(batch["obs"]), self.features(batch["next_obs"])  # the actor's inputs
        c, c2 = self.critic_features(batch["obs"]), self.critic_features(batch["next_obs"])  # the critics'
        reward, done = batch["reward"].float(), batch["done"].float()
        alpha = self.temperature.alpha

        with torch.no_grad():
            w2, logp2 = self.actor(s2, generator=generator)  # w' ~ π(·|s'), as SB3's SAC target
            if cfg.variant == "na":
                a2 = self.decode(batch["next_obs"], w2).flatten(1)  # a' = π_dp(s', w')
                q2 = self.critic_target(c2, a2)
            else:
                q2 = self.critic_target(c2, w2)
            q2 = self.critic_target.reduce(q2, cfg.backup)
            if cfg.backup_entropy:
                q2 = q2 - alpha * logp2
            target = reward + (1.0 - done) * cfg.gamma * q2  # (B,)

        taken = batch["action"].flatten(1) if cfg.variant == "na" else batch["latent"].flatten(1)
        q = self.critic(c, taken)  # (E, B)
        critic_loss = 0.5 * ((q - target.unsqueeze(0)) ** 2).mean(dim=1).sum()
        optimizer_step(self.critic_opt, critic_loss)

        # encoder_aux: the own encoder's output (B, G), computed once for the actor's loss and the auxiliary one
        z = self.actor.encoder(s) if self.aux_head is not None else None
        actor_loss, logp = self.actor_loss(s, alpha, generator, critic_s=c, encoded=z)
        aux_loss = self.encoder_aux_loss(z, c) if z is not None else None
        total = actor_loss
        if aux_loss is not None:
            total = actor_loss + cfg.encoder_aux * aux_loss  # the encoder learns the state as well
        optimizer_step(self.actor_opt, total)
        if self.actor_avg is not None:
            polyak_update(self.actor_avg, self.actor, cfg.actor_tau)  # (an own encoder's weights too)
        self.critic_opt.zero_grad(set_to_none=True)  # the actor step leaves grads on the critics: drop them
        if cfg.variant == "na":
            self.noise_critic_opt.zero_grad(set_to_none=True)

        optimizer_step(self.temperature_opt, self.temperature.loss(logp))
        polyak_update(self.critic_target, self.critic, cfg.tau)
        self.actor.eval()
        with torch.no_grad():  # the evaluated (deterministic) latent: saturation shows as |w| → bound
            rows = {k: v[:32] for k, v in s.items()} if isinstance(s, dict) else s  # own encoder: 32 suffice
            mode, _ = self.actor(rows, deterministic=True)
        aux = {} if aux_loss is None else {"encoder_aux_loss": aux_loss.item()}
        return {
            **aux,
            "latent_abs": mode.abs().mean().item(),
            "critic_loss": critic_loss.item(),
            "actor_loss": actor_loss.item(),
            "q": q.mean().item(),
            "alpha": alpha.item(),
            "entropy": -logp.detach().mean().item(),
            "target_q": target.mean().item(),
        }

    def actor_loss(
        self,
        s: torch.Tensor | dict[str, torch.Tensor],
        alpha: torch.Tensor,
        generator: torch.Generator | None = None,
        critic_s: torch.Tensor | None = None,
        encoded: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(α·log π(w̃|s) − Q(s, w̃)).mean() — against Q^W for NA, never Q^A; also returns log π. Heads are
        combined as in the backup (``backup``), as the reference's ``critic_backup_combine_type``.
        ``critic_s``: the same states as the critics see them (asymmetric; default ``s``). ``encoded``: the
        actor's own encoder's output for ``s`` (B, G), when the caller has it already (``encoder_aux``)."""
        if encoded is not None:
            w, logp = self.actor.head(encoded, generator=generator)
        else:
            w, logp = self.actor(s, generator=generator)
        actor_critic = self.noise_critic if self.config.variant == "na" else self.critic
        c = s if critic_s is None else critic_s
        q_pi = actor_critic.reduce(actor_critic(c, w), self.config.backup)
        return (alpha * logp - q_pi).mean(), logp

    def encoder_aux_loss(self, z: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``encoder_aux``: 0.5·mean((head(z) − (state − μ) / max(σ, AUX_STD_FLOOR))²) over the batch and the
        entries, for the actor's encoder output z (B, G) and the privileged state window the critics read
        (B, critic_obs_dim). μ, σ² are running statistics of that state (the first batch sets them, then an
        exponential average at ``AUX_MOMENTUM``), updated here before the targets are made."""
        with torch.no_grad():
            mean, var = state.mean(dim=0), state.var(dim=0, unbiased=False)
            if self.aux_count.item() == 0:
                self.aux_mean.copy_(mean)
                self.aux_var.copy_(var)
            else:
                self.aux_mean.lerp_(mean, AUX_MOMENTUM)
                self.aux_var.lerp_(var, AUX_MOMENTUM)
            self.aux_count.add_(1)
            target = (state - self.aux_mean) / self.aux_var.sqrt().clamp_min(AUX_STD_FLOOR)
        return 0.5 * F.mse_loss(self.aux_head(z), target)

    def update_noise_critic(
        self, obs: dict[str, torch.Tensor] | None = None, generator: torch.Generator | None = None
    ) -> dict[str, float]:
        """NA distillation: Q^W_i(s, w) ← Q^A_i(s, π_dp(s, w)), w ~ N(0, I) unclipped, online Q^A.

        K = ``noise_critic_samples`` > 1: B/K states × K latents, both sides centred per state (Q^W learns a
        latent's advantage at its state). With ``noise_bank`` all comes from the bank (``obs`` unused).
        """
        cfg = self.config
        k = cfg.noise_critic_samples
        if self.bank is not None:
            if len(self.bank) == 0:
                return {}
            n = cfg.batch_size // k  # states, the actor's offline share of them from the offline bank
            rows = sample_mixed(self.offline_bank, self.bank, n, self.offline_share, generator)
            s = rows["features"].repeat_interleave(k, dim=0)  # (B, obs_dim)
            w = rows["latent"].flatten(0, 1)  # (B, latent_dim)
            executed = rows["executed"].flatten(0, 1)  # (B, Ta·Da)
        else:
            if obs is None:
                raise ValueError("update_noise_critic needs obs when there is no noise bank")
            if k > 1:  # (B/K states) × K latents; every K-th row keeps the batch's offline share (the offline
                # rows come first in a mixed batch, so its first B/K rows could all be demonstrations)
                obs = {key: v[::k].repeat_interleave(k, dim=0) for key, v in obs.items()}
            s = self.critic_features(obs)
            w = torch.randn(s.shape[0], self.latent_dim, generator=generator, device=self.device)
            executed = self.decode(obs, w).flatten(1)
        with torch.no_grad():
            target = self.critic(s, executed)  # (E, B)
        pred = self.noise_critic(s, w)  # (E, B)
        if k > 1:
            pred, target = _centred(pred, k), _centred(target, k)
        loss = 0.5 * F.mse_loss(pred, target, reduction="none").mean(dim=1).sum()
        optimizer_step(self.noise_critic_opt, loss)
        return {"noise_critic_loss": loss.item()}

    @torch.no_grad()
    def bank_states(
        self,
        obs: dict[str, torch.Tensor],
        played: tuple[torch.Tensor, torch.Tensor] | None = None,
        bank: ReplayBuffer | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        """Keep K decoded latents per state of ``obs`` in ``bank`` (default: the online one): K − 1 drawn from
        N(0, I) by ``generator`` (default: the global RNG) and the ``played`` (latent (N, latent_dim), chunk
        (N, Ta, Da)), or K drawn when none is given."""
        bank = bank if bank is not None else self.bank
        if bank is None:
            return
        n = next(iter(obs.values())).shape[0]
        k = self.config.noise_critic_samples - (played is not None)  # Gaussian draws per state
        rep = {key: v.repeat_interleave(k, dim=0) for key, v in obs.items()}
        w = torch.randn(n * k, self.latent_dim, generator=generator, device=self.device)
        latent = w.reshape(n, k, self.latent_dim)  # (N, k, latent_dim); k = 0 when K = 1 and one was played
        executed = self.decode(rep, w).reshape(n, k, -1) if k else w.new_zeros(n, 0, self.exec_dim)
        if played is not None:
            latent = torch.cat([latent, played[0].reshape(n, 1, -1)], dim=1)
            executed = torch.cat([executed, played[1].reshape(n, 1, -1)], dim=1)
        bank.add(features=self.critic_features(obs), latent=latent, executed=executed)

    @torch.no_grad()
    def bank_offline(
        self, obs: dict[str, torch.Tensor], share: float, seed: int = 0, chunk: int = 256
    ) -> None:
        """NA with a noise bank: bank the offline states ``obs`` {key: (N, To, D)}, K N(0, I) latents each,
        in a bank of their own that distillation draws ``share`` of its states from (as the actor's batches;
        the reference fits Q^W on replay batches, offline data included). Seeded: the same on every (re)start.
        """
        if self.bank is None or share <= 0:
            return
        n = next(iter(obs.values())).shape[0]
        self.offline_bank = ReplayBuffer(n, self._bank_spec(), self.device)
        self.offline_share = float(share)
        gen = torch.Generator(device=self.device).manual_seed(seed)
        for i in range(0, n, chunk):
            part = {key: v[i : i + chunk].to(self.device) for key, v in obs.items()}
            self.bank_states(part, bank=self.offline_bank, generator=gen)

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Every optimizer, by name (checkpointed for an exact resume of the learner)."""
        opts = {"actor": self.actor_opt, "critic": self.critic_opt, "temperature": self.temperature_opt}
        if self.config.variant == "na":
            opts["noise_critic"] = self.noise_critic_opt
        return opts

    # ------------------------------------------------------- the shared loop's learner protocol
    kind = "dsrl"

    @property
    def label(self) -> str:
        return f"dsrl-{self.config.variant}"

    @property
    def taken_dim(self) -> int:
        """NA stores executed chunks (its critic is over actions), SAC the latents."""
        return self.exec_dim if self.config.variant == "na" else self.latent_dim

    def warmup_action(
        self, obs: dict[str, torch.Tensor], generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        latent = self.random_latent(obs[self.obs_keys[0]].shape[0], generator)
        return self._play(latent, self.decode(obs, latent))

    def explore(
        self, obs: dict[str, torch.Tensor], generator: torch.Generator
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self._play(*self.act(obs, generator=generator))

    def _play(self, latent: torch.Tensor, chunk: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Remember the played (latent, chunk) for ``observe``; (taken, chunk) for the replay."""
        self._played = (latent, chunk)
        # ours (Q^A's actions): NA stores the executed chunk in raw units (the base's sample(), as offline demos);
        # the reference's buffer holds the base's normalised actions (DPPO's [-1, 1], its env unnormalises them)
        return (chunk.flatten(1) if self.config.variant == "na" else latent), chunk

    def learn(
        self, n_updates: int, n_transitions: int, sample: Sampler, generator: torch.Generator
    ) -> dict[str, float]:
        """``n_updates`` critic + actor steps, then (NA) the Q^W distillation steps of this env step."""
        stats: dict[str, float] = {}
        key = "action" if self.config.variant == "na" else "latent"
        for _ in range(n_updates):
            batch = sample(self.config.batch_size)
            batch[key] = batch.pop("taken")
            stats.update(self.update(batch, generator=generator))
        if self.config.variant == "na":
            for _ in range(self.config.noise_critic_steps):
                obs = None if self.bank is not None else sample(self.config.batch_size)["obs"]
                stats.update(self.update_noise_critic(obs, generator))
        return stats

    def observe(self, obs: Obs, chunk: torch.Tensor, steps: Flags, done: Flags, success: Flags) -> None:
        """NA with a noise bank: bank the state with the latent just played there and K − 1 Gaussian ones."""
        played, self._played = self._played, None
        self.bank_states(obs, played)

    def observe_recorded(self, obs: Obs) -> None:
        """NA with a noise bank: bank a recorded episode's states with K Gaussian latents each (which latent
        the robot played at a chunk boundary of the recording is not kept)."""
        self._played = None
        self.bank_states(obs)

    def eval_policy(self) -> SteeredPolicy:
        # ours (mean-latent evaluation): the periodic evaluations, and so ``best``, act with the actor's mean
        # latent (SteeredPolicy's default); the reference evaluates sampled latents (deterministic_eval: False)
        return SteeredPolicy(self.frozen_base, self)

    def extra_state(self) -> dict[str, Any]:
        return {} if self.bank is None else {"noise_bank": self.bank.state_dict()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        if self.bank is not None:
            self.bank.load_state_dict(state["noise_bank"])

    def get_config(self) -> dict[str, Any]:
        return {
            "dsrl": asdict(self.config),
            "obs_dim": self.obs_dim,
            "latent_shape": list(self.latent_shape),
            "exec_slice": [self.exec_slice.start, self.exec_slice.stop],
            "obs_keys": list(self.actor_keys),
            "critic_keys": list(self.critic_keys),
            "critic_obs_dim": self.critic_obs_dim,
            "actor_obs": "encoder" if self.encoded else "features",
            "pixels": isinstance(self.base, BaseEmbedding),  # read back by ObsSpec.from_record
        }

    @classmethod
    def from_spec(
        cls,
        base: NoiseDecoder,
        spec: ObsSpec,
        exec_slice: slice,
        config: DSRLConfig | None = None,
        device: str | torch.device = "cpu",
        embedding: BaseEmbedding | None = None,
    ) -> DSRL:
        """The learner for ``spec``'s inputs over the raw ``base``: the one way robosteer-steer builds DSRL
        and a checkpoint rebuilds it."""
        return cls(
            exec_slice=exec_slice, config=config, device=device, **spec.learner_inputs(base, embedding)
        )


def _centred(q: torch.Tensor, k: int) -> torch.Tensor:
    """(E, B) values of B/K states × K latents each, minus each state's mean over its K latents."""
    grouped = q.reshape(q.shape[0], -1, k)  # (E, B/K, K)
    return (grouped - grouped.mean(dim=-1, keepdim=True)).reshape(q.shape)


# ================================================================================================ running
@dataclass
class DSRLRunConfig(OnlineRunConfig):
    """The shared online loop's knobs (``policies.steering.loop``), with DSRL's defaults."""

    # a cost in [-1, 0] per chunk, sum of (r / reward_scale - 1) / Ta: ending never hurts
    reward: str = (
        "shaped"  # ours: reference -1 per env step, summed over the chunk (run.reward=sparse: -1 per chunk)
    )
    # NA with offline=<demos.hdf5>: share of every batch from the demonstrations
    offline_ratio: float = 0.25  # ours: reference load_offline_data pre-fills the one replay, off by default


class LatentPlanner:
    """DSRL's chunk planner: the frozen base decoded at the latent its actor picks for the obs window.

    ``trained``: act with the trained actor even where the run keeps an averaged one (to compare the two)."""

    def __init__(self, agent: DSRL, deterministic: bool = True, trained: bool = False) -> None:
        self.agent, self.deterministic = agent, deterministic  # the agent holds the base (or its embedding)
        self.actor = agent.actor if trained else agent.acting_actor

    def plan(self, obs: dict[str, torch.Tensor], rows: torch.Tensor | None) -> torch.Tensor:
        obs = self.agent.embed(obs)  # pixels: raw windows -> {EMBED_KEY: (n, 1, G)}
        latent, _ = self.actor(self.agent.features(obs), deterministic=self.deterministic)
        return self.agent.base.sample(obs, noise=self.agent.to_noise(latent))  # (n, Tp, Da)

    def reset_rows(self, rows: torch.Tensor | None) -> None:
        """Stateless: every chunk depends on the current obs window only."""

    def eval(self) -> LatentPlanner:
        self.agent.eval()
        return self


class SteeredPolicy(ChunkPolicy):
    """Base + DSRL actor acting step by step: :class:`LatentPlanner` under the shared action queue."""

    def __init__(self, base: Any, agent: DSRL, deterministic: bool = True, trained: bool = False) -> None:
        super().__init__(LatentPlanner(agent, deterministic, trained), base)
        self.agent = agent


# What a field meant before it was saved: the dataclass defaults of the code that wrote checkpoints lacking
# it (the reference's, before the CLI's values became the defaults), and raw observations before normalize_obs.
SAVED_BEFORE: dict[str, Any] = {
    "gamma": 0.99,
    "tau": 0.005,
    "temperature_lr": 3e-4,
    "batch_size": 256,
    "init_temperature": 1.0,
    "noise_critic_steps": 10,
    "noise_critic_samples": 1,
    "actor_tau": 0.0,
    "backup_entropy": True,
    "normalize_obs": False,
}


def without_retired(saved: dict[str, Any], where: str = "the run's dsrl config") -> dict[str, Any]:
    """``saved`` less the :data:`RETIRED` fields that hold the value every run kept; a retired field set to
    anything else is refused in one line naming it (that run trained something this code no longer builds)."""
    kept = dict(saved)
    for name, old in RETIRED.items():
        if name in kept and kept.pop(name) != old:
            raise ValueError(
                f"{where}: dsrl.{name}={saved[name]!r} is retired (only {old!r} is built now; "
                "docs/experiments/dsrl_settings.md has its rows): this run cannot be loaded"
            )
    return kept


def acting_config(saved: dict[str, Any]) -> DSRLConfig:
    """The DSRLConfig a checkpoint's saved ``dsrl`` dict acts with: no distillation bank (acting needs none), a
    field it predates as the code that wrote it had it (:data:`SAVED_BEFORE`: no averaged actor, raw obs), and
    retired fields dropped (:func:`without_retired`)."""
    return DSRLConfig(**{**SAVED_BEFORE, **without_retired(saved), "noise_bank": 0})


def load_steered_policy(
    path: str,
    deterministic: bool = True,
    which: str = "latest",
    device: str | torch.device = "cpu",
    trained: bool = False,
) -> SteeredPolicy:
    """Rebuild base + steering actor from a DSRL run directory (or one of its checkpoints), both on ``device``.

    ``which``: ``latest`` or ``best`` (the best periodic evaluation); the base is checked by :func:`load_run`.
    ``trained``: act with the trained actor where the run keeps an averaged one (``actor_tau``).
    """
    ck, base = load_run(path, which, "dsrl", ("obs_dim", "exec_slice", "obs_keys", "dsrl"))
    cfg = ck.config
    spec = ObsSpec.from_record(cfg)
    agent = DSRL.from_spec(base, spec, slice(*cfg["exec_slice"]), acting_config(cfg["dsrl"]), device)
    agent.load_state_dict(ck.modules["agent"])
    policy = SteeredPolicy(base, agent.eval(), deterministic=deterministic, trained=trained)
    policy.task = cfg.get("task") or getattr(base, "task", None)
    return policy


def prepare_offline(agent: DSRL, offline: dict | None, cfg: OnlineRunConfig) -> None:
    """Before any loop (simulator or robot) starts: demonstrations need NA, and Q^W is fitted at their states
    too (the actor trains there)."""
    if offline is not None and agent.config.variant != "na":
        raise ValueError(
            "offline demonstrations need variant=na: DSRL-SAC's critic is over latents, not actions"
        )
    if offline is not None:
        agent.bank_offline(
            {k: offline[f"obs/{k}"] for k in agent.obs_keys}, cfg.offline_ratio, seed=cfg.seed + 2
        )


def run_dsrl(
    agent: DSRL, env: Any, cfg: OnlineRunConfig, out_dir: str, offline: dict | None = None, **kwargs: Any
) -> dict[str, Any]:
    """Train ``agent`` with the shared chunk loop (:func:`~policies.steering.loop.run_online`, its kwargs).

    ``offline``: demonstration chunk transitions (NA only; ``taken`` = executed chunks) mixed into every batch
    at ``offline_ratio``. Returns the loop's metrics plus ``variant``.
    """
    prepare_offline(agent, offline, cfg)
    metrics = run_online(agent, env, cfg, out_dir, offline=offline, **kwargs)
    # the zero-initialised deterministic actor plays latent 0: initial_success_rate is the base's mode
    return {"variant": agent.config.variant, **metrics}

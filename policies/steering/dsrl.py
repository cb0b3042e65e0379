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

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from policies.rl import CriticEnsemble, TanhGaussianActor, Temperature, polyak_update

VARIANTS = ("na", "sac")


class NoiseDecoder(Protocol):
    """What DSRL needs of a base policy: a deterministic noise → chunk map."""

    noise_shape: tuple[int, ...]

    def sample(self, obs: dict[str, torch.Tensor], noise: torch.Tensor | None = None) -> torch.Tensor: ...


@dataclass
class DSRLConfig:
    """Every DSRL hyperparameter; defaults follow ``ajwagen/dsrl`` (cfg/robomimic) unless noted."""

    variant: str = "na"  # na | sac
    gamma: float = 0.99  # discount per chunk transition
    tau: float = 0.005  # Polyak rate of the target critic
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    temperature_lr: float = 3e-4
    batch_size: int = 256
    hidden: list[int] = field(default_factory=lambda: [256, 256, 256])  # reference: 3×2048 on GPU
    activation: str = "tanh"  # the reference actor and critics use Tanh + LayerNorm
    num_critics: int = 2
    backup: str = "min"  # min | mean over target heads
    latent_bound: float = 1.0  # NA: the env bound (reference ignores action_magnitude); SAC: action_magnitude
    init_temperature: float = 1.0
    target_entropy: float = 0.0  # the reference configs' target_ent
    noise_critic_steps: int = 10  # NA: Q^W distillation steps per update call
    backup_entropy: bool = True  # subtract α·log π(w'|s') in the TD target (SB3 SAC does)

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"DSRL variant {self.variant!r} is not known: expected one of {VARIANTS}")
        if self.backup not in ("min", "mean"):
            raise ValueError(f"DSRL backup {self.backup!r} is not known: expected 'min' or 'mean'")


class DSRL(nn.Module):
    """Latent-noise actor and critics over a frozen base policy.

    ``obs_dim``: size of the flattened observation features the actor and critics see (the concatenated
    low-dim observation history). ``exec_slice``: which rows of the decoded (Tp, Da) chunk are executed.
    """

    def __init__(self, base: NoiseDecoder, obs_dim: int, exec_slice: slice, config: DSRLConfig | None = None,
                 obs_keys: tuple[str, ...] = ("state",)) -> None:
        super().__init__()
        self.config = cfg = config or DSRLConfig()
        object.__setattr__(self, "base", base)  # not a sub-module: stays out of state_dict and optimizers
        if isinstance(base, nn.Module):
            base.requires_grad_(False)
            base.eval()
        self.obs_keys = tuple(obs_keys)
        self.exec_slice = exec_slice
        self.latent_shape = tuple(base.noise_shape)  # (Tp, Da)
        self.latent_dim = math.prod(self.latent_shape)
        self.exec_dim = len(range(*exec_slice.indices(self.latent_shape[0]))) * self.latent_shape[1]
        kw = {"hidden": cfg.hidden, "num_critics": cfg.num_critics, "layer_norm": True, "act": cfg.activation}
        self.actor = TanhGaussianActor(obs_dim, self.latent_dim, hidden=cfg.hidden, scale=cfg.latent_bound,
                                       act=cfg.activation, layer_norm=True, zero_init=True)
        self.temperature = Temperature(cfg.init_temperature, cfg.target_entropy)
        if cfg.variant == "na":
            self.critic = CriticEnsemble(obs_dim, self.exec_dim, **kw)  # Q^A(s, a_executed)
            self.noise_critic = CriticEnsemble(obs_dim, self.latent_dim, **kw)  # Q^W(s, w), no target
            self.noise_critic_opt = torch.optim.Adam(self.noise_critic.parameters(), lr=cfg.critic_lr)
        else:
            self.critic = CriticEnsemble(obs_dim, self.latent_dim, **kw)  # Q(s, w)
        self.critic_target = self.critic.make_target()
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=cfg.actor_lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=cfg.critic_lr)
        self.temperature_opt = torch.optim.Adam(self.temperature.parameters(), lr=cfg.temperature_lr)

    # ----------------------------------------------------------------------------------------- acting
    def features(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        """Flattened low-dim observation history: {key: (B, To, D)} → (B, To·ΣD)."""
        return torch.cat([obs[k].flatten(1).float() for k in self.obs_keys], dim=-1)

    @torch.no_grad()
    def decode(self, obs: dict[str, torch.Tensor], latent: torch.Tensor) -> torch.Tensor:
        """Executed chunk (B, Ta, Da) of the frozen base for latent (B, Tp·Da); no autograd graph."""
        noise = latent.reshape(latent.shape[0], *self.latent_shape)  # (B, Tp, Da)
        chunk = torch.as_tensor(self.base.sample(obs, noise=noise))  # (B, Tp, Da)
        return chunk[:, self.exec_slice]

    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], deterministic: bool = False,
            generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(latent (B, Tp·Da), executed chunk (B, Ta, Da)) for the current observation history."""
        latent, _ = self.actor(self.features(obs), deterministic=deterministic, generator=generator)
        return latent, self.decode(obs, latent)

    def random_latent(self, batch: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """Warm-up latents: N(0, I), unclipped for NA; clipped to the bound for SAC (as the reference)."""
        w = torch.randn(batch, self.latent_dim, generator=generator)
        return w if self.config.variant == "na" else w.clamp(-self.config.latent_bound, self.config.latent_bound)

    # ---------------------------------------------------------------------------------------- learning
    def update(self, batch: dict[str, Any], generator: torch.Generator | None = None) -> dict[str, float]:
        """One critic + actor + temperature step on a replay batch.

        ``batch``: ``obs``/``next_obs`` dicts of (B, To, D), ``reward`` (B,), ``done`` (B,) (1 only on true
        termination), and ``action`` (B, Ta·Da) executed chunks for NA or ``latent`` (B, Tp·Da) for SAC.
        """
        cfg = self.config
        s, s2 = self.features(batch["obs"]), self.features(batch["next_obs"])
        reward, done = batch["reward"].float(), batch["done"].float()
        alpha = self.temperature.alpha

        with torch.no_grad():
            w2, logp2 = self.actor(s2, generator=generator)
            if cfg.variant == "na":
                a2 = self.decode(batch["next_obs"], w2).flatten(1)  # a' = π_dp(s', w')
                q2 = self.critic_target(s2, a2)
            else:
                q2 = self.critic_target(s2, w2)
            q2 = self.critic_target.reduce(q2, cfg.backup)
            if cfg.backup_entropy:
                q2 = q2 - alpha * logp2
            target = reward + (1.0 - done) * cfg.gamma * q2  # (B,)

        taken = batch["action"].flatten(1) if cfg.variant == "na" else batch["latent"].flatten(1)
        q = self.critic(s, taken)  # (E, B)
        critic_loss = 0.5 * ((q - target.unsqueeze(0)) ** 2).mean(dim=1).sum()
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()

        actor_loss, logp = self.actor_loss(s, alpha, generator)
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_opt.step()
        self.critic_opt.zero_grad(set_to_none=True)  # the actor step leaves grads on the critics: drop them
        if cfg.variant == "na":
            self.noise_critic_opt.zero_grad(set_to_none=True)

        temp_loss = self.temperature.loss(logp)
        self.temperature_opt.zero_grad(set_to_none=True)
        temp_loss.backward()
        self.temperature_opt.step()
        polyak_update(self.critic_target, self.critic, cfg.tau)
        return {
            "critic_loss": critic_loss.item(), "actor_loss": actor_loss.item(), "q": q.mean().item(),
            "alpha": alpha.item(), "entropy": -logp.detach().mean().item(), "target_q": target.mean().item(),
        }

    def actor_loss(self, s: torch.Tensor, alpha: torch.Tensor,
                   generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(α·log π(w̃|s) − min Q(s, w̃)).mean() — against Q^W for NA, never Q^A; also returns log π."""
        w, logp = self.actor(s, generator=generator)
        actor_critic = self.noise_critic if self.config.variant == "na" else self.critic
        q_pi = actor_critic.reduce(actor_critic(s, w), "min")
        return (alpha * logp - q_pi).mean(), logp

    def update_noise_critic(self, obs: dict[str, torch.Tensor],
                            generator: torch.Generator | None = None) -> dict[str, float]:
        """NA distillation: Q^W_i(s, w) ← Q^A_i(s, π_dp(s, w)), w ~ N(0, I) unclipped, online Q^A."""
        s = self.features(obs)
        w = torch.randn(s.shape[0], self.latent_dim, generator=generator)
        with torch.no_grad():
            target = self.critic(s, self.decode(obs, w).flatten(1))  # (E, B)
        loss = 0.5 * F.mse_loss(self.noise_critic(s, w), target, reduction="none").mean(dim=1).sum()
        self.noise_critic_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.noise_critic_opt.step()
        return {"noise_critic_loss": loss.item()}

    def get_config(self) -> dict[str, Any]:
        return {"dsrl": asdict(self.config), "latent_shape": list(self.latent_shape),
                "exec_slice": [self.exec_slice.start, self.exec_slice.stop], "obs_keys": list(self.obs_keys)}

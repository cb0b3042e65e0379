"""Diffusion Policy (Chi et al.): DDPM training, DDIM (eta=0) or DDPM sampling, diffusers schedulers.

Sampling loops over precomputed per-step coefficients instead of calling ``DDIMScheduler.step`` /
``DDPMScheduler.step``, whose bookkeeping (~0.2 ms) rivals a forward pass of the default MLP (~0.3 ms).
The coefficients use the schedulers' own float32 ops, so the loops match diffusers' (DDIM: "leading"
spacing, ``set_alpha_to_one=True``, ``steps_offset=0``; DDPM: the same noise draws in the same order).
Given ``noise``, sampling is always DDIM eta=0, a deterministic function of (obs, noise) that DSRL
relies on. Tables are built once per step count and kept per device as 0-d tensors (cheaper than floats).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from diffusers import DDPMScheduler

from robosteer.policies.base import GenerativePolicy, PolicyConfig, _check_choice

SCHEDULERS = ("ddim", "ddpm")
PREDICTION_TYPES = ("epsilon", "sample", "v_prediction")


@dataclass
class DiffusionConfig(PolicyConfig):
    """Diffusion-specific hyperparameters (defaults: the design card's CPU calibration)."""

    num_train_timesteps: int = 100  # DDPM noise levels in training
    num_inference_steps: int = 10  # DDIM steps per sampled chunk
    scheduler: str = "ddim"  # sampler when no noise is given: "ddim" | "ddpm"
    beta_schedule: str = "squaredcos_cap_v2"
    beta_start: float = 1e-4  # used by "linear" / "scaled_linear" schedules
    beta_end: float = 2e-2
    prediction_type: str = "sample"  # "epsilon" | "sample" | "v_prediction"
    clip_sample: bool = True  # clamp predicted x0 to [-clip_sample_range, clip_sample_range]
    clip_sample_range: float = 1.0
    # Training-time action conditioning (real-time chunking): with this probability a training chunk's first
    # P actions (P uniform in [1, prefix_max]; 0 = horizon - 1) are given clean at noise level 0 and left out
    # of the loss, so ``sample(prefix=)`` conditions on known actions exactly instead of by inpainting. > 0
    # builds the denoiser on per-position levels (a different network; 0 keeps the plain one).
    prefix_train_prob: float = 0.0
    prefix_max: int = 0

    def validate(self) -> None:
        super().validate()
        if not 0.0 <= self.prefix_train_prob <= 1.0:
            raise ValueError(f"prefix_train_prob must be in [0, 1], got {self.prefix_train_prob}")
        if not 0 <= self.prefix_max < self.horizon:
            raise ValueError(f"prefix_max must be in [0, horizon={self.horizon}), got {self.prefix_max}")
        _check_choice("scheduler", self.scheduler, SCHEDULERS)
        _check_choice("prediction_type", self.prediction_type, PREDICTION_TYPES)
        _check_choice("beta_schedule", self.beta_schedule, ("linear", "scaled_linear", "squaredcos_cap_v2"))
        if not 1 <= self.num_inference_steps <= self.num_train_timesteps:
            raise ValueError(
                f"num_inference_steps must be in [1, num_train_timesteps={self.num_train_timesteps}]"
            )


def ddim_update(
    x: torch.Tensor,
    out: torch.Tensor,
    sa: float | torch.Tensor,
    sb: float | torch.Tensor,
    sap: float | torch.Tensor,
    sdir: float | torch.Tensor,
    prediction_type: str,
    clip: float | None,
) -> torch.Tensor:
    """One DDIM (eta=0) step, written exactly as ``DDIMScheduler.step`` computes it.

    sa = sqrt(alpha_bar_t), sb = sqrt(1 - alpha_bar_t), sap = sqrt(alpha_bar_prev), sdir = sqrt(1 - alpha_bar_prev);
    floats for a shared timestep, or (B, Tp, 1) tensors for per-position levels (streaming).
    """
    if prediction_type == "epsilon":
        x0 = (x - sb * out) / sa
        eps = out
    elif prediction_type == "sample":
        x0 = out
        eps = (x - sa * x0) / sb
    else:  # v_prediction
        x0 = sa * x - sb * out
        eps = sa * out + sb * x
    # ours (DDIM's ε after clipping): ε stays the one before x0 is clipped (diffusers' default,
    # use_clipped_model_output=False); DSRL's reference base (DPPO's p_mean_var) recomputes ε from the clipped x0
    if clip is not None:
        x0 = x0.clamp(-clip, clip)
    return sap * x0 + sdir * eps


class _StepTable:
    """Per sampling step: a timestep and a row of 0-d float32 coefficients, copied once per device."""

    timesteps: list[int]
    rows: list[tuple[torch.Tensor | None, ...]]
    _per_device: dict[torch.device, tuple[list[torch.Tensor], list[tuple[Any, ...]]]]

    def steps(self, device: torch.device) -> tuple[list[torch.Tensor], list[tuple[Any, ...]]]:
        """Per step: timestep (1,) long and the row's coefficients on ``device``."""
        if device not in self._per_device:
            self._per_device[device] = (
                [torch.tensor([t], device=device) for t in self.timesteps],
                [tuple(None if v is None else v.to(device) for v in row) for row in self.rows],
            )
        return self._per_device[device]


class DDIMTable(_StepTable):
    """DDIM coefficients (sa, sb, sap, sdir) per step, computed with diffusers' float32 ops."""

    def __init__(self, train_scheduler: DDPMScheduler, num_inference_steps: int) -> None:
        n = num_inference_steps
        self.ratio = ratio = train_scheduler.config.num_train_timesteps // n
        self.timesteps = [k * ratio for k in range(n)][::-1]  # "leading", offset 0
        ac = train_scheduler.alphas_cumprod.float()  # (T,)
        # indexed by inference level k in [0, N-1]: timestep k*ratio, previous level k-1 (alpha_bar = 1 below 0)
        a_t = ac[: n * ratio : ratio]  # (N,)
        a_prev = torch.cat([torch.ones(1), a_t[:-1]])
        self.sa, self.sb = a_t**0.5, (1 - a_t) ** 0.5  # (N,)
        self.sap, self.sdir = a_prev**0.5, (1 - a_prev) ** 0.5
        # step i runs at level k = N-1-i
        self.rows = [tuple(v[k] for v in (self.sa, self.sb, self.sap, self.sdir)) for k in range(n)][::-1]
        self._per_device = {}


class DDPMTable(_StepTable):
    """DDPM ancestral-sampling coefficients per step, computed with ``DDPMScheduler.step``'s float32 ops.

    Rows (sa, sb, c0, c1, std): sqrt(alpha_bar_t) and sqrt(1 - alpha_bar_t) for the x0 estimate, the
    posterior-mean coefficients of x0 / x_t (DDPM eq. 7) and the fixed_small standard deviation (None at
    t = 0, where diffusers adds no noise).
    """

    def __init__(self, scheduler: DDPMScheduler, num_inference_steps: int) -> None:
        cfg = scheduler.config
        if cfg.variance_type != "fixed_small" or cfg.thresholding:
            raise ValueError("DDPMTable reproduces variance_type='fixed_small' without thresholding only")
        scheduler.set_timesteps(num_inference_steps)
        ac, one = scheduler.alphas_cumprod, scheduler.one
        self.timesteps = [int(t) for t in scheduler.timesteps]
        self.rows = []
        for t in self.timesteps:
            prev_t = int(scheduler.previous_timestep(t))
            a_t = ac[t]
            a_prev = ac[prev_t] if prev_t >= 0 else one
            beta_prod_t = 1 - a_t
            beta_prod_t_prev = 1 - a_prev
            current_alpha_t = a_t / a_prev
            current_beta_t = 1 - current_alpha_t
            c0 = (a_prev ** (0.5) * current_beta_t) / beta_prod_t
            c1 = current_alpha_t ** (0.5) * beta_prod_t_prev / beta_prod_t
            variance = torch.clamp((1 - a_prev) / (1 - a_t) * current_beta_t, min=1e-20)
            std = variance**0.5 if t > 0 else None
            self.rows.append((a_t ** (0.5), beta_prod_t ** (0.5), c0, c1, std))
        self._per_device = {}


def ddpm_noise(x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """The variance noise ``DDPMScheduler.step`` draws (diffusers' ``randn_tensor`` with one generator)."""
    dev = x.device if generator is None or generator.device.type != "cpu" else torch.device("cpu")
    return torch.randn(x.shape, generator=generator, device=dev, dtype=x.dtype).to(x.device)


class DiffusionPolicy(GenerativePolicy):
    """Diffusion Policy with a shared timestep per sample; MLP or 1-D UNet denoiser."""

    name = "diffusion"
    config_class = DiffusionConfig
    config: DiffusionConfig

    def __init__(
        self, shape_meta: Mapping[str, Any], config: DiffusionConfig, stats: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(shape_meta, config, stats)
        self.noise_scheduler = self.make_train_scheduler()
        self._ddim_cache: dict[int, DDIMTable] = {}
        self._ddpm_cache: dict[int, DDPMTable] = {}
        self.ddim_table()  # build the default tables now, not on the first sample call
        if config.scheduler == "ddpm":
            self.ddpm_table()

    def make_train_scheduler(self) -> DDPMScheduler:
        """The DDPM scheduler used for training noise (and for stochastic DDPM sampling)."""
        c = self.config
        return DDPMScheduler(
            num_train_timesteps=c.num_train_timesteps,
            beta_start=c.beta_start,
            beta_end=c.beta_end,
            beta_schedule=c.beta_schedule,
            variance_type="fixed_small",
            clip_sample=c.clip_sample,
            clip_sample_range=c.clip_sample_range,
            prediction_type=c.prediction_type,
        )

    def ddim_table(self, num_inference_steps: int | None = None) -> DDIMTable:
        n = num_inference_steps or self.config.num_inference_steps
        if n not in self._ddim_cache:
            self._ddim_cache[n] = DDIMTable(self.noise_scheduler, n)
        return self._ddim_cache[n]

    def ddpm_table(self, num_inference_steps: int | None = None) -> DDPMTable:
        n = num_inference_steps or self.config.num_inference_steps
        if n not in self._ddpm_cache:
            self._ddpm_cache[n] = DDPMTable(self.make_train_scheduler(), n)
        return self._ddpm_cache[n]

    @property
    def _clip(self) -> float | None:
        return self.config.clip_sample_range if self.config.clip_sample else None

    # ------------------------------------------------------------------ training
    def loss(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """MSE between the denoiser output and the target of ``prediction_type`` at a uniform random t."""
        cond, x0 = self._prepare_batch(batch)  # (B, G), (B, Tp, Da)
        b = x0.shape[0]
        eps = torch.randn_like(x0)
        t = torch.randint(0, self.config.num_train_timesteps, (b,), device=x0.device)  # (B,)
        xt = self.noise_scheduler.add_noise(x0, eps, t)  # (B, Tp, Da)
        if not self.prefix_conditioned:
            pred = self.model(xt, t, cond)
            loss = F.mse_loss(pred, self._target(x0, eps, t))
            return loss, {"loss": float(loss.detach())}
        # training-time action conditioning: known prefix positions clean at level 0, out of the loss
        tp = x0.shape[1]
        plen = self._train_prefix_lengths(b, x0.device)  # (B,)
        known = torch.arange(tp, device=x0.device)[None] < plen[:, None]  # (B, Tp)
        levels = torch.where(known, 0, t[:, None])  # (B, Tp)
        xt = torch.where(known[..., None], x0, xt)
        pred = self.model(xt, levels, cond)
        err = (pred - self._target(x0, eps, t)).pow(2).mean(-1)  # (B, Tp)
        free = (~known).float()
        loss = (err * free).sum() / free.sum().clamp_min(1.0)
        return loss, {"loss": float(loss.detach())}

    def _train_prefix_lengths(self, b: int, device: torch.device) -> torch.Tensor:
        """Known-prefix length per training chunk (B,): uniform in [1, prefix_max] w.p. prefix_train_prob, else 0."""
        pmax = self.config.prefix_max or self.config.horizon - 1
        plen = torch.randint(1, pmax + 1, (b,), device=device)
        return torch.where(torch.rand(b, device=device) < self.config.prefix_train_prob, plen, 0)

    @property
    def prefix_conditioned(self) -> bool:
        """Trained with clean prefixes (``prefix_train_prob`` > 0): the denoiser takes per-position levels."""
        return self.config.prefix_train_prob > 0 and not self.per_position_levels

    def _position_levels(self) -> bool:
        return self.per_position_levels or self.config.prefix_train_prob > 0

    def _levels(self, t: torch.Tensor, b: int) -> torch.Tensor:
        """The denoiser's timestep input for a shared step t: (B,) or, prefix-conditioned, (B, Tp)."""
        if self.prefix_conditioned:
            return t.reshape(1, 1).expand(b, self.config.horizon)
        return t if b == 1 else t.expand(b)

    def _target(self, x0: torch.Tensor, eps: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        if self.config.prediction_type == "epsilon":
            return eps
        if self.config.prediction_type == "sample":
            return x0
        return self.noise_scheduler.get_velocity(x0, eps, t)

    # ------------------------------------------------------------------ sampling
    def _sample_normalized(self, cond: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """DDIM eta=0 from x_T = noise (B, Tp, Da), normalised units; a deterministic map."""
        return self._sample_normalized_prefix(cond, noise, None)

    supports_prefix = True

    def _sample_normalized_prefix(
        self, cond: torch.Tensor, noise: torch.Tensor, prefix: torch.Tensor | None
    ) -> torch.Tensor:
        """DDIM, conditioned on the first P actions when ``prefix`` (B, P, Da) is given (still deterministic).

        Prefix-conditioned policies see the known actions clean at level 0 (as trained); others inpaint by
        replacement: before every denoiser call the first P positions of x_t are the known actions noised
        to level t with the chunk's own noise, so the denoiser completes the rest around them."""
        ts, coefs = self.ddim_table().steps(noise.device)
        b = noise.shape[0]
        x = noise if prefix is None else noise.clone()
        pt, clip, model = self.config.prediction_type, self._clip, self.model
        if prefix is not None:
            p = prefix.shape[1]
            known = torch.arange(self.config.horizon, device=noise.device)[None] < p  # (1, Tp)
        for t, (sa, sb, sap, sdir) in zip(ts, coefs):
            levels = self._levels(t, b)  # (B,) or (B, Tp)
            if prefix is not None and self.prefix_conditioned:
                x[:, :p] = prefix
                levels = torch.where(known, 0, levels)  # (B, Tp)
            elif prefix is not None:
                x[:, :p] = sa * prefix + sb * noise[:, :p]  # q(x_t | prefix), (B, P, Da)
            out = model(x, levels, cond)  # (B, Tp, Da)
            x = ddim_update(x, out, sa, sb, sap, sdir, pt, clip)
        return x

    def ddpm_sample(
        self, cond: torch.Tensor, noise: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """Stochastic DDPM ancestral sampling (normalised units); equals diffusers' ``DDPMScheduler`` loop.

        Per step: x0 from the prediction type (clipped if ``clip_sample``), posterior mean
        c0 * x0 + c1 * x_t, plus std * z with z drawn as ``DDPMScheduler.step`` draws it (t > 0 only).
        """
        ts, coefs = self.ddpm_table().steps(noise.device)
        b = noise.shape[0]
        x = noise
        pt, clip, model = self.config.prediction_type, self._clip, self.model
        for t, (sa, sb, c0, c1, std) in zip(ts, coefs):
            out = model(x, self._levels(t, b), cond)  # (B, Tp, Da)
            if pt == "epsilon":
                x0 = (x - sb * out) / sa
            elif pt == "sample":
                x0 = out
            else:  # v_prediction
                x0 = sa * x - sb * out
            if clip is not None:
                x0 = x0.clamp(-clip, clip)
            x = c0 * x0 + c1 * x
            if std is not None:
                x = x + std * ddpm_noise(x, generator)
        return x

    def sample(self, obs: Mapping[str, Any], noise: Any = None, prefix: Any = None) -> torch.Tensor:
        """(B, Tp, Da) raw actions. DDIM (deterministic in noise) unless scheduler="ddpm" and noise and prefix
        are None."""
        if noise is not None or prefix is not None or self.config.scheduler == "ddim":
            return super().sample(obs, noise, prefix)
        with torch.no_grad():
            cond = self.encode_obs(obs)
            x0 = self.ddpm_sample(cond, self._noise(None, cond.shape[0]))
            return self.normalizer.unnormalize("action", x0)

"""Flow-matching policy (rectified flow / conditional flow matching) with K-step Euler sampling.

Time convention (FQL's; the opposite of pi0's): t = 0 is noise, t = 1 is data,
x_t = (1 - t) x0 + t x1 with x0 ~ N(0, I) (the noise) and x1 the normalised action chunk; the network
predicts the velocity v = x1 - x0. Training draws t ~ U(0, 1) (``time_sampling="uniform"``) or
t = 1 - (Beta(1.5, 1) * 0.999 + 0.001) (``"beta"``: pi0's emphasis on the noisy end, mirrored to this
convention). Sampling integrates K Euler steps at t_i = i / K from x0 = noise, so the map noise -> action
is deterministic. The network sees ``t * time_embed_scale`` so its sinusoidal embedding spans the same
range as diffusion timesteps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from robosteer.policies.base import GenerativePolicy, PolicyConfig, _check_choice

TIME_SAMPLINGS = ("uniform", "beta")


@dataclass
class FlowConfig(PolicyConfig):
    """Flow-matching hyperparameters."""

    num_inference_steps: int = 10  # K Euler steps
    time_sampling: str = "uniform"  # "uniform" | "beta"
    time_embed_scale: float = 100.0  # network input is t * scale
    clip_sample: bool = True  # clamp the final normalised chunk to [-1, 1]

    def validate(self) -> None:
        super().validate()
        _check_choice("time_sampling", self.time_sampling, TIME_SAMPLINGS)
        if self.num_inference_steps < 1:
            raise ValueError("num_inference_steps must be >= 1")


class FlowPolicy(GenerativePolicy):
    """Conditional flow matching; velocity network = the shared MLP / UNet denoiser."""

    name = "flow"
    config_class = FlowConfig
    config: FlowConfig

    def __init__(
        self, shape_meta: Mapping[str, Any], config: FlowConfig, stats: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(shape_meta, config, stats)
        self._beta = torch.distributions.Beta(torch.tensor(1.5), torch.tensor(1.0))
        self._euler_cache: tuple[Any, torch.Tensor, list[torch.Tensor]] | None = None

    def sample_time(self, b: int, device: torch.device) -> torch.Tensor:
        """Training times t (B,) in the t=0-noise convention."""
        if self.config.time_sampling == "uniform":
            return torch.rand(b, device=device)
        return 1.0 - (self._beta.sample((b,)).to(device) * 0.999 + 0.001)

    def velocity(self, x: torch.Tensor, t: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        """v(x_t, t | obs): (B, Tp, Da), t (B,) in [0, 1]."""
        return self.model(x, t * self.config.time_embed_scale, cond)

    def loss(self, batch: Mapping[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """MSE between predicted and straight-line velocity x1 - x0."""
        cond, x1 = self._prepare_batch(batch)  # (B, G), (B, Tp, Da)
        x0 = torch.randn_like(x1)
        t = self.sample_time(x1.shape[0], x1.device)  # (B,)
        tt = t[:, None, None]
        xt = (1 - tt) * x0 + tt * x1
        loss = F.mse_loss(self.velocity(xt, t, cond), x1 - x0)
        return loss, {"loss": float(loss.detach())}

    def _euler_grid(self, device: torch.device) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """dt = 1/K as a 0-d float32 tensor (the value a Python-float multiply uses, at less dispatch cost) and
        the network time inputs (1,) of the K Euler steps, t_i * time_embed_scale with t_i = i / K (the float32
        ops ``velocity`` applies); cached per device and config."""
        k, scale = self.config.num_inference_steps, self.config.time_embed_scale
        key = (k, scale, device)
        if self._euler_cache is None or self._euler_cache[0] != key:
            ts = torch.arange(k, dtype=torch.float32) / k  # (K,)
            dt = torch.tensor(1.0 / k, dtype=torch.float32, device=device)
            self._euler_cache = (key, dt, [(ts[i : i + 1] * scale).to(device) for i in range(k)])
        return self._euler_cache[1], self._euler_cache[2]

    supports_prefix = True

    def _sample_normalized_prefix(
        self, cond: torch.Tensor, noise: torch.Tensor, prefix: torch.Tensor | None
    ) -> torch.Tensor:
        """K Euler steps from x(0) = noise to x(1). With ``prefix`` (B, P, Da), inpainting by replacement:
        before every velocity call the first P positions of x(t) are (1 - t) noise + t prefix."""
        dt, times = self._euler_grid(noise.device)
        k, b = self.config.num_inference_steps, noise.shape[0]
        x, model = (noise if prefix is None else noise.clone()), self.model
        for i, t in enumerate(times):
            if prefix is not None:
                p, s = prefix.shape[1], i / k
                x[:, :p] = (1.0 - s) * noise[:, :p] + s * prefix  # (B, P, Da)
            x = x + dt * model(x, t if b == 1 else t.expand(b), cond)
        return x.clamp(-1.0, 1.0) if self.config.clip_sample else x

    def _sample_normalized(self, cond: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return self._sample_normalized_prefix(cond, noise, None)

"""Denoiser backbones: a FiLM-conditioned 1-D UNet (diffusion_policy) and a residual MLP."""

from robosteer.policies.nets.embedding import SinusoidalPosEmb, TimestepEncoder
from robosteer.policies.nets.mlp import MLPDenoiser
from robosteer.policies.nets.unet1d import ConditionalUnet1D

__all__ = ["ConditionalUnet1D", "MLPDenoiser", "SinusoidalPosEmb", "TimestepEncoder"]

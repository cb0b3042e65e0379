"""Denoiser backbones: a FiLM-conditioned 1-D UNet (diffusion_policy) and a residual MLP."""

from policies.nets.embedding import SinusoidalPosEmb, TimestepEncoder
from policies.nets.mlp import MLPDenoiser
from policies.nets.unet1d import ConditionalUnet1D

__all__ = ["ConditionalUnet1D", "MLPDenoiser", "SinusoidalPosEmb", "TimestepEncoder"]

"""Observation encoders: low-dim MLP, a small hand-written ResNet-style CNN with GroupNorm and a
spatial-softmax head (robomimic/diffusion_policy's choice; no torchvision here), and their fusion.

Why GroupNorm: BatchNorm breaks with EMA weights and batch-1 inference (diffusion_policy replaces it too).
Why spatial softmax: it turns feature maps into keypoint coordinates, which is what manipulation needs.
The fused output is one flat vector per sample (all keys, all To steps): the global condition for FiLM.
A multi-task policy (``num_tasks > 0``) appends a learned task embedding to it (one generalist, N tasks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from robosteer.policies.normalizer import buffer_key


class LowDimEncoder(nn.Module):
    """Identity (diffusion_policy's default for state) or an MLP (Linear + Mish per layer) over one low-dim key."""

    def __init__(self, in_dim: int, hidden: Sequence[int] = ()) -> None:
        super().__init__()
        dims = [in_dim, *hidden]
        layers = [m for d, h in zip(dims, hidden) for m in (nn.Linear(d, h), nn.Mish())]
        self.net = nn.Sequential(*layers) if hidden else nn.Identity()
        self.out_dim = dims[-1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, D) -> (N, out_dim)
        return self.net(x)


class SpatialSoftmax(nn.Module):
    """Feature map (N, C, H, W) -> expected (x, y) keypoint per channel after a 1x1 projection: (N, 2K)."""

    def __init__(
        self, in_channels: int, height: int, width: int, num_kp: int = 32, temperature: float = 1.0
    ) -> None:
        super().__init__()
        self.proj = nn.Conv2d(in_channels, num_kp, kernel_size=1)
        self.num_kp = num_kp
        self.temperature = temperature
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, height), torch.linspace(-1, 1, width), indexing="ij")
        self.register_buffer(
            "pos", torch.stack([xs.reshape(-1), ys.reshape(-1)], dim=1), persistent=False
        )  # (HW, 2)

    def forward(self, feat: torch.Tensor) -> torch.Tensor:
        kp = self.proj(feat).flatten(2)  # (N, K, HW)
        attn = torch.softmax(kp / self.temperature, dim=-1)
        return (attn @ self.pos).flatten(1)  # (N, 2K)


class ResBlock2d(nn.Module):
    """Basic ResNet block with GroupNorm; ``stride=2`` halves the resolution."""

    def __init__(self, cin: int, cout: int, stride: int = 1, groups: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(min(groups, cout), cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(min(groups, cout), cout)
        self.act = nn.ReLU()
        self.skip = (
            nn.Identity()
            if stride == 1 and cin == cout
            else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.GroupNorm(min(groups, cout), cout)
            )
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.act(self.norm1(self.conv1(x)))
        out = self.norm2(self.conv2(out))
        return self.act(out + self.skip(x))


RGB_ARCHS = ("small", "resnet18")


class ImageEncoder(nn.Module):
    """A ResNet with GroupNorm and a spatial-softmax head: ``small`` (stem + one stride-2 block per entry of
    ``channels``: sized for a 2-core CPU) or ``resnet18`` (diffusion_policy's recipe: torchvision's ResNet-18
    layout with GroupNorm of 16 channels per group, its avg-pool replaced by spatial softmax; no pretrained
    weights, ``channels`` unused).

    ``crop``: diffusion_policy's random-crop augmentation, as the kept fraction of the image side (its 76 px of
    84 is 0.9). In training each image is cropped at a random offset; in evaluation at the centre. 1.0: off.

    ``head``: ``keypoints`` (spatial softmax + linear: *where* things are, what a policy needs) or ``pooled``
    (mean and max over space, 2C features: *whether* something is there, what a success classifier needs).
    """

    def __init__(
        self,
        image_shape: Sequence[int],
        channels: Sequence[int] = (32, 64, 128),
        num_kp: int = 32,
        feature_dim: int = 64,
        groups: int = 8,
        arch: str = "small",
        crop: float = 1.0,
        head: str = "keypoints",
    ) -> None:
        super().__init__()
        h, w, c = image_shape
        if head not in ("keypoints", "pooled"):
            raise ValueError(f"image encoder head {head!r} is not valid: expected 'keypoints' or 'pooled'")
        if c != 3:
            raise ValueError(f"rgb observations must be channel-last (H, W, 3), got {tuple(image_shape)}")
        if arch not in RGB_ARCHS:
            raise ValueError(f"rgb_arch {arch!r} is not valid: expected one of {list(RGB_ARCHS)}")
        if not 0.0 < crop <= 1.0:
            raise ValueError(f"rgb_crop={crop} is not valid: expected the kept fraction in (0, 1] (1.0: off)")
        self.crop = (round(crop * h), round(crop * w)) if crop < 1.0 else None  # (ch, cw) px
        if self.crop:
            h, w = self.crop
        blocks: list[nn.Module] = []
        if arch == "resnet18":
            self.stem = nn.Sequential(
                nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.GroupNorm(4, 64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
            )
            cin = 64
            for i, cout in enumerate((64, 128, 256, 512)):
                for j in range(2):
                    stride = 2 if i > 0 and j == 0 else 1
                    blocks.append(ResBlock2d(cin, cout, stride=stride, groups=cout // 16))
                    cin = cout
        else:
            self.stem = nn.Sequential(
                nn.Conv2d(3, channels[0], 5, 2, 2, bias=False),
                nn.GroupNorm(min(groups, channels[0]), channels[0]),
                nn.ReLU(),
            )
            cin = channels[0]
            for cout in channels:
                blocks.append(ResBlock2d(cin, cout, stride=2, groups=groups))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.pooled = head == "pooled"
        if self.pooled:
            self.out_dim = 2 * cin
            return
        with torch.no_grad():
            fh, fw = self.blocks(self.stem(torch.zeros(1, 3, h, w))).shape[-2:]
        self.pool = SpatialSoftmax(cin, fh, fw, num_kp)
        self.fc = nn.Linear(2 * num_kp, feature_dim)
        self.out_dim = feature_dim

    def _crop(self, x: torch.Tensor) -> torch.Tensor:  # (N, H, W, 3) -> (N, ch, cw, 3)
        assert self.crop is not None
        n, h, w, _ = x.shape
        ch, cw = self.crop
        if not self.training:
            top, left = (h - ch) // 2, (w - cw) // 2
            return x[:, top : top + ch, left : left + cw]
        # one random offset per image, gathered in one indexing op (no per-sample Python loop)
        top = torch.randint(0, h - ch + 1, (n, 1), device=x.device)
        left = torch.randint(0, w - cw + 1, (n, 1), device=x.device)
        rows = (top + torch.arange(ch, device=x.device))[:, :, None]  # (N, ch, 1)
        cols = (left + torch.arange(cw, device=x.device))[:, None, :]  # (N, 1, cw)
        return x[torch.arange(n, device=x.device)[:, None, None], rows, cols]

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (N, H, W, 3) float -> (N, feature_dim)
        if self.crop:
            x = self._crop(x)
        x = x.permute(0, 3, 1, 2)  # (N, 3, H, W)
        feat = self.blocks(self.stem(x))  # (N, C, h, w)
        if self.pooled:
            return torch.cat([feat.mean(dim=(2, 3)), feat.amax(dim=(2, 3))], dim=1)  # (N, 2C)
        return self.fc(self.pool(feat))


class ObsEncoder(nn.Module):
    """Encodes every obs key at every one of the To steps and concatenates: (B, To, ...) -> (B, out_dim).

    One CNN per camera (``share_rgb_encoder=False``) or one shared CNN; low-dim keys go through
    identity or an MLP. The result conditions the denoiser once per ``sample`` call (encode once).
    """

    def __init__(
        self,
        shape_meta: Mapping[str, Any],
        n_obs_steps: int,
        lowdim_hidden: Sequence[int] = (),
        rgb_channels: Sequence[int] = (32, 64, 128),
        rgb_num_kp: int = 32,
        rgb_feature_dim: int = 64,
        share_rgb_encoder: bool = False,
        rgb_arch: str = "small",
        rgb_crop: float = 1.0,
        num_tasks: int = 0,
        task_embed_dim: int = 32,
    ) -> None:
        super().__init__()
        self.keys: list[str] = list(shape_meta["obs"].keys())
        self.num_tasks = int(num_tasks)
        self.n_obs_steps = n_obs_steps
        self.encoders = nn.ModuleDict()
        self.is_rgb: dict[str, bool] = {}
        shared: ImageEncoder | None = None
        per_step = 0
        for key in self.keys:
            meta = shape_meta["obs"][key]
            rgb = meta.get("type", "low_dim") == "rgb"
            self.is_rgb[key] = rgb
            if rgb:
                if share_rgb_encoder and shared is not None:
                    enc: nn.Module = shared
                else:
                    enc = ImageEncoder(
                        meta["shape"], rgb_channels, rgb_num_kp, rgb_feature_dim, arch=rgb_arch, crop=rgb_crop
                    )
                    shared = enc if share_rgb_encoder else None
            else:
                enc = LowDimEncoder(int(torch.tensor(meta["shape"]).prod()), lowdim_hidden)
            self.encoders[buffer_key(key)] = enc
            per_step += enc.out_dim
        self.per_step_dim = per_step
        self.out_dim = per_step * n_obs_steps
        if self.num_tasks > 0:  # absent for single-task policies: their state dicts stay unchanged
            self.task_embedding = nn.Embedding(self.num_tasks, task_embed_dim)
            self.out_dim += task_embed_dim
        # Low-dim-only with identity encoders (the default): the condition is just the flattened window.
        self._identity = not lowdim_hidden and not any(self.is_rgb.values())

    def forward(self, obs: Mapping[str, torch.Tensor], task_id: torch.Tensor | None = None) -> torch.Tensor:
        """Obs windows {key: (B, To, ...)} (+ task ids (B,) for a multi-task encoder) -> (B, out_dim)."""
        feat = self._encode(obs)
        if self.num_tasks == 0:
            return feat
        if task_id is None:
            raise ValueError(f"this encoder is multi-task ({self.num_tasks} tasks): task_id (B,) is required")
        tid = task_id.to(device=feat.device, dtype=torch.long).reshape(-1).expand(feat.shape[0])
        return torch.cat([feat, self.task_embedding(tid)], dim=-1)  # (B, G + E)

    def _encode(self, obs: Mapping[str, torch.Tensor]) -> torch.Tensor:
        if self._identity:  # same values as the general path, without the per-key module calls
            b = obs[self.keys[0]].shape[0]
            if len(self.keys) == 1:
                return obs[self.keys[0]].reshape(b, -1)  # (B, To * D)
            return torch.cat([obs[k].reshape(*obs[k].shape[:2], -1) for k in self.keys], dim=-1).reshape(
                b, -1
            )
        feats = []
        for key in self.keys:
            x = obs[key]  # (B, To, ...) normalised
            b, to = x.shape[:2]
            x = x.reshape(b * to, *x.shape[2:]) if self.is_rgb[key] else x.reshape(b * to, -1)
            feats.append(self.encoders[buffer_key(key)](x).reshape(b, to, -1))  # (B, To, F_key)
        return torch.cat(feats, dim=-1).reshape(b, -1)  # (B, To * sum F)

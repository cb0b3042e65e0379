"""Encoders and denoiser backbones: shapes, spatial softmax, multi-camera fusion, per-position levels, sizes."""

from __future__ import annotations

import pytest
import torch

from robosteer.policies.encoders import ImageEncoder, ObsEncoder, SpatialSoftmax
from robosteer.policies.nets import ConditionalUnet1D, MLPDenoiser

torch.set_num_threads(1)


def test_spatial_softmax_finds_the_peak() -> None:
    ss = SpatialSoftmax(1, 9, 9, num_kp=1)
    with torch.no_grad():
        ss.proj.weight.fill_(1.0)
        ss.proj.bias.zero_()
    feat = torch.zeros(1, 1, 9, 9)
    feat[0, 0, 2, 6] = 100.0  # row 2 (y), column 6 (x)
    xy = ss(feat)
    torch.testing.assert_close(xy, torch.tensor([[0.5, -0.5]]), atol=1e-4, rtol=0)


def test_image_encoder_shapes_and_groupnorm() -> None:
    enc = ImageEncoder((32, 40, 3), channels=(8, 16), num_kp=4, feature_dim=12)
    out = enc(torch.rand(5, 32, 40, 3) * 2 - 1)
    assert out.shape == (5, 12)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in enc.modules())
    assert any(isinstance(m, torch.nn.GroupNorm) for m in enc.modules())
    with pytest.raises(ValueError, match="channel-last"):
        ImageEncoder((3, 32, 32))


@pytest.mark.parametrize("share", [False, True])
def test_multi_camera_fusion(share: bool) -> None:
    meta = {
        "obs": {
            "state": {"shape": [7], "type": "low_dim"},
            "image/a": {"shape": [16, 16, 3], "type": "rgb"},
            "image/b": {"shape": [16, 16, 3], "type": "rgb"},
        },
        "action": {"shape": [2]},
    }
    enc = ObsEncoder(
        meta,
        n_obs_steps=2,
        lowdim_hidden=(16,),
        rgb_channels=(8,),
        rgb_num_kp=4,
        rgb_feature_dim=6,
        share_rgb_encoder=share,
    )
    assert enc.out_dim == 2 * (16 + 6 + 6)
    assert (enc.encoders["image__a"] is enc.encoders["image__b"]) == share
    obs = {
        "state": torch.randn(3, 2, 7),
        "image/a": torch.rand(3, 2, 16, 16, 3),
        "image/b": torch.rand(3, 2, 16, 16, 3),
    }
    out = enc(obs)
    assert out.shape == (3, enc.out_dim)
    out.sum().backward()
    assert all(p.grad is not None for p in enc.parameters())
    obs2 = dict(obs, **{"image/b": torch.rand(3, 2, 16, 16, 3)})
    assert not torch.allclose(enc(obs2), out)  # the second camera is used


def test_default_sizes_for_cpu() -> None:
    """Default MLP ~1M params (the design card's calibration size); default UNet ~4.6M."""
    mlp = MLPDenoiser(4, 16, 78)
    unet = ConditionalUnet1D(4, 78, 16)
    n_mlp = sum(p.numel() for p in mlp.parameters())
    n_unet = sum(p.numel() for p in unet.parameters())
    assert 0.8e6 < n_mlp < 1.4e6 and 4e6 < n_unet < 5.5e6


@pytest.mark.parametrize("backbone", ["mlp", "unet"])
@pytest.mark.parametrize("cond_mode", ["film", "concat"])
def test_denoisers_timestep_and_levels(backbone: str, cond_mode: str) -> None:
    def build(per_pos: bool) -> torch.nn.Module:
        if backbone == "mlp":
            return MLPDenoiser(
                3,
                8,
                10,
                hidden_dim=32,
                n_blocks=2,
                time_embed_dim=16,
                cond_mode=cond_mode,
                per_position_levels=per_pos,
            )
        return ConditionalUnet1D(
            3, 10, 8, 16, (16, 32), 3, 8, cond_mode == "film", per_position_levels=per_pos
        )

    x, cond = torch.randn(2, 8, 3), torch.randn(2, 10)
    net = build(False)
    y = net(x, torch.tensor([3, 50]), cond)
    assert y.shape == (2, 8, 3)
    assert not torch.allclose(net(x, torch.tensor([3, 51]), cond)[1], y[1])  # timestep matters
    assert not torch.allclose(net(x, torch.tensor([3, 50]), cond * 2), y)  # condition matters
    with pytest.raises(ValueError, match=r"\(B,\)"):
        net(x, torch.zeros(2, 8), cond)
    per = build(True)
    lv = torch.tensor([[4] * 4 + [9] * 4, [4] * 4 + [9] * 4]) * 10
    z = per(x, lv, cond)
    lv2 = lv.clone()
    lv2[:, 7] = 10
    assert not torch.allclose(per(x, lv2, cond)[:, 0], z[:, 0])
    with pytest.raises(ValueError, match="per-position"):
        per(x, torch.tensor([1, 2]), cond)


def test_unet_horizon_check() -> None:
    with pytest.raises(ValueError, match="divisible"):
        ConditionalUnet1D(3, 10, 10, down_dims=(16, 32, 64))


def test_identity_fast_path_equals_the_general_path():
    from robosteer.policies.encoders import ObsEncoder

    meta = {
        "obs": {"state": {"shape": [5], "type": "low_dim"}, "extra": {"shape": [2, 3], "type": "low_dim"}}
    }
    obs = {"state": torch.randn(4, 2, 5), "extra": torch.randn(4, 2, 2, 3)}
    for keys in (["state"], ["state", "extra"]):
        enc = ObsEncoder({"obs": {k: meta["obs"][k] for k in keys}}, n_obs_steps=2)
        assert enc._identity
        fast = enc(obs)
        enc._identity = False
        assert torch.equal(fast, enc(obs)) and fast.shape == (4, enc.out_dim)


def test_random_crop_in_training_centre_crop_in_evaluation() -> None:
    """diffusion_policy's augmentation: a random window per image in training, the centre one in evaluation."""
    enc = ImageEncoder((10, 20, 3), channels=(4,), num_kp=2, feature_dim=3, crop=0.8)
    assert enc.crop == (8, 16)
    x = torch.arange(6 * 10 * 20 * 3, dtype=torch.float32).reshape(6, 10, 20, 3)
    enc.eval()
    torch.testing.assert_close(enc._crop(x), x[:, 1:9, 2:18])
    enc.train()
    torch.manual_seed(0)
    crops = enc._crop(x.repeat(20, 1, 1, 1))  # (120, 8, 16, 3)
    assert crops.shape == (120, 8, 16, 3)
    tops = (crops[:, 0, 0, 0] - x[0, 0, 0, 0]) // (20 * 3) % 10  # the row each window starts at
    lefts = (crops[:, 0, 0, 0] // 3) % 20
    assert set(tops.long().tolist()) == {0, 1, 2} and set(lefts.long().tolist()) == set(range(5))
    for i in (0, 7, 119):  # each window is a contiguous block of its own image
        t, left = int(tops[i]), int(lefts[i])
        torch.testing.assert_close(crops[i], x[i % 6, t : t + 8, left : left + 16])
    assert enc(x).shape == (6, 3)


def test_resnet18_is_diffusion_policys_layout() -> None:
    enc = ImageEncoder((32, 32, 3), num_kp=32, feature_dim=64, arch="resnet18")
    convs = [m for m in enc.modules() if isinstance(m, torch.nn.Conv2d) and m.kernel_size != (1, 1)]
    assert len(convs) == 17  # the stem + 8 basic blocks x 2 (ResNet-18 minus its fc)
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in enc.modules())
    assert {m.num_channels // m.num_groups for m in enc.modules() if isinstance(m, torch.nn.GroupNorm)} == {
        16
    }
    n_params = sum(p.numel() for p in enc.blocks.parameters()) + sum(p.numel() for p in enc.stem.parameters())
    assert 11.0e6 < n_params < 11.3e6  # torchvision's ResNet-18 trunk: 11.18M weights
    assert enc(torch.rand(2, 32, 32, 3)).shape == (2, 64)


def test_bad_encoder_choices_are_refused() -> None:
    with pytest.raises(ValueError, match="rgb_arch 'resnet50' is not valid"):
        ImageEncoder((16, 16, 3), arch="resnet50")
    with pytest.raises(ValueError, match="kept fraction"):
        ImageEncoder((16, 16, 3), crop=1.5)

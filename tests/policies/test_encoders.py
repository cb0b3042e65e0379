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

"""The checkpoint format: layout, exact round trips (no pickle), atomic replacement, clear errors."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest
import safetensors.torch
import torch
from _trainkit import SHAPE_META, TinyPolicy, make_tiny, params_equal

from robosteer import policies
from robosteer.policies import checkpoint as ck
from robosteer.policies.checkpoint import (
    FORMAT_VERSION,
    CheckpointError,
    find_checkpoint,
    load_checkpoint,
    load_policy,
    save_checkpoint,
    state_dict_hash,
)
from robosteer.policies.rng import get_rng_state, set_rng_state

torch.set_num_threads(1)


def _policy_config() -> dict:
    return {"policy": {"name": "tiny", "config": {"hidden": 16, "dropout": 0.1}}, "shape_meta": SHAPE_META}


def _trained_optimizer(
    model: torch.nn.Module,
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.95, 0.999), weight_decay=1e-6)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5**s)
    for _ in range(3):
        opt.zero_grad()
        model({"state": torch.randn(5, 2, 3)}).sum().backward()
        opt.step()
        sched.step()
    return opt, sched


def test_layout_and_exact_round_trip(tmp_path):
    torch.manual_seed(0)
    model = TinyPolicy()
    opt, sched = _trained_optimizer(model)
    rng = get_rng_state()
    extra = {"step": 7, "rng": [rng], "array": np.arange(4, dtype=np.uint32), "nested": {3: (1.5, None)}}
    path = save_checkpoint(
        tmp_path / "ck",
        {"model": model, "optimizer": opt.state_dict(), "lr_scheduler": sched.state_dict()},
        _policy_config(),
        extra,
    )

    files = sorted(p.name for p in path.iterdir())
    assert files == [
        "config.json",
        "extra.json",
        "extra.safetensors",
        "lr_scheduler.json",
        "lr_scheduler.safetensors",
        "model.safetensors",
        "optimizer.json",
        "optimizer.safetensors",
    ]
    cfg = json.loads((path / "config.json").read_text())
    assert cfg["format_version"] == FORMAT_VERSION and cfg["kind"] == "policy"
    assert cfg["policy"]["name"] == "tiny" and cfg["shape_meta"] == SHAPE_META
    assert cfg["modules"]["model"]["file"] == "model.safetensors"
    # A model file is a plain safetensors file with the state dict's own keys: any reader can open it.
    plain = safetensors.torch.load_file(str(path / "model.safetensors"))
    assert plain.keys() == model.state_dict().keys()
    assert not list(tmp_path.glob(".ck.*")), "temp dirs must not be left behind"

    loaded = load_checkpoint(path)
    restored = TinyPolicy()
    restored.load_state_dict(loaded.modules["model"])
    assert params_equal(model, restored)
    opt2 = torch.optim.AdamW(restored.parameters(), lr=5.0)
    opt2.load_state_dict(loaded.modules["optimizer"])
    assert opt2.param_groups[0]["betas"] == (0.95, 0.999)  # tuples survive JSON
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    for k, st in opt.state_dict()["state"].items():
        for name, t in st.items():
            assert torch.equal(t, opt2.state_dict()["state"][k][name])
    # Continuing both optimizers gives identical weights (eval: no dropout draws).
    x = torch.randn(5, 2, 3)
    model.eval(), restored.eval()
    for m, o in ((model, opt), (restored, opt2)):
        o.zero_grad()
        m({"state": x}).sum().backward()
        o.step()
    assert params_equal(model, restored)
    assert loaded.modules["lr_scheduler"]["last_epoch"] == 3
    assert loaded.extra["nested"] == {3: (1.5, None)} and loaded.extra["step"] == 7
    assert loaded.extra["array"].dtype == np.uint32 and list(loaded.extra["array"]) == [0, 1, 2, 3]

    # RNG states restore exactly.
    set_rng_state(rng)
    expected = (random.random(), np.random.rand(), torch.rand(1).item())
    set_rng_state(loaded.extra["rng"][0])
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == expected


def test_replace_is_atomic_and_failed_save_keeps_old(tmp_path, monkeypatch):
    a, b = TinyPolicy(), TinyPolicy()
    path = save_checkpoint(tmp_path / "latest", {"model": a}, _policy_config())
    save_checkpoint(path, {"model": b}, _policy_config(), {"step": 2})
    assert load_checkpoint(path).extra["step"] == 2
    assert state_dict_hash(load_checkpoint(path).modules["model"]) == state_dict_hash(b)

    # A save that dies half-way (an unstorable value) leaves the previous checkpoint untouched.
    with pytest.raises(TypeError, match="no pickle"):
        save_checkpoint(path, {"model": a, "bad": {"x": object()}}, _policy_config())
    assert state_dict_hash(load_checkpoint(path).modules["model"]) == state_dict_hash(b)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest"]

    # Without renameat2 the two-rename fallback is used; a crash between its renames is recovered on load.
    monkeypatch.setattr(ck, "_exchange", lambda x, y: False)
    save_checkpoint(path, {"model": a}, _policy_config(), {"step": 3})
    assert load_checkpoint(path).extra["step"] == 3
    path.rename(tmp_path / ".latest.old")  # state right after the first rename of the fallback
    assert load_checkpoint(path).extra["step"] == 3
    assert find_checkpoint(path, "latest")[1] == "model"


def test_errors_name_path_key_and_choices(tmp_path, monkeypatch):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope")
    path = save_checkpoint(tmp_path / "c", {"model": TinyPolicy()}, _policy_config())
    (path / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match=r"model.safetensors: missing model weights"):
        load_checkpoint(path)

    path = save_checkpoint(tmp_path / "c", {"model": TinyPolicy()}, _policy_config())
    cfg = json.loads((path / "config.json").read_text())
    cfg["format_version"] = 99
    (path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"config.json: key 'format_version' is 99, expected 1"):
        load_checkpoint(path)

    with pytest.raises(CheckpointError, match="no module 'ema'"):
        load_checkpoint(save_checkpoint(tmp_path / "d", {"model": TinyPolicy()}, _policy_config()), ["ema"])
    with pytest.raises(CheckpointError, match="did you mean 'latest'"):
        find_checkpoint(tmp_path / "d", "lates")

    # An unknown policy name is reported with the nearest valid one.
    bad = _policy_config()
    bad["policy"]["name"] = "difusion"
    save_checkpoint(tmp_path / "e", {"model": TinyPolicy()}, bad)
    with pytest.raises(
        CheckpointError, match=r"'policy.name' is 'difusion'.*nearest valid choice: 'diffusion'"
    ):
        load_policy(tmp_path / "e")

    with pytest.raises(ValueError, match="reserved"):
        save_checkpoint(tmp_path / "f", {"extra": TinyPolicy()}, _policy_config())


def test_load_policy_from_run_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(policies, "make_policy", make_tiny, raising=False)
    monkeypatch.setattr(ck, "_known_policies", lambda: ["diffusion", "flow", "streaming", "tiny"])
    torch.manual_seed(1)
    model, ema, best = TinyPolicy(), TinyPolicy(), TinyPolicy()
    cfg = {**_policy_config(), "inference_module": "ema"}
    run = tmp_path / "run"
    save_checkpoint(run / "checkpoints" / "latest", {"model": model, "ema": ema}, cfg)

    # No 'best' yet: falls back to the latest EMA weights.
    assert params_equal(load_policy(run), ema)
    assert params_equal(load_policy(run, which="latest"), model)
    assert params_equal(load_policy(run, which="ema"), ema)
    save_checkpoint(run / "checkpoints" / "best", {"model": model, "ema": best}, cfg)
    loaded = load_policy(run)
    assert params_equal(loaded, best) and not loaded.training
    assert params_equal(load_policy(run / "checkpoints" / "best", which="latest"), model)

    with pytest.raises(CheckpointError, match="neither a checkpoint directory"):
        load_policy(tmp_path)


def test_state_dict_hash_detects_any_change():
    m = TinyPolicy()
    h = state_dict_hash(m)
    assert h == state_dict_hash(m.state_dict()) and len(h) == 64
    with torch.no_grad():
        m.net[0].weight[0, 0] += 1e-7
    assert state_dict_hash(m) != h
    m2 = TinyPolicy()
    m2.load_state_dict(m.state_dict())
    assert state_dict_hash(m2) == state_dict_hash(m)
    m2.obs_scale.fill_(1.0)  # buffers count too
    assert state_dict_hash(m2) != state_dict_hash(m)


def _weights_checkpoint(path):
    """A checkpoint whose weights file is ~256 KB (room for 64 KB of damage), with nested and extra state."""
    torch.manual_seed(0)
    model = torch.nn.Linear(256, 256)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(2, 256)).sum().backward()
    opt.step()
    modules = {"model": model, "optimizer": opt.state_dict()}
    return save_checkpoint(path, modules, _policy_config(), {"step": 3, "t": torch.ones(4)}), model


def test_corrupted_weights_file_fails_at_load_naming_the_file(tmp_path):
    """64 KB of 0xff inside a safetensors file used to load (as NaN weights) and fail much later."""
    path, model = _weights_checkpoint(tmp_path / "ck")
    cfg = json.loads((path / "config.json").read_text())
    assert set(cfg["sha256"]) == {
        "model.safetensors",
        "optimizer.safetensors",
        "optimizer.json",
        "extra.json",
        "extra.safetensors",
    }
    assert all(len(d) == 64 for d in cfg["sha256"].values())
    assert torch.equal(load_checkpoint(path).modules["model"]["weight"], model.weight.detach())

    weights = path / "model.safetensors"
    raw = bytearray(weights.read_bytes())
    raw[65536 : 2 * 65536] = b"\xff" * 65536  # inside the weight matrix: a valid header, NaN values
    weights.write_bytes(bytes(raw))
    assert torch.isnan(safetensors.torch.load_file(str(weights))["weight"]).any()  # what used to load
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    msg = str(info.value)
    assert str(weights) in msg and "checksum mismatch" in msg, msg
    assert cfg["sha256"]["model.safetensors"][:12] in msg  # expected digest prefix, and the actual one
    opt_file = path / "optimizer.safetensors"
    raw = bytearray(opt_file.read_bytes())
    raw[-1] ^= 0xFF
    opt_file.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=r"optimizer\.safetensors: checksum mismatch"):
        load_checkpoint(path, ["optimizer"])


@pytest.mark.parametrize("name", ["optimizer.json", "extra.json", "extra.safetensors"])
def test_every_file_of_a_checkpoint_is_checked(tmp_path, name):
    path, _ = _weights_checkpoint(tmp_path / "ck")
    f = path / name
    raw = bytearray(f.read_bytes())
    raw[-2] ^= 0x01  # one byte changed: the checksum is checked before the file is parsed
    f.write_bytes(bytes(raw))
    with pytest.raises(CheckpointError, match=rf"{re.escape(name)}: checksum mismatch"):
        load_checkpoint(path)


def test_checkpoint_without_recorded_checksums_still_loads(tmp_path):
    """Checkpoints written before checksums existed have no 'sha256' key: they load, unchecked."""
    path, model = _weights_checkpoint(tmp_path / "ck")
    cfg = json.loads((path / "config.json").read_text())
    del cfg["sha256"]
    (path / "config.json").write_text(json.dumps(cfg))
    loaded = load_checkpoint(path)
    assert torch.equal(loaded.modules["model"]["weight"], model.weight.detach()) and loaded.extra["step"] == 3

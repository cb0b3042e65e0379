"""`robosteer-steer preset=reference`: ajwagen/dsrl's own values, one override away from the headline's."""

from __future__ import annotations

import dataclasses

from robosteer.policies.steering.dsrl import DSRLConfig
from robosteer.scripts.cli import _compose

CPU_ONLY = {"hidden"}  # kept "ours" in the preset too: the reference's 3×2048 networks are a GPU's


def test_preset_reference_restores_every_dsrl_default():
    cfg = _compose("steer", ["base=runs/dp", "preset=reference"])
    defaults = DSRLConfig()
    for f in dataclasses.fields(DSRLConfig):
        if f.name not in CPU_ONLY:
            assert cfg.dsrl[f.name] == getattr(defaults, f.name), f.name
    assert cfg.run.utd == 5.0 and cfg.run.offline_ratio == 0.0 and cfg.offline == "none"


def test_without_the_preset_the_headline_overrides_hold():
    cfg = _compose("steer", ["base=runs/dp"])
    assert cfg.dsrl.gamma == 0.95 and cfg.dsrl.noise_bank == 50_000 and cfg.run.reward == "shaped"
    assert cfg.offline == "auto" and cfg.which == "ema"

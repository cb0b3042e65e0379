"""`robosteer-steer preset=reference`: ajwagen/dsrl's own values, one override away from the headline's."""

from __future__ import annotations

from robosteer.scripts.cli import _compose


def test_without_the_preset_the_headline_overrides_hold():
    cfg = _compose("steer", ["base=runs/dp"])
    assert cfg.dsrl.gamma == 0.95 and cfg.dsrl.noise_bank == 50_000 and cfg.run.reward == "shaped"
    assert cfg.offline == "auto" and cfg.which == "ema"

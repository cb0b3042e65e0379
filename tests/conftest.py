"""Hydra's ConfigStore holds robosteer's structured configs (scripts/schemas.py) for every test that
composes a command's config, as each console script's main() does before Hydra runs."""

from __future__ import annotations

from scripts import schemas

schemas.register(eval_sources=True)  # the tests compose robosteer-eval's config too

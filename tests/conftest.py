"""Hydra's ConfigStore holds robosteer's structured configs (scripts/schemas.py) for every test that
composes a command's config, as each console script's main() does before Hydra runs.

The optional GPU backend's environment (.venv-gpu, `make gpu-test`) has no Hydra and its tests compose
no config, so the registration is skipped there rather than failing the whole session at import."""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("hydra") is not None:
    from robosteer.scripts import schemas

    schemas.register(eval_sources=True)  # the tests compose robosteer-eval's config too

"""robosteer generative policies (diffusion, streaming diffusion, flow matching).

Public names are resolved lazily so ``import policies`` (e.g. for ``policies.data``) does not import torch:
``make_policy``, ``list_policies``, ``get_policy_class``, ``register_policy``, ``GenerativePolicy`` and
``load_policy`` (defined in ``policies.checkpoint``).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "make_policy": "robosteer.policies.registry",
    "list_policies": "robosteer.policies.registry",
    "get_policy_class": "robosteer.policies.registry",
    "register_policy": "robosteer.policies.registry",
    "GenerativePolicy": "robosteer.policies.base",
    "PolicyConfig": "robosteer.policies.base",
    "load_policy": "robosteer.policies.checkpoint",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'policies' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

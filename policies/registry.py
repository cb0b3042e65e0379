"""Policy registry with lazy imports (LeRobot's pattern): a name maps to "module:Class", imported on demand,
so importing ``policies`` stays cheap and adding a policy is one line here.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Mapping
from typing import Any

from robosteer.policies.base import GenerativePolicy

_REGISTRY: dict[str, str] = {
    "diffusion": "robosteer.policies.diffusion:DiffusionPolicy",
    "flow": "robosteer.policies.flow:FlowPolicy",
    "streaming": "robosteer.policies.streaming:StreamingDiffusionPolicy",
}


def list_policies() -> list[str]:
    """Registered policy names."""
    return sorted(_REGISTRY)


def register_policy(name: str, target: str) -> None:
    """Register ``name`` -> "package.module:ClassName" (a GenerativePolicy subclass)."""
    if ":" not in target:
        raise ValueError(f"target must look like 'package.module:ClassName', got {target!r}")
    _REGISTRY[name] = target


def get_policy_class(name: str) -> type[GenerativePolicy]:
    """Import and return the class registered under ``name``; unknown names list the valid ones."""
    if name not in _REGISTRY:
        near = difflib.get_close_matches(name, list(_REGISTRY), n=1, cutoff=0.0)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise ValueError(f"unknown policy {name!r}{hint} (valid: {', '.join(list_policies())})")
    module, cls_name = _REGISTRY[name].split(":")
    cls = getattr(importlib.import_module(module), cls_name)
    if not (isinstance(cls, type) and issubclass(cls, GenerativePolicy)):
        raise TypeError(f"{_REGISTRY[name]} is not a GenerativePolicy subclass")
    return cls


def make_policy(
    name: str, shape_meta: Mapping[str, Any], stats: Mapping[str, Any] | None = None, **config: Any
) -> GenerativePolicy:
    """Build a policy by name. ``stats=None`` leaves the normaliser unfitted (to be filled by load_state_dict).

    Unknown config keys raise a ValueError naming the key and the nearest valid key.
    """
    cls = get_policy_class(name)
    cfg = cls.config_class.from_dict(config, policy_name=name)
    return cls(shape_meta, cfg, stats)

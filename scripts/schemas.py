"""Config dataclasses as Hydra structured configs (group ``schema``): one source of defaults, and every key a
plain override.

A config file names its schema in its defaults list (``- /schema@dsrl: dsrl``) and overrides only what it
means to change, with the reason; every field can be set from the command line (``dsrl.tau=0.01``), and a
misspelt or mistyped one is refused by name. ``robosteer-steer --cfg job`` prints the values in force.
"""

from __future__ import annotations


def register() -> None:
    """Store every schema in Hydra's ConfigStore (idempotent; call before composing a config that uses one)."""
    from hydra.core.config_store import ConfigStore

    from policies.steering.dsrl import DSRLConfig
    from policies.steering.expo import EXPOConfig
    from policies.steering.loop import OnlineRunConfig
    from policies.value.calql import CalQLConfig
    from policies.value.iql import IQLConfig

    store = ConfigStore.instance()
    schemas = {
        "dsrl": DSRLConfig,
        "expo": EXPOConfig,
        "online_run": OnlineRunConfig,
        "calql": CalQLConfig,
        "iql": IQLConfig,
    }
    for name, node in schemas.items():
        store.store(group="schema", name=name, node=node)
    store.store(group="schema", name="safety", node=safety_overrides())


def safety_overrides() -> dict[str, str]:
    """robosteer-deploy's ``safety`` node: every ``SafetyConfig`` key, unset (``???``) until given.

    The filter's settings are layered (SafetyConfig's defaults < the driver's ``safety_defaults()`` < the
    robot config's ``safety`` < the command line), so the command-line layer holds only what is given; listing
    every key makes ``safety.max_velocity=0.2`` a plain override and a misspelt key an error by name.
    """
    import dataclasses

    from real.safety import SafetyConfig

    return {f.name: "???" for f in dataclasses.fields(SafetyConfig)}

"""One source of defaults: what the command line runs is each algorithm's dataclass defaults, as a library user
calling ``DSRLConfig()`` gets them; YAML composes and never sets an algorithm's field; ``preset=reference`` is
the one place the references' values are restated; the old names of a setting are refused naming the new one."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from robosteer.policies.steering.dsrl import DSRLConfig, DSRLRunConfig
from robosteer.policies.steering.expo import EXPOConfig, EXPORunConfig
from robosteer.policies.value.calql import CalQLConfig
from robosteer.policies.value.iql import IQLConfig
from robosteer.scripts.cli import CliError, _compose, problems
from robosteer.scripts.schemas import LIBRARY_ONLY, RENAMED, TOP_LEVEL

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
# (command, overrides, {config node: dataclass}) for every algorithm a command composes
CASES = [
    ("steer", ["base=x", "algo=dsrl"], {"dsrl": DSRLConfig, "run": DSRLRunConfig}),
    ("steer", ["base=x", "algo=expo"], {"expo": EXPOConfig, "run": EXPORunConfig}),
    ("value", ["dataset=x", "algo=calql"], {"calql": CalQLConfig}),
    ("value", ["dataset=x", "algo=iql"], {"iql": IQLConfig}),
]


def _resolved(cfg, node: str, cls: type) -> dict:
    """The node's values, with the fields typed once at the top level (``seed``, ``variant``) taken from there."""
    values = OmegaConf.to_container(cfg[node], resolve=True)
    for key in TOP_LEVEL.get(node, ()):
        assert key not in values, f"{node}.{key} is a second name of the top-level {key}"
        values[key] = cfg[key]
    for key in LIBRARY_ONLY.get(
        node, ()
    ):  # W&B's variables: no command-line copy, the field's default stands
        assert key not in values, f"{node}.{key} is W&B's own variable, not a command-line key"
        values[key] = getattr(cls(), key)
    return values


@pytest.mark.parametrize(("command", "overrides", "nodes"), CASES, ids=lambda c: str(c)[:20])
def test_the_cli_runs_the_dataclass_defaults(command: str, overrides: list[str], nodes: dict) -> None:
    cfg = _compose(command, overrides)
    for node, cls in nodes.items():
        assert _resolved(cfg, node, cls) == dataclasses.asdict(cls()), f"{command} {node} != {cls.__name__}()"


def test_the_run_configs_keep_each_algorithms_own_defaults() -> None:
    """DSRL's headline is paid the shaped cost and mixes a quarter of demonstrations; EXPO's RLPD half."""
    assert (DSRLRunConfig().reward, DSRLRunConfig().offline_ratio) == ("shaped", 0.25)
    assert (EXPORunConfig().reward, EXPORunConfig().offline_ratio) == ("sparse", 0.5)


def _fields(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


NODES = {"dsrl": DSRLConfig, "expo": EXPOConfig, "calql": CalQLConfig, "iql": IQLConfig, "run": DSRLRunConfig}


@pytest.mark.parametrize(
    "path",
    sorted(p for p in CONFIGS.rglob("*.yaml") if p.parent.name != "preset"),
    ids=lambda p: str(p.relative_to(CONFIGS)),
)
def test_no_yaml_sets_a_field_of_an_algorithm(path: Path) -> None:
    """Every ``dsrl:`` / ``expo:`` / ``run:`` / ... block of a YAML file is empty of the dataclass's fields."""
    import yaml

    data = yaml.safe_load(path.read_text()) or {}
    for node, cls in NODES.items():
        block = data.get(node)
        if isinstance(block, dict):
            assert not set(block) & _fields(cls), f"{path.name}: {node}.{sorted(set(block) & _fields(cls))}"


def test_preset_reference_is_the_references_values() -> None:
    from tests.configs.test_reference_labels import REFERENCE

    cfg = _compose("steer", ["base=x", "preset=reference"])
    for key, want in REFERENCE["dsrl"].items():
        got = cfg.dsrl[key] if key in cfg.dsrl else cfg[key]
        assert got == pytest.approx(want) if isinstance(want, float) else got == want, key


@pytest.mark.parametrize(("old", "new"), sorted(RENAMED["steer"].items()))
def test_an_old_name_is_refused_naming_the_new_one(old: str, new: str) -> None:
    with pytest.raises(
        CliError, match=rf"^{re.escape(old)}= is now {re.escape(new)}= .*use {re.escape(new)}=1$"
    ):
        problems("steer", ["base=x", f"{old}=1"])

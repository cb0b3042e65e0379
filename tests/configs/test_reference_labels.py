"""Every value labelled "reference" is the named reference's value, wherever the default lives.

Each algorithm's defaults are written once, in its config dataclass (``DSRLConfig``, ``EXPOConfig``,
``CalQLConfig``, ``IQLConfig``: registered as Hydra structured configs by scripts/schemas.py), each field's
line labelled in its comment; ``configs/algo/*.yaml`` overrides only what it means to change, each override
labelled "ours" or "CPU" with its reason.

The tables below are the references' own values, with where they come from (see
../shared/reference/algorithms.md): V-GPS ``lc_cql`` / ``lc_iql`` over jaxrl_m (nakamotoo/V-GPS
``experiments/configs/train_config.py``, ``jaxrl_m/agents/continuous/{cql,sac,gc_iql}.py``,
``jaxrl_m/networks/mlp.py``), ``ajwagen/dsrl`` (cfg/robomimic + the SB3 fork's dsrl.py), and EXPO
(Servo97/EXPO@bbd5713 ``configs/expo_config.py``, ``scripts/**``). A line whose comment starts with
"reference" must match; a value that differs must say "ours" (or "CPU") with its reason.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

ALGO = Path(__file__).resolve().parents[2] / "configs" / "algo"

REFERENCE: dict[str, dict[str, object]] = {
    "calql": {
        "discount": 0.98,
        "tau": 0.005,
        "critic_lr": 3e-4,
        "actor_lr": 1e-4,
        "actor_warmup_steps": 2000,
        "critic_warmup_steps": 2000,
        "temperature_lr": 3e-4,
        "init_temperature": 1.0,
        "target_entropy": None,
        "backup_entropy": False,
        "cql_alpha": 5.0,
        "cql_n_actions": 4,
        "cql_importance_sample": True,
        "cql_max_target_backup": True,
        "cql_temp": 1.0,
        "use_calql": True,
        "hidden": [256, 256],
        "num_critics": 2,
        "activation": "silu",
        "layer_norm": False,
    },
    "iql": {
        "discount": 0.98,
        "expectile": 0.7,
        "tau": 0.002,
        "critic_lr": 3e-4,
        "value_lr": 3e-4,
        "warmup_steps": 2000,
        "hidden": [256, 256],
        "num_critics": 2,
        "activation": "silu",
        "layer_norm": False,
    },
    "dsrl": {
        "variant": "na",
        "critic_obs": "policy",  # SB3 SAC: actor and critics share the observation (no privileged critic)
        "actor_lr": 3e-4,
        "critic_lr": 3e-4,
        "activation": "tanh",
        "num_critics": 2,
        "backup": "min",
        "latent_bound": 1.0,
        "target_entropy": 0.0,
        "gamma": 0.99,
        "tau": 0.005,
        "temperature_lr": 3e-4,
        "batch_size": 256,
        "init_temperature": 1.0,
        "noise_critic_steps": 10,
        "noise_critic_samples": 1,
        "noise_bank": 0,
        "actor_tau": 0.0,  # no averaged actor (the SB3 fork evaluates its trained actor)
        "backup_entropy": True,
        "normalize_obs": True,  # DPPO's env wrapper min-max normalises observations with the base's stats
    },
    "expo": {
        "policy": "otf",
        "num_samples": 8,
        "num_edits": 8,
        "edit_scale": 0.05,
        "gamma": 0.99,
        "tau": 0.005,
        "base_ema": 0.001,
        "critic_lr": 3e-4,
        "edit_lr": 3e-4,
        "temperature_lr": 3e-4,
        "base_lr": 3e-4,
        "base_decay_steps": 3_000_000,
        "batch_size": 256,
        "hidden": [256, 256, 256],
        "num_critics": 10,
        "num_min_qs": 2,
        "init_temperature": 1.0,
        "target_entropy": None,
        "adjust_target_entropy": False,
        "backup_entropy": False,
        "backup_base": "online",
        "bc_online": "all",
        "policy_updates": 1,
        "action": "single",
        "default": 0.05,
        "utd": 20.0,
        "offline_ratio": 0.5,
    },
}


def _labelled_lines(path: Path) -> list[tuple[int, str, str, str]]:
    """(line number, key, raw value, comment) of every ``key: value  # comment`` line."""
    out = []
    for i, line in enumerate(path.read_text().splitlines(), 1):
        m = re.match(r"^\s*([A-Za-z_][\w]*):\s*([^#]*?)\s*(?:#\s*(.*))?$", line)
        if m and m.group(2):
            out.append((i, m.group(1), m.group(2), m.group(3) or ""))
    return out


def _schema(algo: str) -> type:
    from robosteer.policies.steering.dsrl import DSRLConfig
    from robosteer.policies.steering.expo import EXPOConfig
    from robosteer.policies.value.calql import CalQLConfig
    from robosteer.policies.value.iql import IQLConfig

    return {"calql": CalQLConfig, "iql": IQLConfig, "dsrl": DSRLConfig, "expo": EXPOConfig}[algo]


def _defaults(cls: type) -> dict[str, Any]:
    return dataclasses.asdict(cls())


def _field_labels(cls: type) -> dict[str, tuple[str, str]]:
    """{field: (where, comment)} from each ``name: type = default  # comment`` line of the dataclass."""
    lines, first = inspect.getsourcelines(cls)
    where = inspect.getsourcefile(cls)
    out = {}
    for i, line in enumerate(lines, first):
        m = re.match(r"^    (\w+): [^=]+ = .*?(?:  #\s*(.*))?$", line.rstrip())
        if m and m.group(1) in {f.name for f in dataclasses.fields(cls)}:
            out[m.group(1)] = (f"{Path(where).name}:{i}", m.group(2) or "")
    return out


def _overrides(algo: str) -> list[tuple[int, str, str, str]]:
    """The labelled lines of ``configs/algo/<algo>.yaml``'s own ``<algo>:`` block (its overrides)."""
    path = ALGO / f"{algo}.yaml"
    text = path.read_text().splitlines()
    start = next((i for i, line in enumerate(text, 1) if line.startswith(f"{algo}:")), None)
    if start is None:
        return []
    end = next((i for i, line in enumerate(text, 1) if i > start and re.match(r"^\S", line)), len(text) + 1)
    return [r for r in _labelled_lines(path) if start < r[0] < end]


def _is(value: object, want: object) -> bool:
    return value == want if not isinstance(want, float) else value == pytest.approx(want)


@pytest.mark.parametrize("algo", sorted(REFERENCE))
def test_every_reference_label_is_the_references_value(algo: str) -> None:
    table, checked = REFERENCE[algo], 0
    path = ALGO / f"{algo}.yaml"
    for line, key, raw, comment in _labelled_lines(path):  # the YAML's overrides and loop settings
        if not comment.lower().startswith("reference"):
            continue
        assert key in table, (
            f"{path.name}:{line}: {key} is labelled reference but has no reference value here"
        )
        value = yaml.safe_load(raw)
        assert _is(value, table[key]), (
            f"{path.name}:{line}: {key}={value!r} is labelled reference, but the reference is {table[key]!r}"
        )
        checked += 1
    cls = _schema(algo)
    defaults = _defaults(cls)
    for key, (where, comment) in _field_labels(cls).items():  # the dataclass's defaults
        if not comment.lower().startswith("reference"):
            continue
        assert key in table, f"{where}: {key} is labelled reference but has no reference value here"
        assert _is(defaults[key], table[key]), (
            f"{where}: {key}={defaults[key]!r} is labelled reference, but the reference is {table[key]!r}"
        )
        checked += 1
    assert checked >= 5, f"{algo}: only {checked} reference labels found"


@pytest.mark.parametrize("algo", sorted(REFERENCE))
def test_every_override_differs_from_the_default_and_says_why(algo: str) -> None:
    """A YAML value is a deliberate override: it changes the dataclass default and is labelled with a reason."""
    defaults = _defaults(_schema(algo))
    for line, key, raw, comment in _overrides(algo):
        value = yaml.safe_load(raw)
        if isinstance(value, str) and value.startswith("${"):
            continue  # tied to a top-level key (dsrl.variant: ${variant})
        where = f"{algo}.yaml:{line}: {algo}.{key}={value!r}"
        assert key in defaults, f"{where} is not a field of {_schema(algo).__name__}"
        assert not _is(value, defaults[key]), f"{where} restates the dataclass default: remove it"
        assert re.match(r"(ours|cpu|reference)", comment.lower()), f"{where} says not why (ours/CPU: reason)"


@pytest.mark.parametrize("algo", sorted(REFERENCE))
def test_every_hyperparameter_with_a_reference_value_is_labelled(algo: str) -> None:
    """Each field the reference sets says where its value comes from: in the dataclass, or in its override."""
    cls = _schema(algo)
    labels = _field_labels(cls)  # a field whose line the formatter wrapped has no label here: it fails
    overridden = {key: comment for _, key, _, comment in _overrides(algo)}
    unlabelled = [
        f"{algo}.{key}"
        for key in REFERENCE[algo]
        if key in _defaults(cls)
        and not re.match(r"(reference|ours)", labels.get(key, ("", ""))[1].lower())
        and not re.match(r"(ours|cpu)", overridden.get(key, "").lower())
    ]
    assert not unlabelled, unlabelled


@pytest.mark.parametrize("algo", ["calql", "iql"])
def test_the_value_learners_defaults_are_the_reference(algo: str) -> None:
    """Every default of the V-GPS critics is the reference's, and the YAML overrides none of them."""
    assert _defaults(_schema(algo)) == REFERENCE[algo]
    assert _overrides(algo) == []


def test_a_planted_wrong_default_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks read the dataclass, not a copy: a changed reference-labelled default fails them."""
    cls = _schema("iql")
    monkeypatch.setattr(cls, "__init__", _with_default(cls, "tau", 0.005))
    with pytest.raises(AssertionError, match=r"tau=0\.005 is labelled reference"):
        test_every_reference_label_is_the_references_value("iql")


def _with_default(cls: type, name: str, value: object) -> Any:
    init = cls.__init__

    def patched(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **{name: value, **kwargs})

    return patched

"""Every value that ``configs/algo/*.yaml`` labels "reference" is the named reference's value.

The tables below are the references' own values, with where they come from (see
../shared/reference/algorithms.md): V-GPS ``lc_cql`` / ``lc_iql`` over jaxrl_m (nakamotoo/V-GPS
``experiments/configs/train_config.py``, ``jaxrl_m/agents/continuous/{cql,sac,gc_iql}.py``,
``jaxrl_m/networks/mlp.py``), ``ajwagen/dsrl`` (cfg/robomimic + the SB3 fork's dsrl.py), and EXPO
(Servo97/EXPO@bbd5713 ``configs/expo_config.py``, ``scripts/**``). A line whose comment starts with
"reference" must match; a value that differs must say "ours" (or "CPU") with its reason.
"""

from __future__ import annotations

import re
from pathlib import Path

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
        "actor_lr": 3e-4,
        "critic_lr": 3e-4,
        "activation": "tanh",
        "num_critics": 2,
        "backup": "min",
        "latent_bound": 1.0,
        "target_entropy": 0.0,
        "latent": "full",
        "gamma": 0.99,
        "tau": 0.005,
        "temperature_lr": 3e-4,
        "batch_size": 256,
        "init_temperature": 1.0,
        "noise_critic_steps": 10,
        "noise_critic_samples": 1,
        "noise_bank": 0,
        "backup_entropy": True,
    },
    "expo": {
        "policy": "otf",
        "num_samples": 8,
        "num_edits": 8,
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


@pytest.mark.parametrize("algo", sorted(REFERENCE))
def test_every_reference_label_is_the_references_value(algo: str) -> None:
    path = ALGO / f"{algo}.yaml"
    table = REFERENCE[algo]
    checked = 0
    for line, key, raw, comment in _labelled_lines(path):
        if not comment.lower().startswith("reference"):
            continue
        assert key in table, (
            f"{path.name}:{line}: {key} is labelled reference but has no reference value here"
        )
        value = yaml.safe_load(raw)
        want = table[key]
        ok = value == want if not isinstance(want, float) else value == pytest.approx(want)
        assert ok, f"{path.name}:{line}: {key}={value!r} is labelled reference, but the reference is {want!r}"
        checked += 1
    assert checked >= 5, f"{path.name}: only {checked} reference labels found"


@pytest.mark.parametrize("algo", ["calql", "iql", "dsrl"])
def test_every_algorithm_value_is_labelled_reference_or_ours(algo: str) -> None:
    """Each hyperparameter of these files says where it comes from (EXPO labels only its deviations)."""
    path = ALGO / f"{algo}.yaml"
    unlabelled = [
        f"{path.name}:{line}: {key}"
        for line, key, _, comment in _labelled_lines(path)
        if key in REFERENCE[algo] and not re.match(r"(reference|ours)", comment.lower())
    ]
    assert not unlabelled, unlabelled


@pytest.mark.parametrize("algo", ["calql", "iql"])
def test_the_value_learners_defaults_are_the_reference(algo: str) -> None:
    """The dataclass defaults equal the YAML (and so the reference): one set of values, not two."""
    from dataclasses import asdict

    from policies.value.calql import CalQLConfig
    from policies.value.iql import IQLConfig

    defaults = asdict({"calql": CalQLConfig, "iql": IQLConfig}[algo]())
    yaml_values = yaml.safe_load((ALGO / f"{algo}.yaml").read_text())[algo]
    assert defaults == yaml_values
    assert defaults == REFERENCE[algo]

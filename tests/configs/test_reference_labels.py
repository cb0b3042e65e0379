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
"reference" must match; a value that differs must say "ours" (or "CPU") with its reason. ``DEVIATIONS`` pins
the deviations no default value shows (time-outs, evaluation with the mean latent, Q^A's action units, V-GPS's
selection defaults, EXPO's reward and base sampler, the actors' log-std clamp, DDIM's ε) as labelled "ours".
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


# ---------------------------------------------------------------------------------------- deviations
ROOT = Path(__file__).resolve().parents[2]

# Deviations from the references that comparing default values cannot catch, each labelled "ours" where it
# lives: a config dataclass field (``Class.field``: its help text, scripts/help.py, inherited fields included),
# a YAML key (its comment), or a marked comment ``# ours (<topic>): ...`` at the code that deviates (no field
# holds it); and named in its algorithm page's "Where it differs from the reference" section (a phrase of it).
# Each was checked against the reference's code (../shared/reference/algorithms.md and the authors' repos).
# (file, "Class.field" | YAML key | "(<topic>)", label, docs/algorithms page, phrase in its section)
DEVIATIONS: list[tuple[str, str, str, str, str]] = [
    # time-outs bootstrap; DSRL's reference (ActionChunkWrapper: done, truncated=False) and EXPO's robomimic
    # entry (train_robo.py: mask 0 at the horizon) store them as terminal
    ("policies/steering/loop.py", "(time-outs)", "ours", "dsrl", "A time-out bootstraps"),
    ("policies/steering/loop.py", "(time-outs)", "ours", "expo", "A time-out bootstraps"),
    # DSRL's periodic evaluations (so `best`) and robosteer-eval act with the mean latent; the reference samples
    (
        "policies/steering/dsrl.py",
        "(mean-latent evaluation)",
        "ours",
        "dsrl",
        "act with the actor's mean latent",
    ),
    ("configs/eval.yaml", "deterministic", "ours", "dsrl", "act with the actor's mean latent"),
    # Q^A reads raw executed actions; the reference's buffer holds the base's (DPPO's) normalised actions
    ("policies/steering/dsrl.py", "(Q^A's actions)", "ours", "dsrl", "Q^A reads the executed chunk in raw"),
    # V-GPS selects among 16 samples at β = 0; the reference's eval_vgps.sh draws 50 at β = 1
    ("configs/eval.yaml", "samples", "ours", "vgps", "`samples=16`"),
    ("configs/eval.yaml", "temperature", "ours", "vgps", "`temperature=0`"),
    ("policies/steering/vgps.py", "(V-GPS's K)", "ours", "vgps", "`samples=16`"),
    ("policies/steering/vgps.py", "(V-GPS's β)", "ours", "vgps", "`temperature=0`"),
    # EXPO's reward is a −1/0 success cost; the reference learns from the env's own reward
    ("policies/steering/expo.py", "EXPORunConfig.reward", "ours", "expo", "−1/0 success cost"),
    # EXPO's candidates decode drawn noise with DDIM; the reference samples its T = 10 DDPM ancestrally
    ("policies/steering/expo.py", "(EXPO's base sampler)", "ours", "expo", "base's samples come from DDIM"),
    # the networks: Cal-QL's actor clamps log σ to [-20, 2] (DSRL's and EXPO's value; jaxrl_m clips σ to
    # [1e-5, 10]); DDIM keeps ε from before x0's clip (DPPO, DSRL's base, recomputes it)
    ("policies/rl/actor.py", "(Cal-QL's log-std clamp)", "ours", "vgps", "log-std"),
    ("policies/diffusion.py", "(DDIM's ε after clipping)", "ours", "dsrl", "DPPO recomputes ε"),
]


def _first_word(comment: str) -> str:
    m = re.match(r"\s*(\w+)", comment)
    return m.group(1).lower() if m else ""


def _deviation_label(path: str, anchor: str, text: str | None = None) -> str:
    """The label ``anchor`` of ``path`` carries (``text``: the file's text instead of the file's)."""
    if re.fullmatch(r"[A-Z]\w*\.\w+", anchor):  # Class.field: what --help shows (scripts/help.py)
        import importlib

        from robosteer.scripts.help import field_comments

        module = importlib.import_module("robosteer." + path.removesuffix(".py").replace("/", "."))
        cls_name, name = anchor.split(".")
        return _first_word(field_comments(getattr(module, cls_name)).get(name, ""))
    text = (ROOT / path).read_text() if text is None else text
    if anchor.startswith("("):  # a marked comment: "# <label> (<topic>): ..."
        found = re.findall(rf"#\s*(\w+)\s+{re.escape(anchor)}:", text)
        assert len(found) == 1, f"{path}: {len(found)} comments marked {anchor!r} (expected one)"
        return found[0].lower()
    found = re.findall(rf"^{re.escape(anchor)}:[^#\n]*#(.*)$", text, flags=re.M)  # a top-level YAML key
    assert len(found) == 1, f"{path}: {len(found)} keys {anchor!r} (expected one)"
    return _first_word(found[0])


def _differs_section(page: str) -> str:
    text = (ROOT / "docs" / "algorithms" / f"{page}.md").read_text()
    start = text.index("## Where it differs from the reference")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


@pytest.mark.parametrize(("path", "anchor", "label", "page", "phrase"), DEVIATIONS, ids=lambda v: str(v)[:40])
def test_every_known_deviation_is_labelled_ours(
    path: str, anchor: str, label: str, page: str, phrase: str
) -> None:
    """A deviation relabelled "reference" (or its label or marker dropped) fails here."""
    got = _deviation_label(path, anchor)
    assert got == label, (
        f"{path}: {anchor} is labelled {got or 'nothing'!r}, but it differs from the reference"
    )
    section = " ".join(_differs_section(page).split())  # the page's wrapped lines joined
    assert phrase in section, (
        f"docs/algorithms/{page}.md's differs section does not name {anchor} ({phrase!r})"
    )


def test_the_warmup_label_quotes_the_references_in_transitions() -> None:
    """DSRL's reference warm-up is init_rollout_steps vector-env steps of 4 envs' chunks, not 1,501-2,001 env
    steps; the help line says so in the loop's own unit (chunk transitions)."""
    from robosteer.policies.steering.dsrl import DSRLRunConfig
    from robosteer.scripts.help import field_comments

    text = field_comments(DSRLRunConfig)["warmup_chunks"]
    assert text.startswith("ours") and "6,004-8,004 chunk transitions" in text, text


def test_a_relabelled_deviation_is_caught() -> None:
    """The check reads the labels from the source: "reference" in place of "ours" fails it, for a marked comment
    and for a YAML key alike."""
    loop = (ROOT / "policies/steering/loop.py").read_text()
    planted = loop.replace("# ours (time-outs):", "# reference (time-outs):")
    assert _deviation_label("policies/steering/loop.py", "(time-outs)", planted) == "reference"
    planted = loop.replace("# ours (time-outs):", "# (time-outs):")
    with pytest.raises(AssertionError, match="0 comments marked"):
        _deviation_label("policies/steering/loop.py", "(time-outs)", planted)
    yaml_text = (ROOT / "configs/eval.yaml").read_text()
    planted = re.sub(r"^(temperature:[^#]*#\s*)ours", r"\1reference", yaml_text, flags=re.M)
    assert _deviation_label("configs/eval.yaml", "temperature", planted) == "reference"

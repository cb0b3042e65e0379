"""The command line's front door: each robosteer-* command checks its overrides before Hydra runs it.

A mistake on the command line (an unknown key or option, a value of the wrong type, a count below one, a
missing required key) is reported in one line: what is wrong, where, and the nearest valid choice; the
command exits 2. Runtime faults keep exit 1. ``ROBOSTEER_DEBUG=1`` skips these checks and
keeps every traceback. Hydra's own flags (``--cfg job``, ``--help``, ``-m``) pass straight through.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from robosteer.scripts.common import CONFIG_DIR, UsageError, debug, nearest_choice
from robosteer.scripts.schemas import ECHOES, EVAL_SOURCES, RENAMED, TO_ENVIRONMENT, TRAIN_NUMBER_OR_WORD

# Counts that must be at least one (a run that does nothing is a mistake, not a result).
POSITIVE = {
    "episodes",
    "steps",
    "env_steps",
    "num_envs",
    "batch_size",
    "eval_episodes",
    "eval_envs",
    "samples",
    "demo_limit",  # or null: every demo
}
# Keys that take a number >= 0 or one word: {(config, key): word}
NUMBER_OR_WORD = {("train", key): word for key, word in TRAIN_NUMBER_OR_WORD.items()}
# Keys the user writes under another name (deploy's ``policy=`` arrives as ``policy_source=``).
USER_KEYS = {"policy_source": "policy"}
# The config group ``algo`` holds steering and value learners, each command takes only its own kind;
# robosteer-eval's ``policy`` options are evaluation sources, not the architectures of configs/policy/.
GROUP_OPTIONS = {
    ("eval", "policy"): tuple(EVAL_SOURCES),
    ("steer", "algo"): ("dsrl", "expo"),
    ("deploy", "robot"): ("ros2", "sim_twin", "ur"),  # robot=none is steer's simulation-only default
    ("value", "algo"): ("calql", "iql"),
}
# Keys that exist only in a context, composed only there (robot=..., a served base, base=scratch): each config
# file that holds them and the words naming the context, so a key typed outside it says where it belongs.
CONTEXTS = {
    "steer": {
        "steer_robot.yaml": "a run on a robot (robot=sim_twin | ur | ros2)",
        "base_kind/served.yaml": "a served base (base=ws://HOST:PORT)",
        "base_kind/scratch.yaml": "base=scratch",
    }
}
# Config groups chosen inside a context's file, not in the command's own defaults list: {command: {group: pick}}.
NESTED_GROUPS = {"steer": {"learner": "local"}}
# Groups the command chooses itself from another key's value (cli.implied): never typed.
IMPLIED_GROUPS = {"steer": ("base_kind",)}
_ABSENT = object()


class CliError(ValueError):
    """One line for the user: what, where, nearest valid choice."""


def check_overrides(command: str, config_name: str, args: list[str]) -> list[str]:
    """Register the structured configs, then compose ``config_name`` with ``args`` as the command will; on a
    mistake print one line and exit 2. Returns the group picks the command adds (:func:`implied`)."""
    from robosteer.scripts import schemas
    from robosteer.scripts.guards import check_all

    schemas.register(eval_sources=config_name == "eval")
    extra = implied(config_name, args)
    if any(a.startswith("-") for a in args):
        return extra
    try:
        for arg in args:
            if arg.partition("=")[0].lstrip("+~") in IMPLIED_GROUPS.get(config_name, ()):
                raise CliError(
                    f"{arg!r}: this choice follows from base= (ws://HOST:PORT or scratch), not typed"
                )
        full = args + extra
        cfg = _compose(config_name, full) if debug() else problems(config_name, full)
        check_all(config_name, cfg)
    except (CliError, UsageError) as err:
        print(f"{command}: error: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    return extra


# Groups composed by another choice (robot=... brings on_robot, obs=... train_obs): never typed.
DERIVED_GROUPS = ("on_robot", "train_obs", "base_kind")


def _on_robot(args: list[str]) -> bool:
    """``robot=`` names a robot (steer's default, ``none``, is simulation): its nested groups exist."""
    return any(a.partition("=")[0] == "robot" and a.partition("=")[2] != "none" for a in args)


def accepted_groups(config_name: str, args: list[str]) -> dict[str, list[str]]:
    """{group: its options} the command takes in this case (robot=... adds learner=): what --help lists."""
    nested = NESTED_GROUPS.get(config_name, {})
    return {
        g: list(GROUP_OPTIONS.get((config_name, g), _options(g)))
        for g in _defaults(config_name)
        if g not in DERIVED_GROUPS and (g not in nested or _on_robot(args))
    }


def implied(config_name: str, args: list[str]) -> list[str]:
    """The config groups that follow from a value, added to the overrides: robosteer-steer's ``base=ws://...``
    brings a served base's keys (``base_kind=served``), ``base=scratch`` the scratch actor's; any other base
    neither, so a key that only matters elsewhere is not accepted (and not printed)."""
    if config_name != "steer":
        return []
    base = next((a.partition("=")[2] for a in args if a.partition("=")[0] == "base"), "")
    if base.startswith(("ws://", "wss://")):
        return ["base_kind=served"]
    return ["base_kind=scratch"] if base == "scratch" else []


def _library_only(config_name: str, key: str) -> str | None:
    """robosteer-train's keys sized away (scripts/schemas.py): the encoder's without cameras, and the fields the
    command line leaves at the dataclass's value."""
    from robosteer.scripts import schemas

    if config_name != "train":
        return None
    group, _, leaf = key.rpartition(".")
    if group == "policy" and leaf in schemas.ENCODER_KEYS:
        return f"{key}= is a setting of a policy that reads cameras only (obs=pixels | image | state+image)"
    hidden = schemas.POLICY_HIDDEN if group == "policy" else schemas.TRAIN_HIDDEN if not group else ()
    if leaf in hidden:  # (policy.backbone, an echo of backbone=, is refused before this)
        owner = "the policy's config (policies/)" if group == "policy" else "TrainConfig"
        return f"{key}= is not a command-line setting: it stays {owner}'s default (set it from Python)"
    return None


def _context(config_name: str, key: str) -> str | None:
    """The context (robot=..., a served base) whose file holds ``key``'s top-level name, if any."""
    import yaml

    top = key.split(".")[0]
    for name, words in CONTEXTS.get(config_name, {}).items():
        node = yaml.safe_load((Path(CONFIG_DIR) / name).read_text()) or {}
        groups = {
            str(k).lstrip("/").partition("@")[2] or str(k).lstrip("/")
            for e in node.get("defaults", [])
            if isinstance(e, dict)
            for k in e
        }
        if top in set(node) - {"defaults"} | groups:
            return words
    return None


def _defaults(config_name: str) -> dict[str, str]:
    """The config groups ``config_name``'s defaults list chooses from, each with its pick (``algo: dsrl``)."""
    import yaml

    text = (Path(CONFIG_DIR) / f"{config_name}.yaml").read_text()
    entries = yaml.safe_load(text).get("defaults") or []
    picks = {
        str(k).removeprefix("optional ").lstrip("/").partition("@")[0]: str(v)
        for e in entries
        if isinstance(e, dict)
        for k, v in e.items()
    }
    groups = {p.name for p in Path(CONFIG_DIR).iterdir() if p.is_dir()}
    return {k: v for k, v in picks.items() if k in groups} | NESTED_GROUPS.get(config_name, {})


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (Path(CONFIG_DIR) / group).glob("*.yaml"))


def _compose(config_name: str, overrides: list[str]) -> DictConfig:
    from hydra import compose, initialize_config_dir

    from robosteer.scripts import schemas

    schemas.register(eval_sources=config_name == "eval")
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose(config_name=config_name, overrides=overrides)


def _first_line(err: BaseException) -> str:
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    return lines[0] if lines else type(err).__name__


def problems(config_name: str, args: list[str], require: bool = True) -> DictConfig:
    """Raise :class:`CliError` for the first mistake in ``args`` (``key=value`` overrides of ``config_name``);
    return the composed config."""
    defaults, group_args, plain = _defaults(config_name), [], []
    for arg in args:
        key, eq, value = arg.partition("=")
        if not eq:
            raise CliError(f"{arg!r} is not an override: expected key=value, e.g. episodes=10")
        (group_args if key in defaults else plain).append((arg, key, value))
        if (new := RENAMED.get(config_name, {}).get(key.lstrip("+"))) is not None:
            raise CliError(f"{key}= is now {new}= (one name per setting): use {new}={value}")
        if (group := ECHOES.get(config_name, {}).get(key)) is not None:
            raise CliError(f"{key}= records the choice {group}=: choose it with {group}={value}")
        if (var := TO_ENVIRONMENT.get(config_name, {}).get(key.lstrip("+"))) is not None:
            raise CliError(
                f"{key}= is W&B's own {var} (one name per setting): run {var}={value} robosteer-..."
            )
    for _, key, value in group_args:  # a config group choice: policy=flow, algo=expo, robot=ur, ...
        options = list(GROUP_OPTIONS.get((config_name, key), _options(key)))
        if key in NESTED_GROUPS.get(config_name, {}) and not _on_robot([a for a, _, _ in group_args]):
            raise CliError(f"{key}= is a setting of {_context(config_name, key)} only")
        if value not in options:
            raise CliError(
                f"{key}={value} is not known: expected one of {options}{nearest_choice(value, options)}"
            )
    try:
        base = _compose(config_name, [a for a, _, _ in group_args])
    except Exception as err:
        raise CliError(_first_line(err)) from err
    checked = [(key, raw) for _, key, raw in plain if not key.startswith(("hydra.", "+", "~"))]
    for key, _ in checked:
        try:
            _check_key(base, key)
        except CliError:
            if (context := _context(config_name, key)) is not None:
                raise CliError(f"{key}= is a setting of {context} only") from None
            if (why := _library_only(config_name, key)) is not None:
                raise CliError(why) from None
            owner = _owning_option(config_name, defaults, group_args, key)
            if owner is None:
                raise
            raise CliError(f"unknown key {key!r} here: it is a setting of {owner}") from None
    try:
        cfg = _compose(config_name, args)
    except Exception as err:  # a typed (structured) key refused the value: name the key and the type
        import yaml

        for key, raw in checked:
            default = OmegaConf.select(base, key, throw_on_missing=False)
            _check_value(key, raw, default, yaml.safe_load(raw) if raw else None, config_name)
        raise CliError(_first_line(err)) from err
    for key, raw in checked:
        default = OmegaConf.select(base, key, throw_on_missing=False)
        _check_value(key, raw, default, OmegaConf.select(cfg, key), config_name)
    check_choices(config_name, cfg)
    missing = [k for k in OmegaConf.missing_keys(cfg) if not k.startswith("safety.")]
    if missing and require:
        k = USER_KEYS.get(missing[0], missing[0])
        raise CliError(f"missing required key: {k}=<...> (robosteer's {config_name} config has no default)")
    return cfg


def _owning_option(
    config_name: str, defaults: dict[str, str], group_args: list[tuple[str, str, str]], key: str
) -> str | None:
    """The other choice of a config group that has ``key`` (``critic_obs`` under ``algo=expo`` belongs to
    ``algo=dsrl``), so an option of another algorithm, policy or robot is named as such, not as a typo."""
    chosen = {k: v for _, k, v in group_args}
    top = re.compile(rf"\b{re.escape(key.split('.')[0])}\b")  # a typo names no option's key: no compose
    for group in sorted(defaults):
        for option in GROUP_OPTIONS.get((config_name, group), _options(group)):
            path = Path(CONFIG_DIR) / group / f"{option}.yaml"  # none for a schema's option (eval's sources)
            if chosen.get(group) == option or (path.exists() and not top.search(path.read_text())):
                continue
            overrides = [f"{k}={v}" for k, v in chosen.items() if k != group] + [f"{group}={option}"]
            try:
                cfg = _compose(config_name, overrides)
            except Exception:  # an option that needs other choices is simply not the owner
                continue
            if OmegaConf.select(cfg, key, default=_ABSENT, throw_on_missing=False) is not _ABSENT:
                here = f"{group}={chosen.get(group, defaults[group])}"
                return f"{group}={option}, not of {here}"
    return None


def _check_key(base: DictConfig, key: str) -> None:
    """An unknown key names its nearest sibling."""
    parent_key, _, leaf = key.rpartition(".")
    parent = base if not parent_key else OmegaConf.select(base, parent_key, default=_ABSENT)
    if parent is _ABSENT or not OmegaConf.is_dict(parent):
        top = parent_key.split(".")[0] if parent_key else key
        raise CliError(f"unknown key {key!r}{nearest_choice(top, [str(k) for k in base])}")
    if leaf not in parent.keys():  # noqa: SIM118 -- `in` skips keys whose value is ??? (missing)
        siblings = [
            USER_KEYS.get(k, k)
            for k in (f"{parent_key}.{k}" if parent_key else str(k) for k in parent.keys())  # noqa: SIM118
        ]
        user = USER_KEYS.get(key, key)
        raise CliError(f"unknown key {user!r}{nearest_choice(user, siblings)}")


def check_choices(config_name: str, cfg: DictConfig) -> None:
    """Keys that take one of a set hold one of it: the same sets ``--help`` lists (help.choices), checked
    here once instead of in each command's body. ``device=`` is left to guards (it also takes cuda:N)."""
    from robosteer.scripts.help import choices

    for key, allowed in choices(config_name, cfg).items():
        value = OmegaConf.select(cfg, key, throw_on_missing=False)
        if key == "device" or value is None or str(value) in allowed:
            continue
        raise CliError(
            f"{key}={value!r} is not known: expected one of {list(allowed)}{nearest_choice(str(value), list(allowed))}"
        )


def _check_value(key: str, raw: str, default: Any, value: Any, config_name: str = "") -> None:
    """The override's type is the default's; counts are at least one; a number-or-word key holds one."""
    if (word := NUMBER_OR_WORD.get((config_name, key))) is not None:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if value != word and not (number and math.isfinite(value) and value >= 0):
            raise CliError(f"{key}={raw}: expected a number >= 0 or {word} (default {default})")
        return
    if value is None:  # null: the setting's "off" / "automatic" (grad_clip_norm=null, max_minutes=null)
        ok, want = True, ""
    elif isinstance(default, bool):
        ok, want = isinstance(value, bool), "true or false"
    elif isinstance(default, int):
        ok, want = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif isinstance(default, float):
        ok, want = isinstance(value, int | float) and not isinstance(value, bool), "a number"
    else:
        ok, want = True, ""
    if not ok:
        raise CliError(f"{USER_KEYS.get(key, key)}={raw}: expected {want} (default {default})")
    count = isinstance(value, int) and not isinstance(value, bool)
    if key.rpartition(".")[2] in POSITIVE and count and value < 1:
        raise CliError(f"{key}={value}: expected an integer >= 1")

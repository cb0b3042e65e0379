"""``robosteer-<command> --help``: the groups the command accepts and, per key of the case at hand, its default,
its allowed values and what it does.

One source for each: a key's help is its comment where its default is written (the dataclass field's, or the
YAML key's for a command's own keys), read by :func:`comments`; allowed values are the validators' own
constants (:func:`choices`); the keys are the composed config's, so ``algo=expo --help`` shows EXPO's and
``robot=sim_twin --help`` adds the robot's.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import tokenize
from functools import cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from robosteer.scripts.common import CONFIG_DIR

_KEY = re.compile(r"^(\s*)([A-Za-z_][\w+.-]*):(.*)$")


def _yaml_comment(rest: str) -> str:
    """The ``# comment`` after a YAML value (a ``#`` inside quotes is the value's)."""
    quote = None
    for i, ch in enumerate(rest):
        if ch in "'\"":
            quote = None if quote == ch else quote or ch
        elif ch == "#" and quote is None and (i == 0 or rest[i - 1].isspace()):
            return rest[i + 1 :].strip()
    return ""


def _package(path: Path, text: str) -> str:
    """Where a config file's keys land: its ``# @package``, else its group's name (root files: the root)."""
    if m := re.search(r"^# @package (\S+)", text, re.M):
        return "" if m.group(1) == "_global_" else m.group(1)
    rel = path.relative_to(CONFIG_DIR)
    return "" if len(rel.parts) == 1 else rel.parts[0]


def composed_files(config_name: str, args: list[str]) -> tuple[Path, ...]:
    """The config files this case composes, the command's own first (presets restate values: not help)."""
    from robosteer.scripts import cli

    root = Path(CONFIG_DIR)
    picks = {**cli._defaults(config_name), **dict(a.split("=", 1) for a in args if "=" in a)}
    files = [root / f"{config_name}.yaml"]
    for group, option in picks.items():
        path = root / group / f"{option}.yaml"
        if group != "preset" and path.exists():
            files.append(path)
    derived = {"steer_robot.yaml": picks.get("robot", "none") != "none"}
    derived["encoder.yaml"] = config_name == "train" and picks.get("obs", "state") != "state"
    files += [root / name for name, used in derived.items() if used]
    if config_name == "train" and (root / "train_obs" / f"{picks.get('obs', 'state')}.yaml").exists():
        files.append(root / "train_obs" / f"{picks.get('obs', 'state')}.yaml")
    return tuple(files)


@cache
def yaml_comments(files: tuple[Path, ...]) -> dict[str, str]:
    """{dotted key: its comment, continuation lines joined} over ``files`` (the first file's comment wins)."""
    out: dict[str, str] = {}
    for path in files:
        text = path.read_text()
        prefix = _package(path, text)
        stack: list[tuple[int, str]] = []
        last: str | None = None
        for line in text.splitlines():
            if (m := _KEY.match(line)) is None or m.group(2) in ("defaults", "hydra"):
                cont = re.match(r"^\s*#\s{2,}(.*)$", line)
                if cont and last is not None:
                    out[last] = f"{out[last]} {cont.group(1).strip()}".strip()
                else:
                    last = None
                if m is not None:
                    stack = [(len(m.group(1)), "\0")]  # defaults/hydra: nothing below is a key
                continue
            indent, name, rest = len(m.group(1)), m.group(2), m.group(3)
            stack = [(i, k) for i, k in stack if i < indent]
            if any(k == "\0" for _, k in stack):
                continue
            key = ".".join([p for p in (prefix, *[k for _, k in stack], name) if p])
            stack.append((indent, name))
            if comment := _yaml_comment(rest):
                out.setdefault(key, comment)
                last = key
            else:
                last = None
    return out


@cache
def field_comments(cls: type) -> dict[str, str]:
    """{field: help} of a dataclass and its bases: the comment on the field's line, else the comment block
    right above it."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        source = inspect.getsource(klass)
        lines = source.splitlines()
        trailing = {
            tok.start[0]: tok.string.lstrip("#").strip()
            for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT
        }
        for node in ast.parse(source).body[0].body:
            if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
                continue
            on_line = [trailing[n] for n in range(node.lineno, node.end_lineno + 1) if n in trailing]
            above, n = [], node.lineno - 1
            while n >= 1 and lines[n - 1].strip().startswith("#"):
                above.insert(0, lines[n - 1].strip().lstrip("#").strip())
                n -= 1
            text = " ".join(on_line) if on_line else " ".join(above)
            if text:
                out[node.target.id] = text
    return out


def _classes(command: str, cfg: DictConfig) -> dict[str, tuple[type, dict[str, str]]]:
    """{key prefix: (dataclass, {key: field})} for the nodes a dataclass holds the defaults of."""
    from robosteer.real.learner import LearnerConfig
    from robosteer.real.safety import SafetyConfig
    from robosteer.scripts import schemas
    from robosteer.sim.randomization import RandomizationConfig

    found: dict[str, tuple[type, dict[str, str]]] = {
        "safety.": (SafetyConfig, {}),
        "randomization.": (RandomizationConfig, {}),
        "learner.": (LearnerConfig, {}),
    }
    if command == "steer":
        from robosteer.policies.steering.dsrl import DSRLConfig, DSRLRunConfig
        from robosteer.policies.steering.expo import EXPOConfig, EXPORunConfig

        dsrl = "dsrl" in cfg
        found["dsrl." if dsrl else "expo."] = (DSRLConfig if dsrl else EXPOConfig, {})
        found["run."] = found[""] = (DSRLRunConfig if dsrl else EXPORunConfig, {})  # env_steps, seed, device
        from robosteer.real.steering import ArmEvalConfig

        found["arm_eval."] = (ArmEvalConfig, {})
    elif command == "train":
        from robosteer.policies.registry import get_policy_class
        from robosteer.policies.train import TrainConfig

        found["policy."] = (get_policy_class(str(cfg.policy.name)).config_class, {})
        grouped = {f"{g}.{k}": n for g, keys in schemas.TRAIN_GROUPS.items() for k, n in keys.items()}
        found[""] = (TrainConfig, grouped)
    elif command == "value":
        from robosteer.policies.value.calql import CalQLConfig
        from robosteer.policies.value.iql import IQLConfig

        for name, cls in (("calql", CalQLConfig), ("iql", IQLConfig)):
            found[f"{name}."] = (cls, {})
    return found


def key_help(command: str, cfg: DictConfig, key: str, files: tuple[Path, ...]) -> str:
    """What ``key`` does: the YAML comment where the command writes it, else its dataclass field's comment."""
    from robosteer.scripts.schemas import ECHOES

    if (group := ECHOES.get(command, {}).get(key)) is not None:
        return f"the {group}= choice, recorded with the run (choose it with {group}=)"
    if text := yaml_comments(files).get(key):
        return text
    for prefix, (cls, renamed) in sorted(_classes(command, cfg).items(), key=lambda p: -len(p[0])):
        if key.startswith(prefix):
            name = renamed.get(key, key[len(prefix) :])
            if "." not in name and (text := field_comments(cls).get(name)):
                return text
    return ""


def choices(command: str, cfg: DictConfig) -> dict[str, tuple[str, ...]]:
    """{key: allowed values} for the keys that take one of a set: each the constant its validator checks."""
    from robosteer.policies.run_log import LOGGERS
    from robosteer.scripts.guards import DEVICES, SIMS

    out: dict[str, tuple[str, ...]] = {"device": DEVICES, "logger": LOGGERS, "run.logger": LOGGERS}
    out["sim"] = SIMS  # collect refuses all but metaworld in guards.check_sim, saying why
    if command == "steer":
        from robosteer.policies.rl.offline import REWARDS
        from robosteer.policies.steering import dsrl, expo
        from robosteer.scripts import steer, steer_robot

        out |= {"run.reward": REWARDS, "variant": dsrl.VARIANTS, "dsrl.backup": dsrl.BACKUPS}
        out |= {"critic_obs": steer.CRITIC_OBS, "actor_obs": steer.ACTOR_OBS}
        out |= {"robot_reward": steer_robot.ROBOT_REWARDS, "resets": steer_robot.RESETS}
        out |= {"teleop": steer_robot.TELEOPS, "operator": steer_robot.OPERATORS}
        out |= {"expo.policy": expo.POLICIES, "expo.action": expo.ACTIONS}
        out |= {"expo.backup_base": expo.BACKUP_BASES, "expo.bc_online": expo.BC_ONLINE}
    if command == "train":
        from robosteer.policies import diffusion, flow, streaming
        from robosteer.policies.encoders import RGB_ARCHS
        from robosteer.policies.optim import LR_SCHEDULERS
        from robosteer.policies.train.trainer import PRECISIONS

        out |= {"lr_scheduler": LR_SCHEDULERS, "precision": PRECISIONS, "policy.rgb_arch": RGB_ARCHS}
        out |= {"policy.prediction_type": diffusion.PREDICTION_TYPES}
        out |= {"policy.time_sampling": flow.TIME_SAMPLINGS}
        out |= {"policy.buffer_init": streaming.BUFFER_INITS, "policy.sample_levels": streaming.SAMPLE_LEVELS}
        name = str(cfg.policy.name)
        out["policy.scheduler"] = ("ddim",) if name == "streaming" else diffusion.SCHEDULERS
    leaves = set(leaf_keys(cfg))
    return {k: v for k, v in out.items() if k in leaves}


def leaf_keys(cfg: DictConfig) -> dict[str, Any]:
    """{dotted key: value} of every leaf (a list is one leaf), interpolations unresolved."""

    def walk(node: Any, prefix: str) -> dict[str, Any]:
        if isinstance(node, dict):
            return {k: v for key, sub in node.items() for k, v in walk(sub, f"{prefix}{key}.").items()}
        return {prefix[:-1]: node}

    return walk(OmegaConf.to_container(cfg, resolve=False), "")


def shown(value: Any) -> str:
    """A value as the command line writes it: null, true, [1, 2], text."""
    if isinstance(value, list):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    if value is None or isinstance(value, bool):
        return str(value).lower() if value is not None else "null"
    return str(value)


def _intro(config_name: str) -> list[str]:
    """The config file's header comment: what the command does and its example lines."""
    lines = (Path(CONFIG_DIR) / f"{config_name}.yaml").read_text().splitlines()
    return [ln[2:] for ln in lines[: next(i for i, ln in enumerate(lines) if not ln.startswith("#"))]]


def render(command: str, config_name: str, args: list[str]) -> str:
    """The help screen of ``command`` for the case ``args`` describe (groups chosen, base= given)."""
    from robosteer.scripts import cli

    given = [a for a in args if "=" in a]
    cfg = cli.problems(config_name, given + cli.implied(config_name, given), require=False)
    groups = cli.accepted_groups(config_name, args)
    allowed = choices(config_name, cfg)
    out = [*_intro(config_name), "", f"usage: {command} [GROUP=OPTION ...] [KEY=VALUE ...]", "", "groups:"]
    out += [f"  {g}=" + " | ".join(opts) for g, opts in groups.items()]
    out += ["", "keys (default, allowed values, what it does):"]
    files = composed_files(config_name, given + cli.implied(config_name, given))
    for key, value in leaf_keys(cfg).items():
        pick = f" [{' | '.join(allowed[key])}]" if key in allowed else ""
        out.append(f"  {key}={shown(value)}{pick}  {key_help(config_name, cfg, key, files)}")
    out += ["", f"{command} --cfg job prints the composed config; docs/ has each job's guide."]
    return "\n".join(out)

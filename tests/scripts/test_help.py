"""``--help`` that helps: every command lists only the groups it accepts and, for each key of the case asked
about, its default, its allowed values (the validator's own set) and what it does (more than its name)."""

from __future__ import annotations

import re
import sys

import clirun
import pytest

from robosteer.scripts.cli import accepted_groups
from robosteer.scripts.help import choices, render

CASES = [
    ("steer", []),
    ("steer", ["algo=expo"]),
    ("steer", ["robot=sim_twin"]),
    ("steer", ["base=ws://127.0.0.1:8000"]),
    ("steer", ["base=scratch", "variant=sac"]),
    ("train", []),
    ("train", ["obs=pixels"]),
    ("train", ["policy=flow", "backbone=unet"]),
    ("train", ["policy=streaming"]),
    ("value", []),
    ("collect", []),
    ("eval", []),
    ("deploy", []),
    ("serve", []),
]
LINE = re.compile(
    r"^  (?P<key>[A-Za-z_][\w.+-]*)=(?P<default>\S*)(?: \[(?P<choices>[^]]+)\])?  (?P<help>.*)$"
)


def _keys(text: str) -> dict[str, re.Match]:
    body = text.split("keys (default, allowed values, what it does):\n", 1)[1]
    return {m["key"]: m for line in body.splitlines() if (m := LINE.match(line))}


@pytest.mark.parametrize(("command", "args"), CASES, ids=[" ".join([c, *a]) for c, a in CASES])
def test_every_printed_key_has_a_default_and_help_beyond_its_name(command: str, args: list[str]) -> None:
    text = render(f"robosteer-{command}", command, args)
    keys = _keys(text)
    assert len(keys) >= 5
    for key, m in keys.items():
        words = m["help"].strip()
        assert words and words.lower() != key.rsplit(".", 1)[-1].lower() and len(words) > 8, (key, words)
    section = text.split("groups:\n", 1)[1].split("keys (", 1)[0]
    groups = [g for g in section.splitlines() if g.strip()]
    listed = {g.strip().split("=", 1)[0]: g.split("=", 1)[1].split(" | ") for g in groups}
    assert listed == accepted_groups(command, args)


def test_steer_lists_only_its_own_groups_and_learner_only_on_a_robot() -> None:
    sim = accepted_groups("steer", [])
    assert (
        sim["algo"] == ["dsrl", "expo"] and "policy" not in sim and "obs" not in sim and "learner" not in sim
    )
    assert accepted_groups("steer", ["robot=sim_twin"])["learner"] == ["local", "ray"]
    assert accepted_groups("value", [])["algo"] == ["calql", "iql"]


CHOICE_CHECKS = {  # key -> builds the validated object from a value (raises on one outside the set)
    "variant": lambda v: _dsrl(variant=v),
    "dsrl.backup": lambda v: _dsrl(backup=v),
    "run.reward": lambda v: _dsrl_run(reward=v),
    "run.logger": lambda v: _dsrl_run(logger=v),
    "policy.scheduler": lambda v: _policy("diffusion", scheduler=v),
    "policy.prediction_type": lambda v: _policy("diffusion", prediction_type=v),
    "policy.rgb_arch": lambda v: _policy("diffusion", rgb_arch=v),
    "lr_scheduler": lambda v: _lr(v),
    "precision": lambda v: _train(precision=v),
    "logger": lambda v: _train(logger=v),
}


def _dsrl(**kw):
    from robosteer.policies.steering.dsrl import DSRLConfig

    return DSRLConfig(**kw)


def _dsrl_run(**kw):
    from robosteer.policies.steering.dsrl import DSRLRunConfig

    return DSRLRunConfig(**kw)


def _policy(name: str, **kw):
    from robosteer.policies.registry import get_policy_class

    cfg = get_policy_class(name).config_class(**kw)
    cfg.validate()
    return cfg


def _lr(name: str):
    from robosteer.policies.optim import lr_lambda

    return lr_lambda(name, 10, 100)(5)


def _train(**kw):
    from robosteer.policies.train import TrainConfig

    return TrainConfig(**kw)


@pytest.mark.parametrize(("command", "args"), [("steer", []), ("train", ["obs=pixels"])])
def test_choice_keys_list_exactly_the_validators_set(command: str, args: list[str]) -> None:
    """Each listed value is accepted by the key's validator and a value outside the list is refused."""
    from robosteer.scripts.cli import problems

    cfg = problems(command, args, require=False)
    listed = choices(command, cfg)
    checked = [k for k in CHOICE_CHECKS if k in listed]
    assert len(checked) >= 4
    for key in checked:
        for value in listed[key]:
            CHOICE_CHECKS[key](value)
        with pytest.raises(ValueError):
            CHOICE_CHECKS[key]("not-a-choice")
    text = _keys(render(f"robosteer-{command}", command, args))
    for key, values in listed.items():
        assert text[key]["choices"].split(" | ") == list(values), key


def test_help_is_the_commands_own_screen_and_exits_0() -> None:
    p = clirun.run(
        [sys.executable, "-m", "robosteer.scripts.steer", "algo=expo", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert (
        "expo.num_samples=4  ours (CPU): reference 8" in p.stdout
        and "dsrl.gamma" not in p.stdout
        and "groups:" in p.stdout
    )

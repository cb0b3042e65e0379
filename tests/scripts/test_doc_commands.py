"""Every command the README and docs/ show resolves its config exactly as written (nothing is run).

Each ``robosteer-<cmd> key=value ...`` line of a fenced bash block is passed through the command's own argv
handling and composed by Hydra the way the command composes it (``--cfg job``), interpolations resolved, so a
documented key that the config does not accept ("not in struct") fails here instead of on a user's robot.
Placeholders in the docs are made concrete: ``a|b`` alternatives are each tried, ``...`` is dropped and
``$VAR`` stands for any value.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from robosteer.scripts.cli import implied
from robosteer.scripts.common import CONFIG_DIR
from robosteer.scripts.dataset import peel_command
from robosteer.scripts.deploy import cli_overrides

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# command -> (config name, its argv handling before Hydra sees the overrides)
COMMANDS = {
    "robosteer-collect": ("collect", list),
    "robosteer-dataset": ("dataset", lambda a: peel_command(["robosteer-dataset", *a])[1:]),
    "robosteer-eval": ("eval", list),
    "robosteer-train": ("train", list),
    "robosteer-steer": ("steer", list),
    "robosteer-value": ("value", list),
    "robosteer-serve": ("serve", list),
    "robosteer-deploy": ("deploy", cli_overrides),
}


def doc_commands() -> list[tuple[str, str, list[str]]]:
    """(where, command, arguments) of every documented command line, continuations joined."""
    found = []
    for doc in DOCS:
        lines, fence, i = doc.read_text().splitlines(), None, 0
        while i < len(lines):
            line, start = lines[i], i + 1
            if line.lstrip().startswith("```"):
                fence = None if fence is not None else line.strip().strip("`")
            elif fence == "bash":
                while line.rstrip().endswith("\\") and i + 1 < len(lines):
                    i += 1
                    line = line.rstrip()[:-1] + " " + lines[i].strip()
                words = shlex.split(line, comments=True)
                if words and words[0] in COMMANDS:
                    args = [w for w in words[1:] if w not in ("...", "&")]
                    found += [(f"{doc.relative_to(ROOT)}:{start}", words[0], a) for a in _alternatives(args)]
            i += 1
    return found


def _alternatives(args: list[str]) -> list[list[str]]:
    """``algo=dsrl|expo`` -> one argument list per alternative; placeholders made concrete."""
    out: list[list[str]] = [[]]
    for arg in args:
        arg = re.sub(r"\$\w+", "x", arg).replace(",...]", "]")
        key, _, value = arg.partition("=")
        options = value.split("|") if "|" in value and "://" not in value else [value]
        out = [[*prefix, f"{key}={v}" if _ else key] for prefix in out for v in options]
    return out


COMMAND_LINES = doc_commands()


def test_the_docs_show_every_command() -> None:
    """The scan finds the documented commands (a format change must not make this test vacuous)."""
    assert {c for _, c, _ in COMMAND_LINES} == set(COMMANDS)
    assert len(COMMAND_LINES) >= 40


@pytest.mark.parametrize(("where", "command", "args"), COMMAND_LINES, ids=[w for w, _, _ in COMMAND_LINES])
def test_documented_command_resolves_as_written(where: str, command: str, args: list[str]) -> None:
    name, argv = COMMANDS[command]
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        given = argv(args)
        cfg = compose(config_name=name, overrides=implied(name, given) + given)  # as the command adds them
    OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)  # interpolations resolve too

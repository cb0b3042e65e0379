"""The CLI reference page (docs/cli.md) and the algorithm pages' hyperparameter tables, generated from the
commands' own ``--help`` (scripts/help.py: the config dataclasses' field comments, the YAML comments, the
validators' choices), so the docs cannot drift from the code.

Both are committed: ``python tests/docs/cli_reference.py --write`` (``make docs``) regenerates them and
tests/docs/test_cli_reference.py fails when the committed text differs. A hyperparameter table sits between
``<!-- hyperparameters: COMMAND [ARG ...] PREFIX[,PREFIX] -->`` and ``<!-- /hyperparameters -->``.
"""

from __future__ import annotations

import argparse
import re
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI_PAGE = ROOT / "docs" / "cli.md"
# (console script, config name, the case's arguments): one help screen each, in the page's order
CASES: list[tuple[str, str, list[str]]] = [
    ("robosteer-collect", "collect", []),
    ("robosteer-dataset", "dataset", []),
    ("robosteer-train", "train", []),
    ("robosteer-eval", "eval", []),
    ("robosteer-steer", "steer", []),
    ("robosteer-steer", "steer", ["algo=expo"]),
    ("robosteer-steer", "steer", ["robot=sim_twin"]),
    ("robosteer-value", "value", []),
    ("robosteer-serve", "serve", []),
    ("robosteer-deploy", "deploy", []),
]
FENCE = re.compile(r"<!-- hyperparameters: (?P<args>.+?) -->")
END = "<!-- /hyperparameters -->"


@cache
def cli_page() -> str:
    """docs/cli.md: every command's help screen for the cases in ``CASES`` (composed once per process)."""
    from robosteer.scripts.help import render

    out = [
        "# CLI reference",
        "",
        "Generated from the commands' own `--help` (each key's default, allowed values and the comment where its",
        "default is written) by `python tests/docs/cli_reference.py --write`; a test fails when this page is stale.",
        "Any command prints the screen for your case: `robosteer-steer algo=expo --help`;",
        "`--cfg job` prints every value in force.",
    ]
    for command, name, args in CASES:
        title = " ".join([command, *args])
        out += ["", f"## `{title}`", "", "```text", render(command, name, args), "```"]
    return "\n".join(out) + "\n"


def hyperparameters(config_name: str, args: list[str], prefixes: tuple[str, ...]) -> str:
    """A markdown table of the keys under ``prefixes``: default, reference/ours label, what it does."""
    from robosteer.scripts import cli
    from robosteer.scripts.help import composed_files, key_help, leaf_keys, shown

    given = [a for a in args if "=" in a]
    cfg = cli.problems(config_name, given + cli.implied(config_name, given), require=False)
    files = composed_files(config_name, given + cli.implied(config_name, given))
    rows = ["| key | default | label | what it does |", "|---|---|---|---|"]
    for key, value in leaf_keys(cfg).items():
        if not key.startswith(prefixes):
            continue
        text = key_help(config_name, cfg, key, files)
        label = next((w for w in ("reference", "ours") if text.lower().startswith(w)), "")
        cell = text.replace("|", "\\|")
        rows.append(f"| `{key}` | `{shown(value)}` | {label} | {cell} |")
    return "\n".join(rows)


def redraw(text: str) -> str:
    """``text`` with every hyperparameter block regenerated."""
    lines, out, i = text.split("\n"), [], 0
    while i < len(lines):
        out.append(lines[i])
        m = FENCE.fullmatch(lines[i].strip())
        if m:
            config_name, *rest = m["args"].split()
            end = lines.index(END, i)
            out += [hyperparameters(config_name, rest[:-1], tuple(rest[-1].split(","))), ""]
            i = end
            continue
        i += 1
    return "\n".join(out)


def pages() -> dict[Path, str]:
    """{page: its text as generated} for the CLI page and every docs page holding a hyperparameter block."""
    want = {CLI_PAGE: cli_page()}
    for page in sorted((ROOT / "docs").rglob("*.md")):
        if page != CLI_PAGE and FENCE.search(text := page.read_text()):
            want[page] = redraw(text)
    return want


def main(argv: list[str] | None = None) -> int:
    """Print the stale pages (exit 1), or with ``--write`` rewrite them."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the stale pages")
    args = parser.parse_args(argv)
    stale = [p for p, text in pages().items() if not p.is_file() or p.read_text() != text]
    for page, text in pages().items() if args.write else ():
        page.write_text(text)
    for page in stale:
        print(f"{page.relative_to(ROOT)}: {'rewritten' if args.write else 'stale'}", file=sys.stderr)
    return 0 if args.write or not stale else 1


if __name__ == "__main__":
    raise SystemExit(main())

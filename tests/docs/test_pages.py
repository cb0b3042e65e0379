"""The README and the guides read as a front page and a manual: the README stays short, and outside
docs/experiments/ and docs/results/ no page carries a run's provenance (commit hashes, load averages) or the
project's bookkeeping (issue numbers, "Done-when"); no tracked text file cites a repository file that is not
there."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README_MAX_LINES = 300
BOOKKEEPING = re.compile(r"load average|done[- ]when|\bissues? #?\d+|(?<![\w&])#\d+\b", re.IGNORECASE)
HEX = re.compile(r"(?<![\w.-])[0-9a-f]{4,40}(?![\w-])")
# Cited paths that are not files of this repository on purpose, each with its reason.
NOT_OURS = {
    "configs/expo_config.py": "Servo97/EXPO's config file, cited as the reference",
    "experiments/configs/train_config.py": "nakamotoo/V-GPS's config file, cited as the reference",
    "robosteer/sim": "the installed package's layout (setup.py maps sim/ there)",
    "robosteer/configs": "the installed package's layout",
    "benchmarks/x.py": "a test's planted script name",
    "FILE.md": "a placeholder in a usage line",
}
# Pages another process writes: docs/probes.md is written by `make probes` (it records the commit it ran at).
OWNED_ELSEWHERE = {"docs/probes.md"}


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / p for p in out.split()]


def guides() -> list[Path]:
    """README.md and every docs page outside docs/experiments/ and docs/results/."""
    skip = (ROOT / "docs" / "experiments", ROOT / "docs" / "results")
    pages = [p for p in sorted((ROOT / "docs").rglob("*.md")) if not p.is_relative_to(skip[0])]
    pages = [
        p for p in pages if not p.is_relative_to(skip[1]) and str(p.relative_to(ROOT)) not in OWNED_ELSEWHERE
    ]
    return [ROOT / "README.md", *pages]


def test_readme_is_short() -> None:
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md is {n} lines (at most {README_MAX_LINES}): move text to docs/"


@pytest.mark.parametrize("page", guides(), ids=lambda p: str(p.relative_to(ROOT)))
def test_guides_carry_no_bookkeeping(page: Path) -> None:
    hits = [m.group(0) for m in BOOKKEEPING.finditer(page.read_text())]
    assert not hits, f"{page.relative_to(ROOT)}: {hits} (provenance and bookkeeping go to docs/experiments/)"


def commits(tokens: set[str]) -> set[str]:
    """The tokens ``git cat-file -e TOKEN^{commit}`` accepts: a commit of this repository, even abbreviated."""
    ask = "".join(f"{t}^{{commit}}\n" for t in sorted(tokens))
    out = subprocess.run(
        ["git", "cat-file", "--batch-check=%(objectname)"],
        cwd=ROOT,
        input=ask,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    return {t for t, line in zip(sorted(tokens), out) if not line.endswith(("missing", "ambiguous"))}


def test_guides_name_no_commit() -> None:
    found = {str(p.relative_to(ROOT)): commits(set(HEX.findall(p.read_text()))) for p in guides()}
    assert not {p: c for p, c in found.items() if c}, found


def test_the_commit_check_sees_a_commit() -> None:
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    assert commits({head[:7], "zz"}) == {head[:7]}


def cited(text: str, tops: list[str]) -> set[str]:
    """Repository paths ``text`` cites: ``DIR/...`` under a top-level folder, and root files like ``NAME.md``."""
    folders = "|".join(map(re.escape, tops))
    under = re.compile(rf"(?<![\w./@-])((?:{folders})/[\w./-]*\w)")
    root = re.compile(r"(?<![\w./-])([A-Z][A-Z_]+\.md)\b")
    paths = {m.rstrip(".") for m in under.findall(text) if "..." not in m}
    paths = {p for p in paths if not any(part.isupper() for part in Path(p).stem.split("_"))}  # NAME, FILE
    return paths | set(root.findall(text))


def test_no_text_file_cites_a_missing_repository_file() -> None:
    files = tracked()
    tops = sorted({p.relative_to(ROOT).parts[0] for p in files if len(p.relative_to(ROOT).parts) > 1})
    missing = {}
    for path in files:
        if path.suffix in {".jsonl", ".json", ".png", ".hdf5", ".mp4", ".parquet"} or path == Path(__file__):
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        gone = {c for c in cited(text, tops) if c not in NOT_OURS and not (ROOT / c).exists()}
        home = ROOT / "docs" if path.name == "mkdocs.yml" else path.parent  # the nav names pages under docs/
        gone = {c for c in gone if not (home / c).exists()}  # a sibling named relative to its folder
        gone = {c for c in gone if not any(ROOT.glob(c + "*"))}  # an f-string's prefix: tests/fixtures/runs_
        if gone:
            missing[str(path.relative_to(ROOT))] = sorted(gone)
    assert not missing, missing


def test_the_citation_scan_sees_a_missing_file() -> None:
    tops = ["docs", "scripts"]
    assert cited("see DESIGN.md and docs/nowhere.md, scripts/cli.py", tops) == {
        "DESIGN.md",
        "docs/nowhere.md",
        "scripts/cli.py",
    }

"""One import name: the code imports ``robosteer.policies`` (never a bare ``policies``), so no module, and no
class, is ever loaded twice under two names. The installed side (``import policies`` fails outside the
checkout) is checked by the slow ``tests/test_packaging.py``."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = {"policies", "sim", "real", "scripts"}
CODE = ("robosteer", "policies", "sim", "real", "scripts", "tests", "benchmarks")


def _bare_imports(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of each ``import policies[.x]`` / ``from sim[.x] import ...`` (absolute imports only)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] in TOP]
        elif (
            isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] in TOP
        ):
            found.append((node.lineno, node.module))
    return found


def test_no_module_imports_a_bare_top_level_name() -> None:
    found = []
    for folder in CODE:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, module in _bare_imports(ast.parse(path.read_text(), str(path))):
                found.append(f"{path.relative_to(ROOT)}:{line}: {module}")
    assert not found, "import robosteer.<name> instead:\n" + "\n".join(found)


def test_the_check_sees_a_bare_import() -> None:
    tree = ast.parse("import sim\nfrom policies.rl import x\nfrom robosteer.sim import y\nfrom . import z\n")
    assert _bare_imports(tree) == [(1, "sim"), (2, "policies.rl")]


def test_checkout_resolves_robosteer_to_the_top_level_folders() -> None:
    """With only the checkout on the path (as .venv-gpu and ``make faults`` run), robosteer.policies is the
    repository's policies/ and loading it puts no bare ``policies`` in sys.modules."""
    code = (
        "import sys, robosteer.policies.registry as r, robosteer.sim, robosteer.scripts.common\n"
        "print(r.__file__); print(sorted(m for m in sys.modules if m.split('.')[0] in {'policies', 'sim'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120,
        env={"PYTHONPATH": str(ROOT), "MUJOCO_GL": "egl", "PATH": "/usr/bin:/bin"},
    ).stdout.split("\n")  # fmt: skip
    assert out[0] == str(ROOT / "policies" / "registry.py") and out[1] == "[]"

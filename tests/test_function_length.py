"""Entry points read top to bottom: no function in scripts/, policies/steering/ or real/ is over 80 lines.

Counted as the AST sees a definition, ``end_lineno - lineno + 1`` (decorators not included, the docstring
and blank lines included), with nested definitions counted in their parent: a closure does not make its
enclosing function shorter.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("scripts", "policies/steering", "real")
LIMIT = 80


def long_functions(source: str, limit: int = LIMIT) -> list[tuple[str, int]]:
    """(qualified name, lines) of every outermost-counted function over ``limit`` lines in ``source``.

    A function nested in another is inside its parent's span already; it is reported too if it alone is over.
    """
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                length = child.end_lineno - child.lineno + 1
                if length > limit:
                    out.append((name, length))
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def test_the_counter_counts_nested_definitions_in_their_parent() -> None:
    inner = "\n".join(f"        x{i} = {i}" for i in range(79))
    nested = f"def outer():\n    def inner():\n{inner}\n    return inner\n"  # outer: 82 lines, inner: 80
    assert long_functions(nested) == [("outer", 82)]
    method = "class A:\n    def m(self):\n" + "\n".join(f"        y{i} = {i}" for i in range(80)) + "\n"
    assert long_functions(method) == [("A.m", 81)]
    assert long_functions(method, limit=81) == []


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_function_is_over_80_lines(folder: str) -> None:
    found = [
        f"{path.relative_to(ROOT)}: {name} ({length} lines)"
        for path in sorted((ROOT / folder).rglob("*.py"))
        for name, length in long_functions(path.read_text())
    ]
    assert not found, f"functions over {LIMIT} lines (split them so they read top to bottom): {found}"

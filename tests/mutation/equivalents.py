"""Equivalent mutants: mutmut's changes that no test can kill because behaviour is identical.

Each entry names its module, the mutant's diff as ``mutmut show`` prints it (only the ``-``/``+`` lines
are compared, so a renumbered mutant still matches) and why the mutated code behaves the same. A
surviving mutant whose diff is listed here counts as equivalent in its row, not as survived.
"""

EQUIVALENTS: list[dict[str, str]] = []

"""The EXPO benchmark's "env steps to reach" table: the numbers the Done-when's 2/3-of-RLPD ratio is read from."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from expo_steering import reach_ratio, reach_table, steps_to_reach


def _row(task: str, method: str, evals: list[tuple[int, float]]) -> dict:
    return {
        "task": task,
        "method": method,
        "seed": 0,
        "history": [{"env_steps": s, "success_rate": x} for s, x in evals],
    }


def test_steps_to_reach_is_the_first_eval_at_or_above_the_threshold() -> None:
    history = _row("t", "m", [(0, 0.6), (2500, 0.9), (5000, 0.7), (7500, 0.92)])["history"]
    assert steps_to_reach(history, 0.6) == 0
    assert steps_to_reach(history, 0.9) == 2500  # the first, not a later one
    assert steps_to_reach(history, 0.91) == 7500
    assert steps_to_reach(history, 0.95) is None


def test_ratio_is_bounded_when_the_reference_never_reached_the_threshold() -> None:
    assert reach_ratio(20_000, 40_000, 50_000) == "0.50"
    assert reach_ratio(20_000, None, 30_000) == "< 0.67"  # RLPD needs more than its 30k: the ratio is below
    assert reach_ratio(None, 40_000, 50_000) == "–"
    assert reach_ratio(0, 0, 50_000) == "–"  # both had it at the start: no ratio


def test_reach_table_compares_each_row_with_its_own_task_reference() -> None:
    rows = [
        _row("push", "expo", [(0, 0.6), (10_000, 0.8), (20_000, 0.9)]),
        _row("push", "rlpd_single", [(0, 0.0), (15_000, 0.8), (30_000, 0.85)]),
        _row("pick", "expo", [(0, 0.7), (5_000, 0.8)]),
        _row("pick", "rlpd_single", [(0, 0.0), (40_000, 0.9)]),
    ]
    table = {(r["task"], r["method"]): r for r in reach_table(rows)}
    push = table[("push", "expo")]
    assert push["≥ 0.8"] == "10,000" and push["/ rlpd ≥ 0.8"] == "0.67"
    assert push["/ rlpd ≥ 0.9"] == "< 0.67"  # RLPD's push run ends at 30k below 0.9
    assert table[("push", "rlpd_single")]["≥ 0.9"] == "> 30,000"
    pick = table[("pick", "expo")]
    assert pick["/ rlpd ≥ 0.8"] == "0.12" and pick["≥ 0.9"] == "> 5,000" and pick["/ rlpd ≥ 0.9"] == "–"


def test_every_row_has_the_ratio_columns_when_any_task_has_a_reference() -> None:
    rows = [
        _row("a-task", "expo", [(0, 0.5), (100, 0.9)]),
        _row("b-task", "rlpd", [(0, 0.0), (400, 0.9)]),
        _row("b-task", "expo", [(0, 0.5), (100, 0.9)]),
    ]
    table = reach_table(rows)
    assert table[0]["task"] == "a-task" and table[0]["/ rlpd ≥ 0.9"] == ""  # no reference there: blank
    assert [set(r) for r in table[1:]] == [set(table[0])] * 2
    assert table[1]["method"] == "expo" and table[1]["/ rlpd ≥ 0.9"] == "0.25"


def test_each_seed_is_compared_with_the_reference_run_of_its_own_seed() -> None:
    rlpd = [_row("push", "rlpd", [(0, 0.0), (s, 0.8)]) for s in (10_000, 40_000)]
    expo = [_row("push", "expo", [(0, 0.0), (8_000, 0.8)]) for _ in range(2)]
    for i, r in enumerate(rlpd + expo):
        r["seed"] = i % 2
    table = {(r["method"], r["seed"]): r for r in reach_table(rlpd + expo)}
    assert table[("expo", 0)]["/ rlpd ≥ 0.8"] == "0.80"
    assert table[("expo", 1)]["/ rlpd ≥ 0.8"] == "0.20"

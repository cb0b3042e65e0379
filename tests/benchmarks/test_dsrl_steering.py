"""The steering benchmarks' base: one collect + train per (task, demos, noise, steps), named so runs share it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import dsrl_steering


@pytest.mark.parametrize(
    ("demos", "data_dir", "base_dir"),
    [
        (100, "demos_noise0.3", "base_dp_noise0.3_8000"),  # the original names: earlier runs keep their bases
        (20, "demos_20demos_noise0.3", "base_dp_20demos_noise0.3_8000"),
    ],
)
def test_weak_base_collects_the_asked_demos_once_under_its_own_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, demos: int, data_dir: str, base_dir: str
) -> None:
    calls: list[list[str]] = []

    def fake_run(args: list[str], log: Path) -> None:  # the collect/train/evaluate commands' outputs
        calls.append(args)
        out = Path(next(a for a in args if a.startswith("out="))[4:])
        out.mkdir(parents=True, exist_ok=True)
        (out / "demos.hdf5").touch()
        (out / "metrics.json").write_text(json.dumps({"success_rate": 0.5}))

    monkeypatch.setattr(dsrl_steering, "_run", fake_run)
    for _ in range(2):  # the second call finds everything and runs nothing
        base, data, success = dsrl_steering.weak_base("push-v3", tmp_path, 0.3, 8000, 10, demos)
    assert (base, data, success) == (
        tmp_path / "push-v3" / base_dir,
        tmp_path / "push-v3" / data_dir / "demos.hdf5",
        0.5,
    )
    assert [c[0] for c in calls] == [
        "robosteer.scripts.collect",
        "robosteer.scripts.train",
        "robosteer.scripts.evaluate",
    ]
    assert f"episodes={demos}" in calls[0]

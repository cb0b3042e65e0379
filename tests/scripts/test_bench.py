"""robosteer-bench: lists benchmarks and suggests the nearest name on a typo."""

from __future__ import annotations

from robosteer.scripts.bench import available, main


def test_lists_and_rejects_unknown_names(capsys):
    assert {"env_speed", "render_speed", "collect_quality"} <= set(available())
    assert main(["envspeed"]) == 2
    assert "env_speed" in capsys.readouterr().err
    assert main([]) == 2 and "benchmarks:" in capsys.readouterr().out

"""`python benchmarks/results_tables.py` (`make check-tables`): every fenced README table is what its committed rows give, and any edit shows."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import results_tables as tables  # noqa: E402

README = ROOT / "README.md"


def fenced_tables() -> list[tuple[Path, str, int, int]]:
    """(page, name, open, close) of every fenced table in the committed README and docs pages."""
    out = []
    for page in tables.pages():
        lines = page.read_text().split("\n")
        out += [(page, name, a, b) for a, b, name, _, _ in tables.fences(lines, page.name)]
    return out


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = tables.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_committed_tables_match_their_rows(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(capsys)
    assert (rc, err) == (0, ""), out + err
    assert len(fenced_tables()) >= 30


def test_every_page_under_docs_is_checked() -> None:
    """docs/experiments/ (and any folder below docs/) is read by default, not only docs/*.md."""
    pages = {p.relative_to(ROOT).as_posix() for p, *_ in fenced_tables()}
    assert {"README.md", "docs/experiments/dsrl.md", "docs/algorithms/dsrl.md"} <= pages


def edit_one_number(lines: list[str], start: int, end: int) -> list[str]:
    """``lines`` with the last digit of the last numeric cell of a data row in the table's middle changed."""
    rows = [i for i in range(start + 1, end) if lines[i].startswith("|")][2:]  # past header and separator
    body = [i for i in rows if re.search(r"\d", lines[i])]
    i = body[len(body) // 2]
    cells = lines[i].split("|")
    c = next(c for c in range(len(cells) - 1, 0, -1) if re.search(r"\d", cells[c]))  # its last numeric cell
    d = [m.start() for m in re.finditer(r"\d", cells[c])][-1]
    cells[c] = cells[c][:d] + str((int(cells[c][d]) + 1) % 10) + cells[c][d + 1 :]
    return [*lines[:i], "|".join(cells), *lines[i + 1 :]]


@pytest.mark.parametrize(
    "page,name,start,end",
    [pytest.param(*t, id=f"{t[0].relative_to(ROOT)}:{t[1]}:{t[2] + 1}") for t in fenced_tables()],
)
def test_editing_one_number_fails_and_write_restores(
    page: Path, name: str, start: int, end: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = page.read_text().split("\n")
    copy = tmp_path / page.relative_to(ROOT)  # where the page sits, so its short links read the same
    copy.parent.mkdir(parents=True, exist_ok=True)
    copy.write_text("\n".join(edit_one_number(lines, start, end)))

    rc, out, _ = run(capsys, str(copy))
    assert rc == 1 and f"{name} (from its rows)" in out
    assert tables.check([copy], write=True, root=tmp_path) == 0
    capsys.readouterr()
    assert copy.read_text() == page.read_text()
    assert tables.check([copy], root=tmp_path) == 0


def test_a_changed_number_in_an_experiments_table_fails_make_check_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default run (no files named) reads docs/experiments/: one changed digit there exits 1."""
    page, name, start, end = next(t for t in fenced_tables() if "experiments" in t[0].parts)
    docs = tmp_path / "docs"
    for src in (ROOT / "docs").rglob("*.md"):
        (docs / src.relative_to(ROOT / "docs")).parent.mkdir(parents=True, exist_ok=True)
        (docs / src.relative_to(ROOT / "docs")).write_text(src.read_text())
    (tmp_path / "README.md").write_text(README.read_text())
    edited = docs / page.relative_to(ROOT / "docs")
    edited.write_text("\n".join(edit_one_number(page.read_text().split("\n"), start, end)))
    tables.ROOT, root = tmp_path, tables.ROOT
    try:
        pages = tables.pages()
    finally:
        tables.ROOT = root
    assert edited in pages
    assert tables.check(pages, root=tmp_path) == 1
    assert f"{name} (from its rows)" in capsys.readouterr().out


def test_short_fence_links_its_rows_instead_of_the_provenance(tmp_path: Path) -> None:
    md = tmp_path / "docs" / "guide.md"
    md.parent.mkdir()
    md.write_text("<!-- table: env_speed rows=docs/results/env_speed.jsonl short -->\n<!-- /table -->\n")
    assert tables.check([md], write=True, root=tmp_path) == 0
    text = md.read_text()
    assert "Rows: [env_speed.jsonl](results/env_speed.jsonl)." in text
    assert "load average" not in text and "commit" not in text
    full = tables.render("env_speed", ["docs/results/env_speed.jsonl"], "x")
    assert "load average" in full and full.split("\n\n", 1)[1] in text  # the same table, captioned apart


def fence(md: Path, name: str, rows: str) -> Path:
    md.write_text(f"# t\n\n<!-- table: {name} rows={rows} -->\n\n<!-- /table -->\n")
    return md


def test_unknown_table_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    md = fence(tmp_path / "x.md", "no_such_table", "docs/results/data_scaling.jsonl")
    rc, _, err = run(capsys, str(md))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert f"{md}:3" in err and "unknown table 'no_such_table'" in err


def test_missing_rows_file_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    md = fence(tmp_path / "x.md", "data_scaling", str(tmp_path / "absent.jsonl"))
    rc, _, err = run(capsys, str(md))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert f"rows file {tmp_path / 'absent.jsonl'} not found" in err


def test_malformed_rows_name_file_line_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "rows.jsonl"
    good = {"task": "push-v3", "policy": "flow", "demos": 10, "seed": 0, "success_rate": 0.5}
    rows.write_text(json.dumps(good) + "\n{not json\n")
    md = fence(tmp_path / "x.md", "data_scaling", str(rows))
    rc, _, err = run(capsys, str(md))
    assert rc == 2 and f"{rows}:2: malformed row" in err and len(err.strip().splitlines()) == 1
    rows.write_text(
        json.dumps(good) + "\n" + json.dumps({k: v for k, v in good.items() if k != "seed"}) + "\n"
    )
    rc, _, err = run(capsys, str(md))
    assert rc == 2 and f"{rows}:2: row has no key 'seed'" in err and len(err.strip().splitlines()) == 1


def table_lines(md: Path) -> list[str]:
    """A written table's header and body lines (its separator left out)."""
    return [line for line in md.read_text().splitlines() if line.startswith("| ") and "---" not in line]


def dsrl_row(task: str, seed: int, variant: str = "na", **kw: object) -> dict:
    history = [{"env_steps": 0.0, "success_rate": 0.12}, {"env_steps": 50012.0, "success_rate": 0.98}]
    history.append({"env_steps": 100001.0, "success_rate": 0.98 if seed == 0 else 0.9})
    return {
        "task": task, "variant": variant, "seed": seed, "base": {"noise": 0.3, "demos": 100, "steps": 3000},
        "base_success": 0.42, "success_rate": 0.96, "best_actor_success": 0.95, "best_periodic": 0.98,
        "episodes": 100, "env_steps": 100001, "wall_s": 3000.0, "history": history,
        "overrides": ["run.reward=shaped"], "command": "python ...", "commit": "dc7cd6f",
        "machine": "x86_64 2 cores", "load": 2.1, **kw,
    }  # fmt: skip


def test_dsrl_weak_base_from_fixture_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "dsrl.jsonl"
    lines = [
        dsrl_row("push-v3", 1),
        dsrl_row("pick-place-v3", 0, success_rate=0.79, best_actor_success=0.92, wall_s=2952.0),
        dsrl_row("push-v3", 0),
        dsrl_row("push-v3", 0, variant="sac", success_rate=0.5),
    ]
    rows.write_text("".join(json.dumps(r) + "\n" for r in lines))
    md = fence(tmp_path / "x.md", "dsrl_weak_base", str(rows))
    assert run(capsys, str(md))[0] == 1
    assert run(capsys, "--write", str(md))[0] == 0
    got = table_lines(md)[1:]
    assert got == [
        "| pick-place-v3 | 0 | 0.42 | 0.98 (50k, 100k) | 0.79 | **0.92** | 100,001 | 49.2 |",
        "| push-v3 | 0 | 0.42 | 0.98 (50k, 100k) | **0.96** | 0.95 | 100,001 | 50.0 |",
        "| push-v3 | 1 | 0.42 | 0.98 (50k) | **0.96** | 0.95 | 100,001 | 50.0 |",
    ]
    assert run(capsys, str(md))[0] == 0
    broken = dsrl_row("push-v3", 2)
    del broken["history"][1]["success_rate"]
    rows.write_text(rows.read_text() + json.dumps(broken) + "\n")
    rc, _, err = run(capsys, str(md))
    assert rc == 2 and f"{rows}:5: row has no key 'success_rate'" in err


def test_dsrl_weak_base_shows_kept_checkpoints_on_the_unseen_episodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "dsrl.jsonl"
    kept = [{"env_steps": 30015, "success_rate": 0.91}, {"env_steps": 40023, "success_rate": 0.8}]
    lines = [dsrl_row("pick-place-v3", 0, unseen_history=kept), dsrl_row("push-v3", 0)]
    rows.write_text("".join(json.dumps(r) + "\n" for r in lines))
    md = fence(tmp_path / "x.md", "dsrl_weak_base", str(rows))
    assert run(capsys, "--write", str(md))[0] == 0
    got = table_lines(md)
    assert "| acting actor at kept checkpoints, same ep. |" in got[0]
    assert got[1:] == [
        "| pick-place-v3 | 0 | 0.42 | 0.98 (50k, 100k) | **0.96** | 0.91 (30k), 0.80 (40k) | 0.95 | 100,001 | 50.0 |",
        "| push-v3 | 0 | 0.42 | 0.98 (50k, 100k) | **0.96** | — | 0.95 | 100,001 | 50.0 |",
    ]


def test_vgps_rows_without_critic_version_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = (ROOT / "docs/results/vgps_mt10_g20k.jsonl").read_text().splitlines()
    rows = tmp_path / "vgps.jsonl"
    first = json.loads(src[0])
    del first["critic_version"]
    rows.write_text("\n".join([json.dumps(first), *src[1:]]) + "\n")
    rc, _, err = run(capsys, str(fence(tmp_path / "x.md", "vgps_mt10", str(rows))))
    assert rc == 2 and f"{rows}:1: row has no key 'critic_version'" in err


def test_generators_are_documented_in_one_line() -> None:
    for name, gen in tables.GENERATORS.items():
        assert gen.__doc__ and len(gen.__doc__.strip().splitlines()) == 1, name


def test_append_row_adds_provenance(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    tables.append_row(path, {"task": "push-v3", "per_s": 1.5}, ["python", "benchmarks/x.py"])
    tables.append_row(path, {"task": "reach-v3", "per_s": 2.5}, ["python", "benchmarks/x.py"])
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["task"] for r in rows] == ["push-v3", "reach-v3"]
    assert {"command", "commit", "machine", "load"} <= set(rows[0]) and rows[0][
        "command"
    ] == "python benchmarks/x.py"


def test_runs_without_torch_in_seconds() -> None:
    code = (
        "import sys; sys.path.insert(0, 'benchmarks'); import results_tables as tables; "
        "rc = tables.main([]); print(rc, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.split()[-2:] == ["0", "False"], out.stdout + out.stderr


def test_unclosed_fence_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    md = tmp_path / "x.md"
    md.write_text("<!-- table: data_scaling rows=docs/results/data_scaling.jsonl -->\n| a |\n")
    rc, _, err = run(capsys, str(md))
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "never closed" in err


def test_pixels_steer_lift_is_paired_with_the_base_on_the_same_episodes() -> None:
    """The lift column is the final actor minus the base's ``base_eval`` row for the weights steered (``which``)
    and the same episode count; a row with no such base evaluation shows none."""
    prov = {"commit": "abc1234", "machine": "x86_64 2 cores", "load": 1.0}
    steer = {"part": "steer", "task": "push-v3", "base": "runs/pixels/b/base_s0", "seed": 0, **prov}
    steer |= {"base_success_rate": None, "steerability_ratio": 0.9, "initial_success_rate": 0.5}
    steer |= {"best_success_rate": 0.6, "final_eval_success_rate": 0.72, "best_eval_success_rate": 0.7}
    steer |= {"best_env_steps": 15000, "env_steps": 20001, "wall_time_s": 600.0, "env_steps_budget": 20000}
    steer |= {"final_eval_episodes": 100, "steer_eval_episodes": 50, "base_demos_action_noise": 0.3}
    base_eval = {"part": "base_eval", "base": steer["base"], "which": "ema", "episodes": 100, **prov}
    rows = [
        steer,
        {**steer, "seed": 1, "overrides": ["which=best"]},  # steered other weights: unpaired
        {**base_eval, "success_rate": 0.5},  # superseded by the later row of the same key
        {**base_eval, "success_rate": 0.45},
        {**base_eval, "which": "ema", "episodes": 50, "success_rate": 0.1},  # other episodes
    ]
    lines = [line for line in tables.pixels_steer(rows).splitlines() if line.startswith("| push-v3")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    assert [c[1] for c in cells] == ["0", "1"]
    assert cells[0][9:12] == ["0.45", "**0.72**", "+27"]
    assert cells[1][9:12] == ["–", "**0.72**", "–"]


def test_dsrl_settings_keeps_one_line_per_override_and_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "dsrl.jsonl"
    cadence = ["run.eval_every=5000", "run.checkpoint_every=10000"]
    lines = [
        dsrl_row(
            "pick-place-v3", 0, overrides=[*cadence, "dsrl.tau=0.005"], env_steps=50005, success_rate=0.6
        ),
        dsrl_row("pick-place-v3", 0, overrides=[*cadence, "dsrl.actor_lr=1e-4"], env_steps=50022),
        dsrl_row(
            "pick-place-v3",
            0,
            overrides=[*cadence, "dsrl.actor_lr=1e-4"],
            unseen_history=[{"env_steps": 60011, "success_rate": 0.88}],
        ),
        dsrl_row("pick-place-v3", 0, overrides=cadence, variant="sac"),
    ]
    rows.write_text("".join(json.dumps(r) + "\n" for r in lines))
    md = fence(tmp_path / "x.md", "dsrl_settings", str(rows))
    assert run(capsys, "--write", str(md))[0] == 0
    got = table_lines(md)[1:]
    assert got == [
        "| pick-place-v3 | 0 | `dsrl.actor_lr=1e-4` | 0.42 | 0.98 | **0.96** | — | — | 0.95 | 50,022 | 50.0 |",
        "| pick-place-v3 | 0 | `dsrl.actor_lr=1e-4` | 0.42 | 0.98 | **0.96** | — | 0.88 (60k) | 0.95 | 100,001 | 50.0 |",
        "| pick-place-v3 | 0 | `dsrl.tau=0.005` | 0.42 | 0.98 | **0.60** | — | — | 0.95 | 50,005 | 50.0 |",
    ]


def test_dsrl_kept_shows_both_ways_per_run_and_keeps_the_last_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "kept.jsonl"

    def kept(seed: int, mean: float, overrides: list[str]) -> dict:
        points = [{"env_steps": 50019, "mean_latent": 0.94, "sampled": 0.72, "last_critic_q": -11.94}]
        points.append({"env_steps": 80031, "mean_latent": mean, "sampled": 0.66})  # no critic view: —
        return {"task": "pick-place-v3", "variant": "na", "seed": seed, "overrides": overrides,
                "episodes": 100, "kept": points, "command": "python ...", "commit": "1c32d70"}  # fmt: skip

    cos = ["run.eval_every=5000", "dsrl.actor_lr_decay=cosine"]
    lines = [kept(2, 0.5, cos), kept(2, 0.64, cos), kept(1, 0.8, ["run.eval_every=5000"])]
    rows.write_text("".join(json.dumps(r) + "\n" for r in lines))
    md = fence(tmp_path / "x.md", "dsrl_kept", str(rows))
    assert run(capsys, "--write", str(md))[0] == 0
    assert table_lines(md) == [
        "| task | seed | overrides | kept checkpoints (env steps) | mean latent (100 unseen ep.) "
        "| sampled latents, same ep. | the last critic's Q^A of the mean latent (replay states) |",
        "| pick-place-v3 | 2 | `dsrl.actor_lr_decay=cosine` | 50k, 80k | 0.94, 0.64 | 0.72, 0.66 | -11.9, — |",
        "| pick-place-v3 | 1 | defaults | 50k, 80k | 0.94, 0.80 | 0.72, 0.66 | -11.9, — |",
    ]


def test_dsrl_kept_average_puts_each_start_in_its_column_and_keeps_the_last_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "avg.jsonl"

    def averaged(seed: int, overrides: list[str], averages: list[dict]) -> dict:
        kept = [{"env_steps": 50019, "success_rate": 0.94}, {"env_steps": 100020, "success_rate": 0.76}]
        return {"task": "pick-place-v3", "variant": "na", "seed": seed, "overrides": overrides,
                "episodes": 100, "kept": kept, "averages": averages, "commit": "1c32d70"}  # fmt: skip

    cos = ["run.eval_every=5000", "dsrl.actor_lr_decay=cosine"]
    both = [{"from": 20000, "checkpoints": 9, "success_rate": 0.93}]
    both.append({"from": 50000, "checkpoints": 6, "success_rate": 0.841})
    lines = [averaged(0, cos, both[:1]), averaged(0, cos, both), averaged(2, ["run.utd=1.0"], both[1:])]
    rows.write_text("".join(json.dumps(r) + "\n" for r in lines))
    md = fence(tmp_path / "x.md", "dsrl_kept_average", str(rows))
    assert run(capsys, "--write", str(md))[0] == 0
    assert table_lines(md) == [
        "| task | seed | overrides | acting actor at kept checkpoints (100 unseen ep.) | final actor, same ep. "
        "| average of the kept actors from 20k (how many), same ep. "
        "| average of the kept actors from 50k (how many), same ep. |",
        "| pick-place-v3 | 0 | `dsrl.actor_lr_decay=cosine` | 0.94, 0.76 | 0.76 | 0.93 (9) | 0.84 (6) |",
        "| pick-place-v3 | 2 | `run.utd=1.0` | 0.94, 0.76 | 0.76 | — | 0.84 (6) |",
    ]


def test_dsrl_failures_lists_each_kept_actors_failures_by_grasp(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "failures.jsonl"
    kept = [{"env_steps": 50019, "success_rate": 0.94, "failures": 6, "never_grasped": 2, "grasped": 4}]
    kept[0]["never_grasped_reached"] = 2  # a row written before the approach was recorded shows —
    kept.append(
        {"env_steps": 80031, "success_rate": 0.64, "failures": 36, "never_grasped": 24, "grasped": 12}
    )
    kept[1] |= {"shaped_return": -12.84, "success_length": 57.3}  # the first row predates them: —
    kept[1] |= {"near_success": 0.4, "rest_success": 0.72}
    row = {"task": "pick-place-v3", "variant": "na", "seed": 2, "episodes": 100, "kept": kept}
    cos = ["run.eval_every=5000", "dsrl.actor_lr_decay=cosine"]
    rows.write_text(json.dumps({**row, "overrides": cos}) + "\n")
    md = fence(tmp_path / "x.md", "dsrl_failures", str(rows))
    assert run(capsys, "--write", str(md))[0] == 0
    assert table_lines(md) == [
        "| task | seed | overrides | kept checkpoints (env steps) | success (100 unseen ep.) "
        "| failures that never grasped the object | of them, the hand reached the object "
        "| failures that grasped it (dropped, or never at the goal) "
        "| shaped return per episode (the critics' reward) | successes' mean length (env steps) "
        "| success where the object starts nearest the robot (the quarter of lowest y) | success, the rest |",
        "| pick-place-v3 | 2 | `dsrl.actor_lr_decay=cosine` | 50k, 80k | 0.94, 0.64 | 2, 24 | 2, — | 4, 12 "
        "| —, -12.8 | —, 57 | —, 0.40 | —, 0.72 |",
    ]


def test_dsrl_clean_keeps_bases_trained_for_different_steps_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two recipes that differ only in the base's training steps (or demos) are two lines, and so are runs
    that differ only in the observations their actor and critics read (the row's field, or before it its override);
    a re-run of one recipe, seed and budget replaces its line."""
    rows = tmp_path / "clean.jsonl"

    def clean(steps: int, success: float, **extra: object) -> dict:
        base = {"noise": 0.0, "demos": 10, "steps": steps, "augment": 0.3}
        row = dsrl_row(
            "pick-place-v3", 1, base=base, base_success=0.02, success_rate=success, env_steps=30016
        )
        return {**row, **extra}

    kept = [{"env_steps": 10031, "success_rate": 0.22}, {"env_steps": 30016, "success_rate": 0.31}]
    lines = [clean(3000, 0.27), clean(8000, 0.25), {**clean(8000, 0.31), "unseen_history": kept}]
    lines += [clean(8000, 0.40, overrides=["dsrl.normalize_obs=true"]), clean(8000, 0.44, normalize_obs=True)]
    more = clean(8000, 0.50, normalize_obs=True)
    lines += [{**more, "base": {**more["base"], "demos": 25}}]  # more demos: a line of its own
    rows.write_text("".join(json.dumps(r) + "\n" for r in lines))
    md = fence(tmp_path / "x.md", "dsrl_clean", str(rows))
    assert run(capsys, "--write", str(md))[0] == 0
    got = [line.split(" | ")[2:11] for line in table_lines(md)[1:]]
    recipe = "10 clean demos, 8k steps, action_noise_std=0.3"
    first = [
        "10 clean demos, 3k steps, action_noise_std=0.3",
        "raw",
        "—",
        "0.02",
        "0.98",
        "**0.27**",
        "+0.25",
    ]
    normalised = [recipe, "normalised", "—", "0.02", "0.98", "**0.44**", "+0.42"]
    second = [recipe, "raw", "—", "0.02", "0.98", "**0.31**", "+0.29"]
    more = [
        "25 clean demos, 8k steps, action_noise_std=0.3",
        "normalised",
        "—",
        "0.02",
        "0.98",
        "**0.50**",
        "+0.48",
    ]
    lines_10 = [[*first, "—", "—"], [*normalised, "—", "—"], [*second, "—", "0.22 (10k), 0.31 (30k)"]]
    assert got == [*lines_10, [*more, "—", "—"]]


def lerobot_row(down_dims: list[int], train: tuple[float, float], load: float) -> dict:
    """A synthetic lerobot_compare row (made-up round figures, not a measurement); ``train``: our (min, median)
    ms per step, LeRobot's is 160 ms median, 125 ms min."""
    ours = {"torch": "2.13.0+cpu", "version": "working tree", "params_total": 1_000_000,
            "params_denoiser": 900_000, "loads": [[2.0, 2.0, 2.0]]}  # fmt: skip
    theirs = {"torch": "2.14.1", "version": "0.4.4", "params_total": 1_250_000, "params_denoiser": 900_000,
              "loads": [[2.0, 2.0, 2.0]], "config": {"down_dims": down_dims}}  # fmt: skip
    timings = {"train": (train, (125.0, 160.0)), "chunk": ((70.0, 80.0), (75.0, 100.0))}
    timings |= {"refill": ((72.0, 82.0), (80.0, 82.0)), "floor": ((68.0, 76.0), (70.0, 80.0))}
    for kind, (o, lr) in timings.items():
        ours |= {f"{kind}_ms_min": o[0], f"{kind}_ms_med": o[1], f"{kind}_n": 60}
        theirs |= {f"{kind}_ms_min": lr[0], f"{kind}_ms_med": lr[1], f"{kind}_n": 60}
    return {
        "dataset": "runs/calib/push_demos/demos.hdf5", "down_dims": down_dims, "kernel_size": 5, "n_groups": 8,
        "step_embed_dim": 128, "n_obs_steps": 2, "horizon": 16, "n_action_steps": 8, "train_timesteps": 100,
        "inference_steps": 10, "batch_size": 64, "warmup": 5, "steps": 30, "reps": 30, "rounds": 2,
        "threads": 1, "robosteer": ours, "lerobot": theirs, "command": "python benchmarks/lerobot_compare.py",
        "commit": "0000000", "machine": "x86_64 2 cores", "load": load,
    }  # fmt: skip


def test_lerobot_compare_draws_one_table_per_configuration_from_its_last_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Synthetic rows: a re-run of the same UNet replaces its earlier row; another UNet is a table of its own."""
    rows = tmp_path / "lerobot_compare.jsonl"
    lines = [lerobot_row([64, 128, 256], (90.0, 100.0), 1.0), lerobot_row([32, 64], (50.0, 64.0), 3.0)]
    lines.append(lerobot_row([64, 128, 256], (100.0, 128.0), 2.0))  # supersedes the first row
    rows.write_text("".join(json.dumps(r) + "\n" for r in lines))
    md = fence(tmp_path / "x.md", "lerobot_compare", str(rows))
    rc, out, err = run(capsys, "--write", str(md))
    assert (rc, out, err) == (0, f"{md}:3: table lerobot_compare rewritten from its rows\n", "")
    text = " ".join(md.read_text().split())  # the captions are wrapped prose
    assert "Rows: commit 0000000, x86_64 2 cores, 1-minute load average 2.0–3.0." in text  # 1.0: superseded
    assert text.index("down_dims 64/128/256") < text.index("down_dims 32/64")  # order of first appearance
    assert "LeRobot 0.4.4 (torch 2.14.1) `DiffusionPolicy`, 1 thread each, 2 alternating rounds." in text
    assert "batch 64, 5 warm-up + 30 timed steps and 30 inference timings per kind, per round." in text
    header = "| metric | robosteer | LeRobot | robosteer / LeRobot |"
    first = [
        "| parameters, whole policy | 1,000,000 | 1,250,000 | 0.800 |",
        "| parameters, denoiser (UNet) | 900,000 | 900,000 | 1.000 |",
        "| train samples/s (best / median step) | 640 / 500 | 512 / 400 | 1.25 |",
        "| train ms / step (min / median) | 100.00 / 128.00 | 125.00 / 160.00 | 0.80 |",
        "| chunk ms, batch 1: `sample` / `predict_action_chunk` (min / median) | 70.00 / 80.00 | 75.00 / 100.00 "
        "| 0.80 |",
        "| refill ms, batch 1: `act` / pre + `select_action` + post (min / median) | 72.00 / 82.00 "
        "| 80.00 / 82.00 | 1.00 |",
        "| floor: 10 bare UNet calls (min / median) | 68.00 / 76.00 | 70.00 / 80.00 | 0.95 |",
        "| chunk / floor (median) | 1.05 | 1.25 |  |",
    ]
    got = table_lines(md)
    assert got[:9] == [header, *first]
    assert got[9:12] == [
        header,
        "| parameters, whole policy | 1,000,000 | 1,250,000 | 0.800 |",
        "| parameters, denoiser (UNet) | 900,000 | 900,000 | 1.000 |",
    ]
    assert got[12] == "| train samples/s (best / median step) | 1,280 / 1,000 | 512 / 400 | 2.50 |"
    assert len(got) == 18
    assert run(capsys, str(md)) == (0, "", "")  # and what was written is what the rows give


def test_lerobot_compare_without_rows_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty rows file (no run measured yet) is an error, as a missing one is: the fence waits for rows."""
    rows = tmp_path / "lerobot_compare.jsonl"
    rows.write_text("")
    rc, _, err = run(capsys, str(fence(tmp_path / "x.md", "lerobot_compare", str(rows))))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "table lerobot_compare: no rows of benchmarks/lerobot_compare.py" in err


def test_dsrl_any_task_puts_the_plain_base_the_auto_choice_and_the_failures_removed_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Synthetic rows (made-up figures): the screening row gives the plain base, the run row its auto choice."""
    prov = {"command": "python ...", "commit": "0000000", "machine": "x86_64 2 cores", "load": 2.0}
    screen = {"task": "hammer-v3", "part": "base", "base": {"noise": 0.0, "demos": 10, "steps": 3000},
              "episodes": 100, "base_success": 0.5, **prov}  # fmt: skip
    auto = {"chosen": 0.2, "probes": [{"sigma": 0.0, "ratio": 0.31}, {"sigma": 0.1, "ratio": 0.4},
                                      {"sigma": 0.2, "ratio": 0.62}]}  # fmt: skip
    base = {"noise": 0.0, "demos": 10, "steps": 3000, "augment": "auto"}
    run_row = dsrl_row("hammer-v3", 0, base=base, base_success=0.4, success_rate=0.7, env_steps=30012,
                       auto_noise=auto, failures_removed=0.5)  # fmt: skip
    rows = tmp_path / "any.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in (screen, run_row)))
    md = fence(tmp_path / "runs.md", "dsrl_any_task", str(rows))
    assert run(capsys, "--write", str(md))[0] == 0
    cells = table_lines(md)[1].split(" | ")
    assert cells[1:10] == ["0", "0.50", "0.2", "0: 0.31, 0.1: 0.40, 0.2: 0.62", "0.40", "**0.70**", "+0.30",
                           "0.50", "—"]  # fmt: skip
    md = fence(tmp_path / "screen.md", "dsrl_task_screen", str(rows))
    assert run(capsys, "--write", str(md))[0] == 0
    assert table_lines(md)[1] == "| hammer-v3 | 10 | 3,000 | 0.50 | yes |"


def test_metaworld_mujoco4_and_steering_throughput_draw_their_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prov = {"command": "python ...", "commit": "0000000", "machine": "x86_64 2 cores", "load": 2.0}
    failed = {"dataset": "runs/x/push-v3/demos.hdf5", "mujoco": "4.0.0", "patched_welds": False,
              "error": "ValueError: shapes", **prov}  # fmt: skip
    replayed = {"task": "push-v3", "dataset": "runs/x/push-v3/demos.hdf5", "mujoco": "4.0.0", "patched_welds": True,
                "episodes": 10, "env_steps": 600, "bitwise_episodes": 0, "first_differing_step_min": 0,
                "first_differing_step_median": 0.0, "max_abs_state_diff": 0.0772, "max_abs_reset_state_diff": 0.00056,
                "success_agrees": 9, **prov}  # fmt: skip
    rows = tmp_path / "mj4.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in (failed, replayed)))
    md = fence(tmp_path / "mj4.md", "metaworld_mujoco4", str(rows))
    assert run(capsys, "--write", str(md))[0] == 0
    body = table_lines(md)[1:]
    assert body[0].startswith("| mujoco 4.0.0 | push-v3 | — |") and "fails: ValueError: shapes" in body[0]
    assert (
        body[1]
        == "| mujoco 4.0.0, weld reset fitted to 4.0 | push-v3 | 0 / 10 | 0 | 0.00056 | 0.077 | 9 / 10 |"
    )
    cell = {"sim": "warp", "num_envs": 256, "device": "cpu", "utd": 2.0, "acting_env_steps_per_s": 1234.5,
            "learning_env_steps_per_s": 20.04, "updates_per_s": 10.0, **prov}  # fmt: skip
    rows = tmp_path / "tp.jsonl"
    rows.write_text(json.dumps(cell) + "\n")
    md = fence(tmp_path / "tp.md", "steering_throughput", str(rows))
    assert run(capsys, "--write", str(md))[0] == 0
    assert table_lines(md)[1] == "| warp | 256 | cpu | 1,234 | 20.0 | 10.0 |"

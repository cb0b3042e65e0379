"""The README's results tables, regenerated from the raw rows committed under ``docs/results/``.

A results table sits between two fences, ``<!-- table: NAME rows=PATH[,PATH2] [short] -->`` and ``<!-- /table -->``;
NAME picks its generator in ``GENERATORS`` and the JSON-lines files (paths from the repository root) give its
rows. ``short`` (the README and the guides) captions the table with a link to its rows file instead of the full
provenance line (commits, machine, load average), which the experiment pages keep.
``python benchmarks/results_tables.py [--write] [FILE.md ...]`` (default: README.md and docs/**/*.md) prints a diff
per table whose text differs from what its rows give and exits 1 (``--write``: rewrites the blocks instead);
an unknown NAME, a missing rows file or a malformed row is a one-line error (exit 2). No simulation, no torch.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import sys
import textwrap
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# In a ``short`` fence: the caption that stands for every ``measured`` line (a link to the rows files).
_SHORT: ContextVar[str | None] = ContextVar("short", default=None)


class TableError(Exception):
    """A fence, rows file or row the tables cannot be drawn from (reported on one line, exit 2)."""


def bench_command() -> list[str]:
    """This process's command line as typed in the repository root (``python benchmarks/NAME.py ...``)."""
    script = Path(sys.argv[0]).resolve()
    shown = script.relative_to(ROOT) if script.is_relative_to(ROOT) else script
    return ["python", str(shown), *sys.argv[1:]]


def append_row(path: str | Path, row: dict[str, Any], command: list[str] | None = None) -> dict[str, Any]:
    """Append ``row`` and its provenance (command, commit, machine, load) to a JSON-lines rows file."""
    from robosteer.scripts.common import provenance

    full = {**row, **provenance(command or bench_command(), ROOT)}
    path = Path(path) if Path(path).is_absolute() else ROOT / path
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(full) + "\n")
    return full


# ---------------------------------------------------------------- rows and formatting


class Row(dict):
    """One JSON line of a rows file; a key it lacks is a one-line error naming the file and line."""

    source = "?"

    def __missing__(self, key: str) -> Any:
        raise TableError(f"{self.source}: row has no key {key!r}")


def load_rows(paths: list[str]) -> list[Row]:
    """The rows of the JSON-lines files ``paths`` (relative to the repository root), in file order."""
    rows = []
    for name in paths:
        path = Path(name) if Path(name).is_absolute() else ROOT / name
        if not path.is_file():
            raise TableError(f"rows file {name} not found")
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line, object_hook=Row)
            except json.JSONDecodeError as e:
                raise TableError(f"{name}:{i}: malformed row: {e}") from None
            if not isinstance(row, Row):
                raise TableError(f"{name}:{i}: malformed row: not a JSON object")
            rows.append(_tag(row, f"{name}:{i}"))
    return rows


def _tag(value: Any, source: str) -> Any:
    """Mark every object of a row (nested ones too: ``history`` entries) with the row's file and line."""
    if isinstance(value, Row):
        value.source = source
    for v in value.values() if isinstance(value, dict) else value if isinstance(value, list) else ():
        _tag(v, source)
    return value


def last_per(rows: list[Row], key: Callable[[Row], Any]) -> dict[Any, Row]:
    """The last row of each key (a re-run supersedes the earlier row), keys in order of first appearance."""
    out: dict[Any, Row] = {}
    for r in rows:
        out[key(r)] = r
    return out


def table(columns: list[str], body: list[list[Any]]) -> str:
    """The one markdown formatter (``scripts.common.format_table``: floats as 3 significant digits)."""
    from robosteer.scripts.common import format_table

    keys = [str(i) for i in range(len(columns))]  # positional: two columns may share a title
    _, rest = format_table([dict(zip(keys, cells)) for cells in body], keys).split("\n", 1)
    return "| " + " | ".join(columns) + " |\n" + rest


def measured(rows: list[Row]) -> str:
    """Caption of a benchmark's rows: its commits, machine and the range of the load average it ran at."""
    if (short := _SHORT.get()) is not None:
        return short
    loads = [float(r["load"]) for r in rows]
    commits = ", ".join(dict.fromkeys(str(r["commit"]) for r in rows))
    machines = ", ".join(dict.fromkeys(str(r["machine"]) for r in rows))
    return f"Rows: commit {commits}, {machines}, 1-minute load average {span(loads, '.1f')}."


def span(xs: list[float], fmt: str) -> str:
    """``lo–hi`` of ``xs`` in ``fmt``, one figure when both read the same."""
    lo, hi = f"{min(xs):{fmt}}", f"{max(xs):{fmt}}"
    return lo if lo == hi else f"{lo}–{hi}"


def prose(text: str) -> str:
    """A generated sentence, wrapped at the README's 110 columns."""
    return textwrap.fill(text, 110, break_long_words=False, break_on_hyphens=False)


def mean(xs: list[float]) -> float:
    """Arithmetic mean."""
    return sum(xs) / len(xs)


def num(x: float) -> str:
    """A rate with 3 decimals less one trailing zero (0.735, 0.75, 0.70)."""
    s = f"{x:.3f}"
    return s[:-1] if s.endswith("0") else s


def _opt(x: float | None, fmt: str) -> str:
    """``x`` formatted, or — where a row lacks it (written before it was recorded, or nothing to average)."""
    return "—" if x is None else fmt.format(x)


def steps_k(steps: float) -> str:
    """Env steps in thousands: ``15k``."""
    return f"{steps / 1000:.0f}k"


# ---------------------------------------------------------------- generators


def expo_vs_rlpd(rows: list[Row]) -> str:
    """EXPO vs RLPD per task: env steps (wall), final and best evals, env steps to the first eval ≥ 0.8 / 0.9."""
    labels = {"expo_o2o": "EXPO, `expo_o2o`", "rlpd_single": "RLPD, single-step (`rlpd_single`)"}
    common = set.intersection(*(set(r["overrides"]) for r in rows))
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    top = {t: max(r["success_rate"] for r in rows if r["task"] == t) for t in tasks}
    body = []
    for r in sorted(rows, key=lambda r: (tasks.index(r["task"]), methods.index(r["method"]), r["seed"])):
        end = r["history"][-1]["env_steps"]
        reach = []
        for x in (0.8, 0.9):
            s = next((h["env_steps"] for h in r["history"] if h["success_rate"] >= x - 1e-9), None)
            reach.append(f"{s:,.0f}" if s is not None else f"> {end:,.0f}")
        final = f"{r['success_rate']:.2f}"
        body.append(
            [
                r["task"],
                labels.get(r["method"], f"`{r['method']}`")
                + "".join(f" + `{o}`" for o in r["overrides"] if o not in common),
                f"{r['env_steps']:,} ({r['wall_s'] / 60:.0f} min)",
                f"**{final}**" if r["success_rate"] == top[r["task"]] else final,
                f"{max(h['success_rate'] for h in r['history']):.2f}",
                " / ".join(reach),
            ]
        )
    columns = ["task", "run", "env steps (wall)", "final, 100 unseen episodes", "best periodic eval"]
    return table([*columns, "first eval ≥ 0.8 / ≥ 0.9"], body)


TASK_ORDER = [
    "reach-v3",
    "push-v3",
    "pick-place-v3",
    "drawer-open-v3",
    "button-press-topdown-v3",
    "peg-insert-side-v3",
    "assembly-v3",
]
POLICIES = {"diffusion": "DP (DDIM-10)", "flow": "flow (10 Euler)", "streaming": "SDP"}


def data_scaling(rows: list[Row]) -> str:
    """Success on 100 unseen episodes per task, policy and number of demos; one figure per training seed."""
    cells = last_per(rows, lambda r: (r["task"], r["policy"], r["demos"], r["seed"]))
    order = {t: i for i, t in enumerate(TASK_ORDER)}
    tasks = sorted({k[0] for k in cells}, key=lambda t: (order.get(t, len(order)), t))
    demos = sorted({k[2] for k in cells})
    body = []
    for task in tasks:
        for policy, label in POLICIES.items():
            per_n = [
                " / ".join(
                    f"{r['success_rate']:.2f}" for k, r in sorted(cells.items()) if k[:3] == (task, policy, n)
                )
                for n in demos
            ]
            if any(per_n):
                body.append([task, label, *per_n])
    return table(["task", "policy", *(f"{n} demos" for n in demos)], body)


CRITICS = {
    "calql-2alpha": "Cal-QL before the loss-weight fix (CQL term 2α; to be re-measured)",
    "calql": "Cal-QL as the reference weights it (CQL term α, no LayerNorm, 2000-step warm-up)",
}


def vgps_cells(rows: list[Row], episodes: int) -> tuple[Callable[..., list[float]], str]:
    """Per-seed MT10 means of the V-GPS rows with ``episodes`` per task (a lookup), and the critic caption."""
    cells: dict[tuple[Any, ...], dict[int, dict[str, float]]] = {}
    versions: dict[str, None] = {}
    for r in rows:
        if r["episodes"] == episodes and r["temperature"] == 0.0:
            versions[r["critic_version"]] = None
            key = (r["policy"], r["k"], r.get("replan_every"), r["sample_levels"])
            cells.setdefault(key, {}).setdefault(r["seed"], {})[r["task"]] = r["success_rate"]
    if not cells:
        raise TableError(f"no V-GPS rows with {episodes} episodes per task")
    unknown = [v for v in versions if v not in CRITICS]
    if unknown:
        raise TableError(f"unknown critic_version {unknown[0]!r} (known: {', '.join(CRITICS)})")
    ntasks = max(len(per_task) for per_seed in cells.values() for per_task in per_seed.values())

    def seeds(policy: str, k: int, every: int | None = None, levels: str | None = None) -> list[float]:
        per_seed = cells.get((policy, k, every, levels), {})
        out = [mean(list(t.values())) for _, t in sorted(per_seed.items()) if len(t) == ntasks]
        if not out:
            raise TableError(f"no complete V-GPS cell {policy}, K = {k}, re-plan {every}, levels {levels}")
        return out

    return seeds, "Critic: " + "; ".join(CRITICS[v] for v in versions) + "."


# (label, policy, SDP candidate levels, note replacing the per-seed K = 1 figures, current: bold)
VGPS_LINES = [
    ("DP (DDIM-10)", "diffusion", None, None, True),
    ("flow (10 Euler steps)", "flow", None, None, True),
    ("SDP (K = 1: its streaming `act`)", "streaming", "streaming", None, True),
    ("SDP, constant-level samples (earlier)", "streaming", "constant", "the same `act`", False),
]
# the 50-episode table's labels
VGPS_SHORT = {
    ("diffusion", True): "DP",
    ("flow", True): "flow",
    ("streaming", True): "SDP (streaming `act`; streaming samples)",
}


def vgps_mt10(rows: list[Row]) -> str:
    """V-GPS MT10 grid, 20 episodes per task: success per generalist and K, Ta = 8 and re-planning every 4."""
    seeds, caption = vgps_cells(rows, 20)
    body = []
    for label, policy, levels, note, current in VGPS_LINES:
        act = seeds(policy, 1)
        cells = [label, f"{mean(act):.3f} ({note or ', '.join(map(num, act))})"]
        cells += [f"{mean(seeds(policy, k, None, levels)):.3f}" for k in (4, 16, 32)]
        for k in (1, 4, 16, 32):
            xs = seeds(policy, k, 4, levels)
            cell = f"**{mean(xs):.3f}**" if k == 32 and current else f"{mean(xs):.3f}"
            cell += f" ({', '.join(map(num, xs))})" if k in (1, 32) else ""
            cell += ", fresh samples" if k == 1 and policy == "streaming" and current else ""
            cells.append(cell)
        body.append(cells)
    columns = ["generalist", "K = 1 (no V-GPS, Ta = 8)", "K = 4", "K = 16", "K = 32"]
    return caption + "\n\n" + table([*columns, "re-plan every 4: K = 1", "K = 4", "K = 16", "K = 32"], body)


def vgps_mt10_50ep(rows: list[Row]) -> str:
    """V-GPS headline cells, 50 episodes per task: alone vs K = 32 re-planning every 4, gain, failure rate."""
    seeds, caption = vgps_cells(rows, 50)
    body = []
    for label, policy, levels, _, current in VGPS_LINES:
        alone, steered = seeds(policy, 1), seeds(policy, 32, 4, levels)
        gains = [100 * (b - a) for a, b in zip(alone, steered)]
        gain = f"{100 * (mean(steered) - mean(alone)):+.1f}"
        fail = (1 - mean(alone), 1 - mean(steered))
        body.append(
            [
                VGPS_SHORT.get((policy, current), label),
                f"{mean(alone):.3f} ({'the same' if not current else ', '.join(f'{x:.3f}' for x in alone)})",
                f"{mean(steered):.3f} ({', '.join(f'{x:.3f}' for x in steered)})",
                f"{f'**{gain}**' if current else gain} ({min(gains):+.1f} to {max(gains):+.1f})",
                f"{fail[0]:.3f} → {fail[1]:.3f} ({100 * (fail[1] / fail[0] - 1):+.0f} %)".replace("-", "−"),
            ]
        )
    columns = [
        "generalist",
        "alone (K = 1, Ta = 8)",
        "V-GPS, K = 32, re-plan every 4",
        "gain",
        "failure rate",
    ]
    return caption + "\n\n" + table(columns, body)


def vgps_critic_fix(rows: list[Row]) -> str:
    """V-GPS headline cells with the fixed Cal-QL beside the 2α critic, per (generalist, seed) measured."""
    cells: dict[tuple[Any, ...], dict[str, float]] = {}
    for r in rows:
        steered = r["k"] == 32 and r.get("replan_every") == 4 and r["sample_levels"] in (None, "streaming")
        if r["episodes"] == 50 and r["temperature"] == 0.0 and (r["k"] == 1 or steered):
            key = (r["critic_version"] if steered else "-", r["policy"], r["seed"], r["k"])
            cells.setdefault(key, {})[r["task"]] = r["success_rate"]
    ntasks = max(len(t) for t in cells.values())
    body = []
    for (version, policy, seed, _), fixed in sorted(cells.items()):
        if version != "calql" or len(fixed) < ntasks:
            continue
        alone, old = cells[("-", policy, seed, 1)], cells[("calql-2alpha", policy, seed, 32)]
        worst = min(fixed, key=lambda t: fixed[t] - old[t])
        body.append(
            [
                f"{VGPS_SHORT[(policy, True)]}, seed {seed}",
                f"{mean(list(alone.values())):.3f}",
                f"{mean(list(old.values())):.3f}",
                f"**{mean(list(fixed.values())):.3f}**",
                f"{100 * (mean(list(fixed.values())) - mean(list(alone.values()))):+.1f}",
                f"{worst} {old[worst]:.2f} → {fixed[worst]:.2f}",
            ]
        )
    columns = ["generalist", "alone (K = 1)", "K = 32 every 4, 2α critic", "fixed critic", "gain"]
    columns.append("largest drop")
    corr = {r["critic_q_mc_corr"] for r in rows if r["critic_version"] == "calql" and "critic_q_mc_corr" in r}
    caption = f"{CRITICS['calql']}; its Q correlates {', '.join(f'{c:.2f}' for c in sorted(corr))} with the "
    return caption + "Monte-Carlo return on its data.\n\n" + table(columns, body)


def dsrl_weak_base(rows: list[Row]) -> str:
    """DSRL-NA on the weak bases per task and seed: base, best periodic eval, final and `best` actors."""
    runs = sorted(
        last_per([r for r in rows if r["variant"] == "na"], lambda r: (r["task"], r["seed"])).values(),
        key=lambda r: (r["task"], r["seed"]),
    )
    if not runs:
        raise TableError("no DSRL rows with variant 'na'")
    averaged = any("trained_actor_success" in r for r in runs)
    # benchmark --unseen-every: the acting actor at the run's kept checkpoints
    kept = any(r.get("unseen_history") for r in runs)
    bold = {}  # per task, the actor whose mean over seeds is higher (final on a tie)
    for task in dict.fromkeys(r["task"] for r in runs):
        rs = [r for r in runs if r["task"] == task]
        final, best = mean([r["success_rate"] for r in rs]), mean([r["best_actor_success"] for r in rs])
        bold[task] = "best" if best > final else "final"
    body = []
    for r in runs:
        at = [
            steps_k(h["env_steps"])
            for h in r["history"]
            if abs(h["success_rate"] - r["best_periodic"]) < 1e-9
        ]
        final, best = f"{r['success_rate']:.2f}", f"{r['best_actor_success']:.2f}"
        trained = r.get("trained_actor_success")
        body.append(
            [
                r["task"],
                r["seed"],
                f"{r['base_success']:.2f}",
                f"{r['best_periodic']:.2f}" + (f" ({', '.join(at)})" if at else ""),
                f"**{final}**" if bold[r["task"]] == "final" else final,
                *([f"{trained:.2f}" if trained is not None else "—"] if averaged else []),
                *([kept_checkpoints(r.get("unseen_history"))] if kept else []),
                f"**{best}**" if bold[r["task"]] == "best" else best,
                f"{r['env_steps']:,}",
                f"{r['wall_s'] / 60:.1f}",
            ]
        )
    columns = ["task", "seed", "base, stock sampler (100 ep.)", "best periodic eval (50 ep.)"]
    if averaged:  # runs that act with the Polyak-averaged actor (dsrl.actor_tau), beside the trained one
        columns += ["final averaged actor, 100 unseen ep.", "final trained actor, same ep."]
    else:
        columns += ["final actor, 100 unseen ep."]
    columns += ["acting actor at kept checkpoints, same ep."] if kept else []
    columns += ["`best` actor, 100 unseen ep.", "env steps", "wall min"]
    return table(columns, body)


def kept_checkpoints(history: list[dict] | None) -> str:
    """``0.91 (30k), 0.80 (40k)``: a run's kept checkpoints on the unseen episodes (``—``: none kept)."""
    if not history:
        return "—"
    return ", ".join(f"{h['success_rate']:.2f} ({steps_k(h['env_steps'])})" for h in history)


def changed(r: Row) -> str:
    """A run's ``robosteer-steer`` overrides, less the benchmark's own cadence (which says nothing about the method)."""
    own = [o for o in r["overrides"] if not o.startswith(("run.eval_every=", "run.checkpoint_every="))]
    return " ".join(f"`{o}`" for o in own) or "defaults"


def dsrl_settings(rows: list[Row]) -> str:
    """DSRL-NA runs that differ in ``robosteer-steer`` overrides: one line per task, seed, overrides and budget."""

    def key(r: Row) -> tuple:
        return (r["task"], changed(r), r["seed"], round(r["env_steps"], -4))

    runs = sorted(last_per([r for r in rows if r["variant"] == "na"], key).values(), key=key)
    if not runs:
        raise TableError("no DSRL rows with variant 'na'")
    body = [
        [
            r["task"],
            r["seed"],
            changed(r),
            f"{r['base_success']:.2f}",
            f"{r['best_periodic']:.2f}",
            f"**{r['success_rate']:.2f}**",
            f"{r['trained_actor_success']:.2f}" if "trained_actor_success" in r else "—",
            kept_checkpoints(r.get("unseen_history")),
            f"{r['best_actor_success']:.2f}",
            f"{r['env_steps']:,}",
            f"{r['wall_s'] / 60:.1f}",
        ]
        for r in runs
    ]
    columns = [
        "task",
        "seed",
        "overrides",
        "base (100 ep.)",
        "best periodic eval (50 ep.)",
        "final averaged actor, 100 unseen ep.",
        "final trained actor, same ep.",
        "acting actor at kept checkpoints, same ep.",
        "`best` actor, same ep.",
        "env steps",
        "wall min",
    ]
    return table(columns, body)


def dsrl_kept(rows: list[Row]) -> str:
    """A DSRL run's kept checkpoints acting with their mean latent and sampling (experiments/dsrl_kept.py)."""

    def key(r: Row) -> tuple:
        return (r["task"], changed(r), r["seed"])

    runs = sorted(last_per(rows, key).values(), key=key)
    if not runs:
        raise TableError("no rows of experiments/dsrl_kept.py")
    body = [
        [
            r["task"],
            r["seed"],
            changed(r),
            ", ".join(steps_k(k["env_steps"]) for k in r["kept"]),
            ", ".join(f"{k['mean_latent']:.2f}" for k in r["kept"]),
            ", ".join(f"{k['sampled']:.2f}" for k in r["kept"]),
            ", ".join(f"{k['last_critic_q']:.1f}" if "last_critic_q" in k else "—" for k in r["kept"]),
        ]
        for r in runs
    ]
    columns = ["task", "seed", "overrides", "kept checkpoints (env steps)"]
    columns += [f"mean latent ({runs[0]['episodes']} unseen ep.)", "sampled latents, same ep."]
    columns += ["the last critic's Q^A of the mean latent (replay states)"]
    return table(columns, body)


def dsrl_kept_average(rows: list[Row]) -> str:
    """Uniform averages of a DSRL run's kept acting actors beside the kept actors (experiments/dsrl_kept_average.py)."""

    def key(r: Row) -> tuple:
        return (r["task"], changed(r), r["seed"])

    runs = sorted(last_per(rows, key).values(), key=key)
    if not runs:
        raise TableError("no rows of experiments/dsrl_kept_average.py")
    starts = sorted({a["from"] for r in runs for a in r["averages"]})

    def average(r: Row, start: int) -> str:
        got = [a for a in r["averages"] if a["from"] == start]
        return f"{got[0]['success_rate']:.2f} ({got[0]['checkpoints']})" if got else "—"

    body = [
        [
            r["task"],
            r["seed"],
            changed(r),
            ", ".join(f"{k['success_rate']:.2f}" for k in r["kept"]),
            f"{r['kept'][-1]['success_rate']:.2f}",
            *(average(r, s) for s in starts),
        ]
        for r in runs
    ]
    columns = ["task", "seed", "overrides"]
    columns += [
        f"acting actor at kept checkpoints ({runs[0]['episodes']} unseen ep.)",
        "final actor, same ep.",
    ]
    columns += [f"average of the kept actors from {steps_k(s)} (how many), same ep." for s in starts]
    return table(columns, body)


def dsrl_failures(rows: list[Row]) -> str:
    """A DSRL run's kept actors' failed episodes split by grasp (experiments/dsrl_failures.py)."""

    def key(r: Row) -> tuple:
        return (r["task"], changed(r), r["seed"])

    runs = sorted(last_per(rows, key).values(), key=key)
    if not runs:
        raise TableError("no rows of experiments/dsrl_failures.py")
    body = [
        [
            r["task"],
            r["seed"],
            changed(r),
            ", ".join(steps_k(k["env_steps"]) for k in r["kept"]),
            ", ".join(f"{k['success_rate']:.2f}" for k in r["kept"]),
            ", ".join(str(k["never_grasped"]) for k in r["kept"]),
            ", ".join(str(k.get("never_grasped_reached", "—")) for k in r["kept"]),
            ", ".join(str(k["grasped"]) for k in r["kept"]),
            ", ".join(_opt(k.get("shaped_return"), "{:.1f}") for k in r["kept"]),
            ", ".join(_opt(k.get("success_length"), "{:.0f}") for k in r["kept"]),
            ", ".join(_opt(k.get("near_success"), "{:.2f}") for k in r["kept"]),
            ", ".join(_opt(k.get("rest_success"), "{:.2f}") for k in r["kept"]),
        ]
        for r in runs
    ]
    columns = ["task", "seed", "overrides", "kept checkpoints (env steps)"]
    columns += [f"success ({runs[0]['episodes']} unseen ep.)", "failures that never grasped the object"]
    columns += ["of them, the hand reached the object"]
    columns += ["failures that grasped it (dropped, or never at the goal)"]
    columns += ["shaped return per episode (the critics' reward)", "successes' mean length (env steps)"]
    columns += [
        "success where the object starts nearest the robot (the quarter of lowest y)",
        "success, the rest",
    ]
    return table(columns, body)


def dsrl_observations(r: Row) -> str:
    """ "normalised" or "raw": the observations a DSRL row's actor and critics read. Rows say it since
    1a03da3 made the base's normalised observations the default; an older row read raw ones unless its
    overrides turned normalisation on."""
    if "normalize_obs" in r:
        return "normalised" if r["normalize_obs"] else "raw"
    return "normalised" if "dsrl.normalize_obs=true" in (r.get("overrides") or []) else "raw"


def dsrl_task_screen(rows: list[Row]) -> str:
    """The plain bases screened for DSRL on any task: a few clean demos, no augmentation, 100 unseen episodes."""
    bases = last_per(
        [r for r in rows if r.get("part") == "base"], lambda r: (r["task"], json.dumps(r["base"]))
    )
    body = [
        [r["task"], r["base"]["demos"], f"{r['base']['steps']:,}", f"{r['base_success']:.2f}",
         "yes" if 0.2 <= r["base_success"] <= 0.8 else "no"]
        for r in sorted(bases.values(), key=lambda r: r["task"])
    ]  # fmt: skip
    columns = ["task", "clean demos", "training steps", "base success (100 ep.)", "in 0.2-0.8"]
    return measured(list(bases.values())) + "\n\n" + table(columns, body)


def dsrl_any_task(rows: list[Row]) -> str:
    """DSRL-NA per task and seed from an ``action_noise_std=auto`` base: plain base, σ chosen, probes, result."""
    plain = {
        r["task"]: r["base_success"] for r in rows if r.get("part") == "base" and not r["base"].get("augment")
    }
    runs = sorted(
        last_per([r for r in rows if r.get("part") != "base"], lambda r: (r["task"], r["seed"])).values(),
        key=lambda r: (r["task"], r["seed"]),
    )
    body = []
    for r in runs:
        auto = r.get("auto_noise") or {}
        probes = ", ".join(f"{p['sigma']:g}: {p['ratio']:.2f}" for p in auto.get("probes", []))
        removed = r.get("failures_removed")
        body.append(
            [
                r["task"],
                r["seed"],
                f"{plain[r['task']]:.2f}" if r["task"] in plain else "—",
                f"{auto['chosen']:g}" if auto.get("chosen") is not None else "none",
                probes or "—",
                f"{r['base_success']:.2f}",
                f"**{r['success_rate']:.2f}**",
                f"{r['success_rate'] - r['base_success']:+.2f}",
                "—" if removed is None else f"{removed:.2f}",
                kept_checkpoints(r.get("unseen_history")),
                f"{r['env_steps']:,}",
            ]
        )
    if not body:
        raise TableError("no DSRL rows from auto-augmented bases")
    columns = [
        "task", "seed", "plain base (100 ep.)", "σ chosen", "probe ratios (σ: ratio)", "auto base (100 ep.)",
        "final actor (100 unseen ep.)", "lift", "failures removed", "kept checkpoints, same ep.", "env steps",
    ]  # fmt: skip
    return measured(runs) + "\n\n" + table(columns, body)


def dsrl_clean(rows: list[Row]) -> str:
    """DSRL-NA on bases from a few clean demos, trained with action noise: steerability, base and final actors."""

    def key(r: Row) -> tuple:  # a run extended to a larger budget keeps its shorter row beside the longer
        b = r["base"]
        return (
            r["task"],
            b["demos"],
            b.get("augment", 0),
            b["steps"],
            dsrl_observations(r),
            r["seed"],
            round(r["env_steps"], -4),
        )

    runs = sorted(last_per(rows, key).values(), key=key)
    if not runs:
        raise TableError("no DSRL rows from clean-demo bases")
    body = []
    for r in runs:
        b, check = r["base"], r.get("steerability") or {}
        recipe = (
            f"{b['demos']} clean demos, {b['steps'] // 1000}k steps, action_noise_std={b.get('augment', 0)}"
        )
        body.append(
            [
                r["task"],
                r["seed"],
                recipe,
                dsrl_observations(r),
                f"{check['ratio']:.2f} ({check['verdict']})" if check else "—",
                f"{r['base_success']:.2f}",
                f"{r['best_periodic']:.2f}",
                f"**{r['success_rate']:.2f}**",
                f"{r['success_rate'] - r['base_success']:+.2f}",
                f"{r['trained_actor_success']:.2f}" if r.get("trained_actor_success") is not None else "—",
                kept_checkpoints(r.get("unseen_history")),
                f"{r['best_actor_success']:.2f}",
                f"{r['env_steps']:,}",
                f"{r['wall_s'] / 60:.1f}",
            ]
        )
    columns = [
        "task",
        "seed",
        "base",
        "actor and critics read",
        "steerability ratio",
        "base, stock sampler (100 ep.)",
    ]
    columns += ["best periodic eval (50 ep.)", "final averaged actor, 100 unseen ep.", "lift"]
    columns += ["final trained actor, same ep.", "acting actor at kept checkpoints, same ep.", "`best` actor"]
    columns += ["env steps", "wall min"]
    return measured(runs) + "\n\n" + table(columns, body)


def dsrl_baselines(rows: list[Row]) -> str:
    """DSRL-SAC and SAC from scratch beside DSRL-NA's mean, per task, on the same weak bases and budget."""
    na = [r for r in rows if r["variant"] == "na"]
    others = sorted(
        last_per(
            [r for r in rows if r["variant"] != "na"], lambda r: (r["task"], r["variant"], r["seed"])
        ).values(),
        key=lambda r: (r["task"], r["variant"], r["seed"]),
    )
    if not others:
        raise TableError("no DSRL rows with variant 'sac' or 'scratch'")
    names = {"sac": "DSRL-SAC", "scratch": "SAC from scratch"}
    body = []
    for r in others:
        ref = [x["success_rate"] for x in na if x["task"] == r["task"]]
        body.append(
            [
                r["task"],
                names.get(r["variant"], r["variant"]),
                r["seed"],
                f"{r['base_success']:.2f}" if r["variant"] != "scratch" else "—",
                f"{r['best_periodic']:.2f}",
                f"**{r['success_rate']:.2f}**",
                f"{r['best_actor_success']:.2f}",
                f"{mean(ref):.2f} ({len(ref)} seeds)" if ref else "—",
                f"{r['env_steps']:,}",
                f"{r['wall_s'] / 60:.1f}",
            ]
        )
    columns = ["task", "method", "seed", "base (100 ep.)", "best periodic eval (50 ep.)"]
    columns += ["final actor, 100 unseen ep.", "`best` actor", "DSRL-NA final, mean", "env steps", "wall min"]
    return table(columns, body)


def steerability(rows: list[Row]) -> str:
    """The steerability check per base: chunk spreads over latents and states, success at fixed latents."""
    used = list(last_per(rows, lambda r: (r["task"], r["label"])).values())
    body = []
    for r in used:
        base = f"{r['base_success']:.2f} ({r['base_eval_episodes']} ep.)"
        fixed_latents = ", ".join(f"{x:.1f}" for x in r["direction_success"])
        spreads = [r["over_noise"], r["over_states"], r["ratio"]]
        body.append([r["task"], r["label"], base, *spreads, fixed_latents, r["verdict"]])
    episodes = "/".join(str(e) for e in sorted({r["direction_episodes"] for r in used}))
    fixed = f"success at {len(used[0]['direction_success'])} fixed latents ({episodes} ep. each)"
    columns = ["task", "base trained on", "base success", "std over latents", "std over states", "ratio"]
    return measured(used) + "\n\n" + table([*columns, fixed, "verdict"], body)


def collect_quality(rows: list[Row]) -> str:
    """Scripted-expert demos per task: kept / attempts, expert success, exact replay, length, collect time."""
    keys = ["kept", "attempts", "expert_success", "replay_success", "replay_max_obs_diff", "mean_length"]
    body = [
        [r["task"], *(r[k] for k in keys), r["collect_s"]]
        for r in last_per(rows, lambda r: r["task"]).values()
    ]
    columns = [
        "task",
        "kept",
        "attempts",
        "expert success",
        "replay success (kept)",
        "replay max \\|obs diff\\|",
    ]
    used = list(last_per(rows, lambda r: r["task"]).values())
    return measured(used) + "\n\n" + table([*columns, "mean length", "collect s"], body)


ENV_SPEED_CELLS = [f"{v} B={b}" for v in ("sync", "async") for b in (1, 2, 4)]


def env_speed(rows: list[Row]) -> str:
    """Env steps/s per task: raw ``mj_step`` (and its env-step equivalent) vs sync / async batched envs."""
    cells = last_per(rows, lambda r: (r["task"], r["cell"]))
    body, ratios = [], []
    for task in dict.fromkeys(k[0] for k in cells):
        raw = cells[(task, "mj_step")]
        body.append(
            [task, f"{raw['per_s']:,.0f}", f"{raw['per_s'] / raw['frame_skip']:,.0f}"]
            + [f"{cells[(task, c)]['per_s']:,.0f}" if (task, c) in cells else "" for c in ENV_SPEED_CELLS]
        )
        ratios.append(raw["per_s"] / raw["frame_skip"] / cells[(task, "sync B=1")]["per_s"])
    return (
        f"{measured(list(cells.values()))}\n\n"
        f"{table(['task', 'mj_step/s', '= env steps/s (raw)', *ENV_SPEED_CELLS], body)}\n\n"
        + prose(
            f"Raw physics runs {span(ratios, '.0f')}× the env steps/s of sync B=1: Meta-World's "
            "Python task code (reward, observation, site bookkeeping) costs most of an env step."
        )
    )


def render_speed(rows: list[Row]) -> str:
    """Images/s of the tuned vs default renderer per image size, and env steps/s with image observations."""
    cells = last_per(rows, lambda r: (r["size"], r["cell"]))
    body = []
    for size in sorted({k[0] for k in cells}):
        tuned, default = (cells[(size, f"{c} images/s")]["per_s"] for c in ("tuned", "default"))
        env = cells[(size, "env steps/s with image obs")]["per_s"]
        body.append([size, f"{tuned:,.0f}", f"{default:,.1f}", f"{tuned / default:.1f}x", f"{env:,.0f}"])
    columns = ["size px", "tuned images/s", "default images/s", "speed-up", "env steps/s with image obs"]
    return measured(list(cells.values())) + "\n\n" + table(columns, body)


def metaworld_mujoco4(rows: list[Row]) -> str:
    """Meta-World 3.1.1's recorded episodes replayed under each mujoco: bitwise, or where and by how much not."""
    cells = last_per(rows, lambda r: (r["mujoco"], r["patched_welds"], r["dataset"]))
    body = []
    for (version, patched, _), r in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        setup = f"mujoco {version}" + (", weld reset fitted to 4.0" if patched else "")
        if "error" in r:
            body.append([setup, Path(r["dataset"]).parent.name, "—", "—", "—", "—", f"fails: {r['error']}"])
            continue
        first = "—" if r["first_differing_step_min"] is None else str(r["first_differing_step_min"])
        body.append(
            [
                setup,
                r["task"],
                f"{r['bitwise_episodes']} / {r['episodes']}",
                first,
                f"{r['max_abs_reset_state_diff']:.2g}",
                f"{r['max_abs_state_diff']:.2g}",
                f"{r['success_agrees']} / {r['episodes']}",
            ]
        )
    columns = ["replayed under", "task", "bitwise episodes", "first differing step", "max reset diff",
               "max state diff", "success agrees"]  # fmt: skip
    return measured(list(cells.values())) + "\n\n" + table(columns, body)


def steering_throughput(rows: list[Row]) -> str:
    """DSRL-NA's loop per sim and batch: acting-only and learning env steps/s, and updates/s."""
    cells = last_per(rows, lambda r: (r["sim"], r["num_envs"], r["device"], r["utd"]))
    body = [
        [r["sim"], r["num_envs"], r["device"], f"{r['acting_env_steps_per_s']:,.0f}",
         f"{r['learning_env_steps_per_s']:,.1f}", f"{r['updates_per_s']:,.1f}"]
        for _, r in sorted(cells.items(), key=lambda kv: (kv[0][0] != "metaworld", kv[0][1]))
    ]  # fmt: skip
    columns = ["sim", "envs", "device", "env steps/s, acting only", "env steps/s, learning", "updates/s"]
    return measured(list(cells.values())) + "\n\n" + table(columns, body)


def warp_experts(rows: list[Row]) -> str:
    """Meta-World's scripted experts on each MuJoCo Warp port and on CPU Meta-World (success, Wilson 95%)."""
    last = last_per(rows, lambda r: (r["task"], r["episodes"], r["warp_device"]))
    order = list(dict.fromkeys(r["task"] for r in rows))  # the benchmark's order (sim.backends.WARP_TASKS)

    def ci(c: list[float]) -> str:
        return f"[{c[0]:.2f}, {c[1]:.2f}]"

    body = [
        [r["task"], r["episodes"], f"{r['warp_success']:.2f} {ci(r['warp_ci95'])}",
         f"{r['metaworld_success']:.2f} {ci(r['metaworld_ci95'])}", f"{r['gap_points']:+.0f}",
         f"{r['warp_mean_episode_length']:.0f} / {r['metaworld_mean_episode_length']:.0f}"]
        for _, r in sorted(last.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1]))
    ]  # fmt: skip
    columns = ["task", "episodes", "sim=warp (95% CI)", "sim=metaworld (95% CI)", "gap (points)",
               "mean episode length, warp / metaworld"]  # fmt: skip
    return measured(list(last.values())) + "\n\n" + table(columns, body)


def warp_mt10(rows: list[Row]) -> str:
    """One MT10 generalist, plain (K = 1) and with V-GPS, per task on MuJoCo Warp and on CPU Meta-World."""
    last = last_per(rows, lambda r: (r["checkpoint"], r["episodes"], r["task"], r["samples"]))
    order = list(dict.fromkeys(r["task"] for r in rows))  # the benchmark's order (MT10)
    ks = sorted({r["samples"] for r in last.values()})
    by_task = {t: {r["samples"]: r for r in last.values() if r["task"] == t} for t in order}

    def cells(per_k: dict[int, Row]) -> list[str]:
        out = []
        for k in ks:
            r = per_k.get(k)
            out += [f"{r['warp_success']:.2f}", f"{r['metaworld_success']:.2f}"] if r else ["—", "—"]
        return out

    body = [[t, *cells(by_task[t])] for t in order if by_task[t]]
    means = []
    for k in ks:
        got = [by_task[t][k] for t in order if k in by_task[t]]
        means += [
            f"**{sum(r[s] for r in got) / len(got):.3f}**" for s in ("warp_success", "metaworld_success")
        ]
    body.append([f"mean of {len(body)} tasks", *means])
    columns = ["task"]
    for k in ks:
        name = "generalist" if k == 1 else f"V-GPS K = {k}"
        columns += [f"{name}, sim=warp", f"{name}, sim=metaworld"]
    return measured(list(last.values())) + "\n\n" + table(columns, body)


def warp_steering(rows: list[Row]) -> str:
    """DSRL-NA steered on MuJoCo Warp per num_envs and on CPU Meta-World, all scored in CPU Meta-World."""
    from robosteer.scripts.steer import lift  # the lift and failures removed robosteer-steer reports

    warp = last_per(
        [r for r in rows if r.get("sim") == "warp"], lambda r: (r["task"], r["num_envs"], r["seed"])
    )
    cpu = last_per(
        [r for r in rows if "sim" not in r and r["task"] == "push-v3" and r["env_steps"] >= 100_000],
        lambda r: (r["task"], r["seed"]),
    )  # the README's sim=metaworld runs (dsrl_actor_avg_100k.jsonl): num_envs=4

    def line(r: Row, steered_on: str, envs: int, kept: str, unchanged: str) -> list[Any]:
        gain = lift(r["base_success"], r["success_rate"])
        return [r["task"], steered_on, envs, r["seed"], f"{r['base_success']:.2f}", kept,
                f"**{r['success_rate']:.2f}**", f"{gain['lift']:+.2f}", f"{gain['failures_removed']:.0%}",
                unchanged, f"{r['env_steps']:,}", f"{r['wall_s'] / 60:.0f}"]  # fmt: skip

    body = [
        line(r, f"warp ({r['device']})", r["num_envs"], kept_checkpoints(r["unseen_history"]),
             "yes" if r["base_unchanged"] else "**no**")
        for _, r in sorted(warp.items(), key=lambda kv: (kv[0][0], -kv[0][1], kv[0][2]))
    ] + [line(r, "metaworld", 4, "—", "yes") for _, r in sorted(cpu.items())]  # fmt: skip
    columns = ["task", "steered on", "envs", "seed", "base", "kept actors (env steps: success)", "final actor",
               "lift", "failures removed", "base byte-identical", "env steps", "wall min"]  # fmt: skip
    return measured(list(warp.values())) + "\n\n" + table(columns, body)


def inference_latency(rows: list[Row]) -> str:
    """Batch-1 latency per chunk and control step of each sampler beside its bare-denoiser floor (MLP)."""
    cells = last_per(rows, lambda r: (r["backbone"], r["method"]))
    body = []
    for (backbone, method), r in cells.items():
        if backbone != "mlp":
            continue
        body.append(
            [
                method,
                r["denoiser_calls"],
                f"{r['chunk_ms_min']:.2f} / {r['chunk_ms_med']:.2f}",
                f"{r['floor_ms_min']:.2f} / {r['floor_ms_med']:.2f}",
                f"{r['chunk_ms_med'] / r['floor_ms_med']:.2f}",
                f"{r['chunk_ms_min'] / r['ta']:.3f} / {r['chunk_ms_med'] / r['ta']:.3f} (Ta={r['ta']})",
                f"{r['act_step_ms_min']:.3f} / {r['act_step_ms_med']:.3f}",
            ]
        )
    columns = ["method", "denoiser calls / chunk", "ms / chunk (min / med)", "floor ms (min / med)"]
    columns += [
        "ratio (med / med)",
        "ms / control step (chunk / Ta)",
        "act() ms / step, measured (min / med)",
    ]
    text = measured([r for k, r in cells.items() if k[0] == "mlp"]) + "\n\n" + table(columns, body)
    unet = [r for k, r in cells.items() if k[0] == "unet"]
    if unet:
        ratios = [r["chunk_ms_med"] / r["floor_ms_med"] for r in unet]
        ddim = next((r for r in unet if r["method"] == "DP-DDIM-10"), unet[0])
        text += "\n\n" + prose(
            f"With `--backbone unet` ({unet[0]['denoiser_params'] / 1e6:.1f}M params) the ratios are "
            f"{span(ratios, '.2f')} ({ddim['method']}: {ddim['chunk_ms_med']:.0f} ms per chunk). "
            + measured(unet)
        )
    return text


# The measured settings of a lerobot_compare row: a re-run of the same ones supersedes the earlier row
# (the budget, --warmup/--steps/--reps/--rounds, does not make a new configuration).
LEROBOT_CONFIG = (
    "down_dims",
    "kernel_size",
    "n_groups",
    "step_embed_dim",
    "n_obs_steps",
    "horizon",
    "n_action_steps",
    "train_timesteps",
    "inference_steps",
    "batch_size",
)
LEROBOT_LAST_COLUMN = (
    "Last column: the row's median value, robosteer / LeRobot (samples/s: >1 = ours faster; ms: <1 = ours "
    "faster)."
)


def lerobot_compare_caption(r: dict[str, Any]) -> str:
    """One run's settings in a sentence, so a reader can tell two runs' tables apart (the script prints it too)."""
    o, lr = r["robosteer"], r["lerobot"]
    return (
        f"robosteer (torch {o['torch']}) vs LeRobot {lr['version']} (torch {lr['torch']}) `DiffusionPolicy`, "
        f"{r['threads']} thread each, {r['rounds']} alternating round{'s' * (r['rounds'] != 1)}. UNet down_dims "
        f"{'/'.join(map(str, r['down_dims']))}, kernel {r['kernel_size']}, {r['n_groups']} groups, step "
        f"embedding {r['step_embed_dim']}, FiLM scale; To={r['n_obs_steps']}, Tp={r['horizon']}, "
        f"Ta={r['n_action_steps']}; DDIM {r['train_timesteps']} train / {r['inference_steps']} inference steps, "
        f"epsilon prediction; batch {r['batch_size']}, {r['warmup']} warm-up + {r['steps']} timed steps and "
        f"{r['reps']} inference timings per kind, per round."
    )


def lerobot_compare_table(r: dict[str, Any]) -> str:
    """One run's side-by-side table from its row (the script prints the same, so the docs' copy cannot drift)."""
    o, lr, b = r["robosteer"], r["lerobot"], r["batch_size"]

    def ms(side: dict[str, Any], kind: str) -> str:
        return f"{side[f'{kind}_ms_min']:.2f} / {side[f'{kind}_ms_med']:.2f}"

    def sps(side: dict[str, Any]) -> str:
        return f"{b / side['train_ms_min'] * 1e3:,.0f} / {b / side['train_ms_med'] * 1e3:,.0f}"

    body = [
        [label, f"{o[k]:,}", f"{lr[k]:,}", f"{o[k] / lr[k]:.3f}"]
        for label, k in (
            ("parameters, whole policy", "params_total"),
            ("parameters, denoiser (UNet)", "params_denoiser"),
        )
    ]
    body.append(
        [
            "train samples/s (best / median step)",
            sps(o),
            sps(lr),
            f"{lr['train_ms_med'] / o['train_ms_med']:.2f}",  # samples/s: the inverse of the ms ratio
        ]
    )
    timings = {
        "train": "train ms / step (min / median)",
        "chunk": "chunk ms, batch 1: `sample` / `predict_action_chunk` (min / median)",
        "refill": "refill ms, batch 1: `act` / pre + `select_action` + post (min / median)",
        "floor": f"floor: {r['inference_steps']} bare UNet calls (min / median)",
    }
    body += [
        [label, ms(o, k), ms(lr, k), f"{o[f'{k}_ms_med'] / lr[f'{k}_ms_med']:.2f}"]
        for k, label in timings.items()
    ]
    body.append(
        ["chunk / floor (median)", *(f"{s['chunk_ms_med'] / s['floor_ms_med']:.2f}" for s in (o, lr)), ""]
    )
    return table(["metric", "robosteer", "LeRobot", "robosteer / LeRobot"], body)


def lerobot_compare(rows: list[Row]) -> str:
    """Our Diffusion Policy beside LeRobot's, same UNet and batches: parameters, training and batch-1 latency."""
    runs = list(last_per(rows, lambda r: tuple(json.dumps(r[k]) for k in LEROBOT_CONFIG)).values())
    if not runs:
        raise TableError("no rows of benchmarks/lerobot_compare.py")
    blocks = [prose(lerobot_compare_caption(r)) + "\n\n" + lerobot_compare_table(r) for r in runs]
    return "\n\n".join([measured(runs), *blocks, prose(LEROBOT_LAST_COLUMN)])


def deploy_latency(rows: list[Row]) -> str:
    """Twin success (mean steps) per injected latency: sync, async with and without inpainting."""
    ref = rows[-1]  # the cells of the last row's checkpoint, rate and episodes
    same = [
        r
        for r in rows
        if (r["checkpoint"], r["rate_hz"], r["episodes"], r["blend"])
        == (ref["checkpoint"], ref["rate_hz"], ref["episodes"], ref["blend"])
    ]
    cells = last_per(same, lambda r: (r["latency_ms"], r["mode"], r["inpaint"]))

    def cell(latency: float, mode: str, inpaint: str) -> str:
        r = cells.get((latency, mode, inpaint))
        return f"{r['success_rate']:.2f} ({r['mean_steps']:.0f} steps)" if r else ""

    body = [
        [f"{lat:.0f} ms", cell(lat, "sync", "true"), cell(lat, "async", "true"), cell(lat, "async", "false")]
        for lat in sorted({k[0] for k in cells})
    ]
    caption = prose(
        f"{measured(list(cells.values()))} {ref['episodes']} episodes per cell at {ref['rate_hz']:g} Hz. `robosteer-eval` of the same checkpoint (`{ref['checkpoint']}`): "
        f"{ref['reference_success']:.2f} on {ref['reference_episodes']} episodes. Mean policy inference "
        f"{span([r['infer_ms'] for r in cells.values()], '.0f')} ms per chunk, against a "
        f"{1000 / ref['rate_hz']:.1f} ms control period."
    )
    columns = [
        "injected round-trip latency",
        "sync",
        "async (`inpaint=true`, default)",
        "async, no inpainting",
    ]
    return caption + "\n\n" + table(columns, body)


def server_latency(rows: list[Row]) -> str:
    """Policy-server round trip on loopback vs the bare in-process call (the floor): p50 / p99 / min ms."""
    cells = last_per(rows, lambda r: r["path"])
    body = [[p, f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}", f"{r['min_ms']:.2f}"] for p, r in cells.items()]
    last = rows[-1]
    caption = prose(
        f"{measured(list(cells.values()))} Checkpoint `{last['checkpoint']}`, {last['requests']} requests per path."
    )
    return caption + "\n\n" + table(["path", "p50 ms", "p99 ms", "min ms"], body)


def train_precision(rows: list[Row]) -> str:
    """Training samples/s of bf16 autocast and torch.compile beside fp32 eager (the floor), per device."""
    cells = last_per(rows, lambda r: (r["device"], r["setting"]))
    body = []
    for (device, setting), r in cells.items():
        floor = cells.get((device, "fp32 eager"))
        ratio = f"{r['samples_per_s'] / floor['samples_per_s']:.2f}×" if floor else "n/a"
        success = "–" if r["success_rate"] is None else num(r["success_rate"])
        body.append(
            [
                setting,
                device,
                r["steps"],
                f"{r['samples_per_s']:.0f}",
                ratio,
                f"{r['final_loss']:.4f}",
                success,
            ]
        )
    last = rows[-1]
    caption = prose(
        f"{measured(list(cells.values()))} Diffusion Policy on {last['task']} demos, batch {last['batch_size']}, "
        f"seed {last['seed']}; samples/s includes compile's first, compiling steps."
    )
    columns = ["setting", "device", "steps", "samples/s", "vs fp32 eager", "final loss", "success"]
    return caption + "\n\n" + table(columns, body)


def pixels_encoders(rows: list[Row]) -> str:
    """Training samples/s of Diffusion Policy per image encoder, beside the same step without images."""
    cells = last_per([r for r in rows if r["part"] == "encoders"], lambda r: r["encoder"])
    floor = next(iter(cells.values()))
    body = [
        [
            name,
            f"{r['encoder_params'] / 1e6:.2f}M",
            f"{r['samples_per_s']:.0f}",
            f"{r['samples_per_s'] / floor['samples_per_s']:.2f}×",
        ]
        for name, r in cells.items()
    ]
    caption = prose(
        f"{measured(list(cells.values()))} One training step (forward, backward, AdamW) at batch "
        f"{floor['batch_size']}, To=2, one 84 px camera cropped to 76 px, {floor['threads']} torch threads."
    )
    return caption + "\n\n" + table(["encoder", "encoder params", "samples/s", "vs no images"], body)


def pixels_env(rows: list[Row]) -> str:
    """Env steps/s of one env with state only and with proprio + one rendered camera, per render mode."""
    cells = last_per(
        [r for r in rows if r["part"] == "env"],
        lambda r: (
            r["obs"],
            r["image_size"],
            r.get("cameras", int(r["obs"] != "state")),
            r["chunk"],
            r["render"],
        ),
    )
    body = [
        [obs, size or "–", cams or "–", chunk, render.replace("_", " "), f"{r['env_steps_per_s']:,.0f}"]
        for (obs, size, cams, chunk, render), r in cells.items()
    ]
    caption = prose(
        f"{measured(list(cells.values()))} {next(iter(cells.values()))['task']}, one env, camera corner (2 cameras: "
        "corner and gripperPOV); chunk 8: one env step executes 8 actions and returns To=2 windows, as in the "
        "steering loop."
    )
    columns = ["obs", "image px", "cameras", "chunk", "images rendered", "env steps/s"]
    return caption + "\n\n" + table(columns, body)


def schedule(row: Row) -> int:
    """The LR schedule's length of a pixels train row (the first rows, before the key: 15,000)."""
    return int(row.get("schedule_steps", 15000))


def obs_window(row: Row) -> int:
    """A pixels train row's To: recorded, else its override, else 2 (the default before the key)."""
    given = [o.split("=", 1)[1] for o in row.get("overrides", []) if o.startswith("policy.n_obs_steps=")]
    return int(row.get("n_obs_steps", given[-1] if given else 2))


def code_list(items: Iterable[str]) -> str:
    """Command-line overrides as inline code, space-separated ("" for none)."""
    return " ".join(f"`{o}`" for o in items)


def pixels_train(rows: list[Row]) -> str:
    """Success of policies trained from pixels vs state on the same demos and wall budget."""
    cells = last_per(
        [r for r in rows if r["part"] == "train" and not r.get("collect_overrides")],
        lambda r: (
            r["task"],
            r["policy"],
            r["obs"],
            r.get("image_size", 84),
            r["seed"],
            schedule(r),
            obs_window(r),
            tuple(r.get("overrides", ())),
        ),
    )
    body = []
    for (task, policy, obs, size, seed, lr_steps, to, overrides), r in cells.items():
        split = f"{1000 * r['data_s_per_step']:.1f} / {1000 * r['update_s_per_step']:.0f}"
        body.append(
            [
                task,
                policy,
                obs,
                size,
                to,
                code_list(overrides) or "–",
                seed,
                f"{lr_steps:,}",
                r["steps"],
                r["batch_size"],
                f"{r['samples_per_s']:.0f}",
                split,
                f"{r['wall_time_s'] / 60:.0f}",
                num(r["success_rate"]),
            ]
        )
    last = next(iter(cells.values()))  # the first cell sets the caption's demos and episodes
    minutes = [r["minutes"] for r in cells.values() if r["minutes"]]
    budgets = f"{min(minutes):g}–{max(minutes):g}" if len(set(minutes)) > 1 else f"{minutes[0]:g}"
    caption = prose(
        f"{measured(list(cells.values()))} {last['demos']} demos per task (collected once with obs=pixels: the "
        f"state column trains on the same episodes), at most {budgets} minutes of training (a row with a `stop_at_step` trained exactly that many steps instead), "
        f"{last['episodes']} unseen evaluation episodes of the final EMA weights."
    )
    columns = [
        "task",
        "policy",
        "obs",
        "image px",
        "To",
        "overrides",
        "seed",
        "cosine LR over",
        "steps",
        "batch",
        "samples/s",
        "data / update ms per step",
        "wall min (train + eval)",
        "success",
    ]
    return caption + "\n\n" + table(columns, body)


def base_dir(row: Row) -> str:
    """A pixel train row's base, as the steering rows name it (runs/pixels/…): its ``run`` where recorded (a
    base copied aside), else the benchmark's ``--out`` folder."""
    if row.get("run"):
        return Path(row["run"]).parent.name
    found = re.search(r"--out (\S+)", row["command"])
    return Path(found.group(1)).name if found else "–"


def pixels_weak_bases(rows: list[Row]) -> str:
    """Pixel bases trained on degraded demos (``--collect-overrides``): the starting points of DSRL from pixels."""
    cells = last_per(
        [r for r in rows if r["part"] == "train" and r.get("collect_overrides")],
        lambda r: (r["task"], r["policy"], tuple(r["collect_overrides"]), r["steps"], r["seed"], base_dir(r)),
    )
    body = [
        [
            f"`{base_dir(r)}`",
            task,
            policy,
            code_list(demos),
            obs_window(r),
            seed,
            f"{steps:,}",
            f"{r['samples_per_s']:.0f}",
            f"{r['wall_time_s'] / 60:.0f}",
            num(r["success_rate"]),
        ]
        for (task, policy, demos, steps, seed, _), r in cells.items()
    ]
    first = next(iter(cells.values()))
    caption = prose(
        f"{measured(list(cells.values()))} {first['demos']} demos collected with obs=pixels and the overrides shown, "
        f"trained with obs=pixels (cosine LR over the steps shown), {first['episodes']} unseen evaluation episodes."
    )
    columns = [
        "base (runs/pixels/…)",
        "task",
        "policy",
        "demos",
        "To",
        "seed",
        "steps",
        "samples/s",
        "wall min (train + eval)",
        "success",
    ]
    return caption + "\n\n" + table(columns, body)


def demos_noise(row: Row) -> str:
    """A steer row's base demos: their recorded action noise; the first row's base was trained on clean demos."""
    sigma = row.get("base_demos_action_noise", 0.0)
    return "clean" if not sigma else f"σ {sigma:g} action noise"


def steered_base_which(overrides: Any) -> str:
    """The base weights robosteer-steer read under these overrides (its ``which``, default ema)."""
    return next((o.split("=", 1)[1] for o in overrides if o.startswith("which=")), "ema")


def pixels_steer(rows: list[Row]) -> str:
    """DSRL-NA from pixels: the base's success before and the steered actor's after (a paired lift), per seed."""
    base_eval = last_per(
        [r for r in rows if r["part"] == "base_eval"], lambda r: (r["base"], r["which"], r["episodes"])
    )

    def paired(r: Row) -> Row | None:
        return base_eval.get(
            (r["base"], steered_base_which(r.get("overrides", ())), r["final_eval_episodes"])
        )

    def lift(r: Row) -> str:
        b = paired(r)
        if b is None or r["final_eval_success_rate"] is None:
            return "–"
        return f"{100 * (r['final_eval_success_rate'] - b['success_rate']):+.0f}"

    cells = last_per(
        [r for r in rows if r["part"] == "steer"],
        lambda r: (
            r["task"],
            r["base"],
            tuple(r.get("overrides", ())),
            r.get("env_steps_budget", round(r["env_steps"], -3)),
            r["seed"],
        ),
    )
    body = [
        [
            r["task"],
            r["seed"],
            f"`{Path(r['base']).parent.name}`",
            demos_noise(r),
            code_list(r.get("overrides", ())) or "defaults",
            num(r["base_success_rate"]) if r["base_success_rate"] is not None else "–",
            f"{r['steerability_ratio']:.2f}" if r.get("steerability_ratio") is not None else "–",
            num(r["initial_success_rate"]),
            num(r["best_success_rate"]),
            num(paired(r)["success_rate"]) if paired(r) else "–",
            "–" if r["final_eval_success_rate"] is None else f"**{num(r['final_eval_success_rate'])}**",
            lift(r),
            f"{num(r['best_eval_success_rate'])} ({r['best_env_steps'] / 1000:.0f}k)",
            num(r["trained_eval_success_rate"]) if r.get("trained_eval_success_rate") is not None else "–",
            f"{r['env_steps']:,}",
            f"{r['wall_time_s'] / 60:.0f}",
        ]
        for r in cells.values()
    ]
    first = next(iter(cells.values()))
    caption = prose(
        f"{measured(list(cells.values()))} The base and periodic figures on "
        f"{first['steer_eval_episodes']} episodes (seed 100000); the final actor (`which=latest`) and the one the "
        f"periodic evaluations picked (`which=best`, at the env steps given) on {first['final_eval_episodes']} "
        "unseen episodes (seed 200000), beside the base (its stock sampler, the weights steered) on the same "
        "episodes where that was measured; the lift is the final actor's points over it. Where a run keeps an "
        "averaged actor (`dsrl.actor_tau`), the final actor is that average, and the trained actor it averages is "
        "evaluated on the same episodes where measured."
    )
    columns = [
        "task",
        "seed",
        "base (runs/pixels/…)",
        "base's demos",
        "robosteer-steer",
        "base, stock sampler",
        "steerability ratio",
        "latent 0 (step 0)",
        "best periodic eval",
        "base, unseen ep.",
        "final actor, unseen ep.",
        "lift, points",
        "picked actor, unseen ep.",
        "trained actor, unseen ep.",
        "env steps",
        "wall min",
    ]
    return caption + "\n\n" + table(columns, body)


def r2_text(r2: float | None) -> str:
    """R² with two decimals; "–" where the held-out target did not vary (R² undefined)."""
    return "–" if r2 is None else f"{r2:.2f}"


def pixels_probe(rows: list[Row]) -> str:
    """What the pixel base's embedding tells of the object and the goal, beside the proprio and a trained encoder."""
    cells = last_per(
        [r for r in rows if r["part"] == "probe"], lambda r: (r["base"], r["target"], r["readout"])
    )
    readouts = list(dict.fromkeys(r["readout"] for r in cells.values()))
    targets = list(dict.fromkeys(r["target"] for r in cells.values()))
    first = next(iter(cells.values()))
    body = [
        [target, f"{cells[(first['base'], target, readouts[0])]['spread_cm']:.1f}"]
        + [
            f"{r2_text(cells[(first['base'], target, ro)]['r2'])} ({cells[(first['base'], target, ro)]['rmse_cm']:.1f} cm)"
            for ro in readouts
        ]
        for target in targets
    ]
    caption = prose(
        f"{measured(list(cells.values()))} Base: `{first['base']}` (its {first['which']} weights). On its own "
        f"{first['windows']:,} demonstration windows (every fifth episode, {first['test_windows']:,} windows, held "
        "out), each target (the simulator's state, a label here only) is read out of what is named; each cell is "
        "R² on the held-out windows (1: all of it, 0: no better than its mean) and the error in cm. The trained "
        f"encoder is the base's observation encoder with its weights drawn anew, {first['probe_steps']:,} steps "
        "on the labels."
    )
    return caption + "\n\n" + table(["target", "spread, cm", *readouts], body)


def pixels_probe_goal(rows: list[Row]) -> str:
    """robosteer-eval runs' success split by the third of the goal's y their episodes drew."""
    cells = last_per([r for r in rows if r["part"] == "probe_goal"], lambda r: r["eval"])
    body = [
        [
            f"`{r['eval'].removeprefix('runs/pixels/')}`",
            "steered" if r["steered"] else "base",
            r["which"],
            num(r["success_rate"]),
            *(f"{x:.2f} ({n})" for x, n in zip(r["thirds"], r["thirds_episodes"], strict=True)),
        ]
        for r in cells.values()
    ]
    first = next(iter(cells.values()))
    caption = prose(
        f"{measured(list(cells.values()))} Each run's {first['episodes']} episodes split into thirds by the goal's "
        f"y (from {first['goal_y_cm'][0]:.1f} to {first['goal_y_cm'][1]:.1f} cm), each episode's goal replayed from "
        "its seed; success in each third (episodes)."
    )
    columns = [
        "robosteer-eval of (runs/pixels/…)",
        "acts",
        "which",
        "success",
        "goal y: low third",
        "middle",
        "high third",
    ]
    return caption + "\n\n" + table(columns, body)


def pixels_deploy(rows: list[Row]) -> str:
    """A pixel policy on the sim twin at 80 Hz (rendering its camera every tick) beside robosteer-eval of it."""
    cells = last_per([r for r in rows if r["part"] == "deploy"], lambda r: (r["task"], r["base"], r["mode"]))
    body = [
        [
            r["task"],
            r["mode"],
            f"**{num(r['success_rate'])}**",
            num(r["eval_success_rate"]),
            f"{r['success_rate'] - r['eval_success_rate']:+.2f}",
            f"{r['mean_steps']:.0f}",
            f"{r['held_ticks']:,} / {r['ticks']:,}",
            f"{r['infer_ms_mean']:.0f}",
            f"{r['tick_late_ms_p99_max']:.1f}",
        ]
        for r in cells.values()
    ]
    first = next(iter(cells.values()))
    cams = ", ".join(first["cameras"])
    caption = prose(
        f"{measured(list(cells.values()))} Policy: `{first['base']}`; the twin in its own process at "
        f"{first['rate_hz']:g} Hz renders {cams} at {first['image_size']} px every control tick and streams it as "
        f"uint8 with the proprio; {first['episodes']} episodes per cell on the seeds robosteer-eval uses "
        f"({first['eval_episodes']} episodes, vectorised simulator, no wall clock)."
    )
    columns = ["task", "mode", "twin, 80 Hz", "robosteer-eval", "difference", "mean steps", "held ticks"]
    columns += ["inference ms per chunk", "worst tick lateness p99, ms"]
    return caption + "\n\n" + table(columns, body)


def _run_reward(r: Row) -> str:
    """A simulator run's reward mode: its ``run.reward=`` override, else the default (shaped)."""
    given = [o.split("=", 1)[1] for o in r.get("overrides", []) if o.startswith("run.reward=")]
    return given[-1] if given else "shaped"


def _held(robot: dict) -> int | None:
    """Recorded robot steps the arm held after (runs before the count: the held control ticks)."""
    return robot.get("robot_held_steps", robot.get("robot_held_ticks")) if robot else None


def _robot_reward(robot: dict) -> str:
    """The reward a robot run was paid, with a success classifier's held-out figures."""
    c = robot.get("classifier")
    if not c:
        return robot["reward"]
    return (
        f"classifier (threshold {c['threshold']:.2f}; {c['held_out_episodes']} held-out episodes: "
        f"FP {c['episode_fp_rate']:.0%}, FN {c['episode_fn_rate']:.0%})"
    )


def dsrl_robot(rows: list[Row]) -> str:
    """DSRL-NA on the twin (deploy's control loop) beside the simulator: evals, final actors, held steps."""
    runs = sorted(
        last_per(rows, lambda r: (r["task"], r.get("where", "sim"), r["seed"])).values(),
        key=lambda r: (r["task"], r.get("where", "sim"), r["seed"]),
    )
    if not runs:
        raise TableError("no DSRL robot rows")
    body = []
    for r in runs:
        robot = r.get("robot") or {}
        where = "simulator" if not robot else f"{robot['name']}, {robot['latency_ms']:g} ms round trip"
        where += ", learner in a Ray worker" if (robot.get("learner") or {}).get("mode") == "ray" else ""
        late = robot.get("robot_tick_late_ms_p99")
        curve = ", ".join(f"{h['success_rate']:.2f}" for h in r["history"])
        trained = r.get("trained_actor_success")
        body.append(
            [
                r["task"],
                where,
                _robot_reward(robot) if robot else _run_reward(r),
                r["seed"],
                f"{r['base_success']:.2f}",
                curve,
                f"**{r['success_rate']:.2f}**",
                f"{trained:.2f}" if trained is not None else "—",
                f"{r['best_actor_success']:.2f}",
                f"{r['env_steps']:,}",
                f"{r['wall_s'] / 60:.1f}",
                f"{held / r['env_steps']:.0%}" if (held := _held(robot)) is not None else "—",
                f"{robot['updates'] / r['env_steps']:.3f}" if robot.get("updates") else "—",
                f"{late['mean']:.1f} / {late['max']:.1f}" if late else "—",
            ]
        )
    columns = ["task", "acting on", "reward", "seed", "base (100 ep.)", "periodic evals (50 ep., every 10k)"]
    columns += ["final averaged actor, 100 unseen ep.", "final trained actor", "`best` actor", "env steps"]
    columns += ["wall min", "steps held", "updates per env step", "tick lateness p99, ms (mean / max)"]
    return measured(runs) + "\n\n" + table(columns, body)


def real_arm_steering(rows: list[Row]) -> str:
    """DSRL-NA on the twin in real mode, judged on the arm, then scored on 100 unseen simulator episodes."""
    runs = list(last_per(rows, lambda r: (r["run"], r["seed"])).values())
    if not runs:
        raise TableError("no real-arm steering rows")
    body = []
    for r in runs:
        arm, sim, late = r["arm"], r["sim"], r["tick_late_ms_p99"]
        lo, hi = arm["final_ci95"]
        person = ", ".join(f"{c['rate']:.0%}" for c in r["intervention_curve"]) or "—"
        body.append(
            [
                "scripted person takes over" if r["intervention_steps"] else "none",
                f"{arm['base']:.2f} ({arm['base_episodes']})",
                ", ".join(f"{h['success_rate']:.1f}" for h in arm["history"][:-1]),
                f"**{arm['final']:.2f}** [{lo:.2f}, {hi:.2f}] ({arm['final_episodes']})",
                f"{sim['base']:.2f}",
                f"**{sim['final']:.2f}**",
                f"{r['env_steps']:,}",
                f"{r['eval_env_steps']:,}",
                person,
                f"{late['mean']:.1f} / {late['max']:.1f}" if late else "—",
                "yes" if r["base_unchanged"] else "**no**",
            ]
        )
    columns = [
        "interventions",
        "base on the arm (episodes)",
        "periodic blocks on the arm (10 ep., every 10k)",
    ]
    columns += [
        "final block on the arm [95% CI] (episodes)",
        "base, 100 unseen sim ep.",
        "final actor, same ep.",
    ]
    columns += ["training env steps", "evaluation env steps", "person's share of steps, per 10k"]
    columns += ["tick lateness p99, ms (mean / max)", "base files unchanged"]
    return measured(runs) + "\n\n" + table(columns, body)


GENERATORS: dict[str, Callable[[list[Row]], str]] = {
    "real_arm_steering": real_arm_steering,
    "dsrl_robot": dsrl_robot,
    "pixels_encoders": pixels_encoders,
    "pixels_env": pixels_env,
    "pixels_train": pixels_train,
    "pixels_weak_bases": pixels_weak_bases,
    "pixels_probe": pixels_probe,
    "pixels_probe_goal": pixels_probe_goal,
    "pixels_steer": pixels_steer,
    "pixels_deploy": pixels_deploy,
    "expo_vs_rlpd": expo_vs_rlpd,
    "data_scaling": data_scaling,
    "vgps_mt10": vgps_mt10,
    "vgps_mt10_50ep": vgps_mt10_50ep,
    "vgps_critic_fix": vgps_critic_fix,
    "dsrl_weak_base": dsrl_weak_base,
    "dsrl_baselines": dsrl_baselines,
    "dsrl_clean": dsrl_clean,
    "dsrl_any_task": dsrl_any_task,
    "dsrl_task_screen": dsrl_task_screen,
    "dsrl_settings": dsrl_settings,
    "dsrl_kept": dsrl_kept,
    "dsrl_kept_average": dsrl_kept_average,
    "dsrl_failures": dsrl_failures,
    "steerability": steerability,
    "collect_quality": collect_quality,
    "env_speed": env_speed,
    "render_speed": render_speed,
    "inference_latency": inference_latency,
    "metaworld_mujoco4": metaworld_mujoco4,
    "steering_throughput": steering_throughput,
    "warp_experts": warp_experts,
    "warp_mt10": warp_mt10,
    "warp_steering": warp_steering,
    "lerobot_compare": lerobot_compare,
    "server_latency": server_latency,
    "train_precision": train_precision,
    "deploy_latency": deploy_latency,
}


# ---------------------------------------------------------------- fences


FENCE = re.compile(r"<!-- table: (?P<name>\S+) rows=(?P<rows>\S+)(?P<short> short)? -->")
END = "<!-- /table -->"


def fences(lines: list[str], where: str) -> list[tuple[int, int, str, list[str], bool]]:
    """``(open, close, name, rows files, short)`` of every fenced block (line indices of its two fences)."""
    out, start = [], None
    for i, line in enumerate(lines):
        m = FENCE.fullmatch(line.strip())
        if m:
            if start is not None:
                raise TableError(
                    f"{where}:{i + 1}: table fence opened inside the one opened on line {start[0] + 1}"
                )
            start = (i, m["name"], m["rows"].split(","), bool(m["short"]))
        elif line.strip() == END:
            if start is None:
                raise TableError(f"{where}:{i + 1}: {END} without an opening fence")
            out.append((start[0], i, start[1], start[2], start[3]))
            start = None
    if start is not None:
        raise TableError(f"{where}:{start[0] + 1}: table {start[1]} is never closed ({END})")
    return out


def short_caption(rows: list[str], folder: Path) -> str:
    """The ``short`` caption: a link to each rows file, relative to the page's ``folder``."""
    links = [f"[{Path(r).name}]({Path(os.path.relpath(ROOT / r, folder)).as_posix()})" for r in rows]
    return f"Rows: {', '.join(links)}."


def render(name: str, rows: list[str], where: str, short: str | None = None) -> str:
    """The text a fenced block of table ``name`` holds, drawn from its rows files (``short``: its caption)."""
    if name not in GENERATORS:
        raise TableError(f"{where}: unknown table {name!r} (known: {', '.join(GENERATORS)})")
    token = _SHORT.set(short)
    try:
        text = GENERATORS[name](load_rows(rows)).strip("\n")
        return text if short is None or short in text else f"{short}\n\n{text}"  # a table with no caption too
    except TableError as e:
        raise TableError(f"{where}: table {name}: {e}") from None
    except (KeyError, TypeError, ValueError, ZeroDivisionError, IndexError, AttributeError) as e:
        raise TableError(f"{where}: table {name}: {type(e).__name__}: {e}") from None
    finally:
        _SHORT.reset(token)


def check(paths: list[Path], write: bool = False, root: Path = ROOT) -> int:
    """Compare (or with ``write`` rewrite) every fenced table in ``paths``: 0 all current, 1 stale, 2 error.

    ``root`` is where the pages sit for their ``short`` links (a test's copy of a page sits elsewhere).
    """
    status = 0
    for path in paths:
        changed = False
        shown = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        try:
            lines = path.read_text().split("\n")
            blocks = fences(lines, shown)
        except OSError as e:
            print(f"tables: {shown}: {e.strerror}", file=sys.stderr)
            status = 2
            continue
        except TableError as e:
            print(f"tables: {e}", file=sys.stderr)
            status = 2
            continue
        home = ROOT / path.parent.relative_to(root) if path.is_relative_to(root) else path.parent
        for start, end, name, rows, short in reversed(blocks):  # bottom up: a rewrite keeps indices valid
            caption = short_caption(rows, home) if short else None
            try:
                text = render(name, rows, f"{shown}:{start + 1}", caption)
            except TableError as e:
                print(f"tables: {e}", file=sys.stderr)
                status = 2
                continue
            have, want = lines[start + 1 : end], [*text.split("\n"), ""]  # a blank line ends the table
            if have == want:
                continue
            if write:
                lines[start + 1 : end], changed = want, True
                print(f"{shown}:{start + 1}: table {name} rewritten from its rows")
            else:
                status = max(status, 1)
                sys.stdout.writelines(
                    d + "\n"
                    for d in difflib.unified_diff(
                        have,
                        want,
                        f"{shown}:{start + 1} {name} (as written)",
                        f"{name} (from its rows)",
                        lineterm="",
                    )
                )
        if changed:
            path.write_text("\n".join(lines))
    if status == 1:
        print(
            "tables: stale tables above; `python benchmarks/results_tables.py --write` redraws them from their rows"
        )
    return status


def pages() -> list[Path]:
    """The markdown files whose tables are checked by default: README.md and every page under docs/."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    """Check (or ``--write``) the fenced tables of the given markdown files (default README.md, docs/**/*.md)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite stale blocks from their rows")
    parser.add_argument("files", nargs="*", type=Path, help="default: README.md docs/**/*.md")
    args = parser.parse_args(argv)
    files = [p.resolve() for p in args.files] or pages()
    return check(files, args.write)


if __name__ == "__main__":
    raise SystemExit(main())

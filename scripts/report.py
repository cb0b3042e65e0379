"""Summarise the run directories under one root: a table on stdout, plus ``summary.md`` and ``summary.png``.

Used by ``make demo``; works on any folder whose sub-directories are robosteer run directories.
    python -m robosteer.scripts.report runs/demo                          # every run: table, summary.md, summary.png
    python -m robosteer.scripts.report runs/demo weak_dp_eval dsrl_eval   # just these runs' rows, side by side
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from robosteer.scripts.common import atomic_write_text, format_table
from robosteer.sim.evaluate import wilson_interval


def load_runs(root: Path) -> dict[str, dict[str, Any]]:
    """``{run name: metrics}`` for every sub-directory of ``root`` that holds a metrics.json."""
    paths = sorted(root.glob("*/metrics.json"), key=lambda p: p.stat().st_mtime)  # pipeline order
    return {path.parent.name: json.loads(path.read_text()) for path in paths}


def describe(m: dict[str, Any]) -> tuple[str, int]:
    """What a run measured, and over how many episodes its success rate was counted."""
    if "attempts" in m:
        return "collection: expert success over all attempts", int(m["attempts"])
    policy = m.get("policy")
    n = int(m.get("episodes") or 0)
    if "variant" in m and "history" in m:
        what = f"DSRL-{m['variant']}: last periodic eval of steering ({m.get('env_steps')} env steps)"
        return what, int(m.get("eval_episodes") or 0)
    if m.get("steered"):
        return "steered policy (frozen base + DSRL actor) on unseen initial states", n
    if policy == "replay":
        return "dataset replayed from its episode seeds", n
    if policy == "expert":
        return "scripted expert", n
    if policy == "checkpoint":
        return "trained policy on unseen initial states", n
    if "final_loss" in m:
        return f"{policy}: end-of-training evaluation ({m.get('steps')} steps)", n
    return str(policy or ""), n


def scalar_curve(run_dir: Path, needle: str = "loss") -> tuple[np.ndarray, np.ndarray] | None:
    """The first TensorBoard scalar whose tag contains ``needle`` (steps, values), or None."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted(run_dir.rglob("events.out.tfevents.*"))
    if not files:
        return None
    acc = EventAccumulator(str(files[-1].parent), size_guidance={"scalars": 0})
    acc.Reload()
    tags = [t for t in acc.Tags().get("scalars", []) if needle in t]
    if not tags:
        return None
    events = acc.Scalars(sorted(tags, key=len)[0])
    return np.array([e.step for e in events]), np.array([e.value for e in events])


def rows_for(runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One table row per run that measured a success rate."""
    rows = []
    for name, m in runs.items():
        if "success_rate" not in m or m.get("success_rate") is None:
            continue
        what, n = describe(m)
        ci = m.get("success_ci95") or (list(wilson_interval(round(m["success_rate"] * n), n)) if n else None)
        m["success_ci95"] = ci  # the plot's error bars
        rows.append(
            {
                "run": name,
                "what": what,
                "task": m.get("task", ""),
                "episodes": n,
                "success": float(m["success_rate"]),
                "95% CI": f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "",
                "wall s": float(m.get("wall_time_s", 0.0)),
            }
        )
    return rows


def plot(root: Path, runs: dict[str, dict[str, Any]], rows: list[dict[str, Any]]) -> Path:
    """Success rates with their 95% intervals, beside the training-loss curve of any training run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = {
        name: c
        for name, m in runs.items()
        if "final_loss" in m and (c := scalar_curve(root / name)) is not None
    }
    steering = {name: m["history"] for name, m in runs.items() if "variant" in m and m.get("history")}
    panels = 1 + bool(curves) + bool(steering)
    fig, axes = plt.subplots(1, panels, figsize=(6 + 5 * (panels - 1), 4), squeeze=False)
    ax = axes[0, 0]
    names = [r["run"] for r in rows]
    rates = np.array([r["success"] for r in rows])
    lo_hi = np.array([runs[n].get("success_ci95", [r, r]) for n, r in zip(names, rates)])
    # Clipped at 0: a Wilson bound can sit a rounding error inside the rate itself (e.g. 0.9999... at 100%).
    err = np.clip(np.stack([rates - lo_hi[:, 0], lo_hi[:, 1] - rates]), 0.0, None) if len(rows) else None
    ax.bar(names, rates, yerr=err, capsize=4, color="#4c72b0")
    ax.set_ylim(0, 1.05)
    ax.tick_params(axis="x", labelrotation=30)
    ax.set_ylabel("success rate (95% Wilson CI)")
    ax.set_title("success by run")
    for i, r in enumerate(rates):  # inside the bar, clear of the error bars
        ax.text(i + 0.2, max(r - 0.08, 0.02), f"{r:.0%}", ha="center", color="white" if r > 0.1 else "black")
    if curves:
        ax = axes[0, 1]
        for name, (steps, values) in curves.items():
            ax.plot(steps, values, label=name)
        ax.set_yscale("log")
        ax.set_xlabel("training step")
        ax.set_ylabel("loss")
        ax.set_title("training loss")
        ax.legend()
    if steering:
        ax = axes[0, panels - 1]
        for name, history in steering.items():
            ax.plot(
                [h["env_steps"] for h in history],
                [h["success_rate"] for h in history],
                marker="o",
                label=name,
            )
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("env steps")
        ax.set_ylabel("success rate (periodic eval)")
        ax.set_title("steering learning curve")
        ax.legend()
    fig.tight_layout()
    out = root / "summary.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> int:
    """Print and save the summary of the runs under ``argv[0]``."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m robosteer.scripts.report RUN_ROOT [RUN_NAME ...]", file=sys.stderr)
        return 2
    root = Path(argv[0])
    runs = load_runs(root)
    if not runs:
        print(f"no run directories with a metrics.json under {root}", file=sys.stderr)
        return 1
    if len(argv) > 1:  # a side-by-side table of the named runs only, in the order given
        missing = [n for n in argv[1:] if n not in runs]
        if missing:
            print(f"no metrics.json for {missing} under {root}; runs: {sorted(runs)}", file=sys.stderr)
            return 1
        print(format_table(rows_for({n: runs[n] for n in argv[1:]})))
        return 0
    rows = rows_for(runs)
    table = format_table(rows)
    png = plot(root, runs, rows)
    videos = sorted(str(p) for p in root.rglob("*.mp4"))
    atomic_write_text(
        root / "summary.md", table + "\n\nvideos:\n" + "\n".join(f"- {v}" for v in videos) + "\n"
    )
    print(table)
    print(f"\nplot:   {png}")
    for v in videos:
        print(f"video:  {v}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Credit explorer timings on cpu-pipeline-sized rollouts: opening `explore(run folder)` (targets: under 3 s) and a
redraw after a control change (under 1 s). Times are the kernel's side (Python: reading, credit, figure, the widget
messages queued); the browser's drawing is measured by tests/analysis/test_explorer_browser.py (printed with -s).

Rollouts: by default synthetic ALFWorld-like batches of the cpu profile's size (rollout.n_tasks groups x
rollout.group_size trajectories, up to env.alfworld.max_steps steps, train.iterations saved iterations, read from
params.yaml's cpu profile), written as a run folder; `--rollouts RUN_FOLDER` times real saved rollouts instead
(e.g. a `scpo train --profile cpu` run).

    .venv/bin/python benchmarks/explorer_bench.py [--rollouts runs/alfworld/scpo/seed0] [--opens 5] [--redraws 20]
    .venv/bin/python benchmarks/explorer_bench.py --quick    # 2 iterations of 2 groups x 3 x 5 steps, 1 open, 1 redraw

Cold open = a fresh Python process importing scpo.analysis.explorer and calling explore() (a new kernel's first
explorer), split into importing scpo's explorer, importing plotly's widget (a one-time cost of any plotly widget in a
kernel) and explore() itself; warm open = explore() again in that process (a second explorer). Medians over repeats, as
wall time and as the process's CPU time (on a shared machine waiting for a core inflates the wall time only).

Measured with `--rollouts runs/alfworld/scpo/seed0` (a `make repro` run's rollouts: 2 groups x 8 trajectories, up to
15 steps, 3 iterations; 2-core machine at load 1.5): a cold open 1.83 s (median: importing scpo's explorer 0.46 s,
plotly's widget 1.13 s, `explore()` 0.25 s), a warm open 0.05 s; a control change (tau, kappa, group, iteration,
estimator) redraws in 0.015-0.025 s in the kernel (at most 0.032 s) and shows in the browser about 0.5 s later.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_COLD = """
import json, sys, time
t = [(time.perf_counter(), time.process_time())]
from scpo.analysis.explorer import explore
t.append((time.perf_counter(), time.process_time()))
import plotly.graph_objects as go
go.FigureWidget  # plotly's widget module: imports nbformat -> jsonschema (-> rfc3987-syntax where installed)
t.append((time.perf_counter(), time.process_time()))
explore(sys.argv[1])
t.append((time.perf_counter(), time.process_time()))
explore(sys.argv[1])
t.append((time.perf_counter(), time.process_time()))
names = ("import", "plotly", "open", "warm")
print(json.dumps({n: [t[i + 1][0] - t[i][0], t[i + 1][1] - t[i][1]] for i, n in enumerate(names)}))
"""


def cpu_sized_run(folder: Path, quick: bool = False) -> Path:
    """A run folder with the cpu profile's rollout sizes (`quick`: 2 iterations of 2 groups x 3 trajectories of up to
    5 steps), synthetic (scpo.credit.synthetic): one iter_XXXX per training iteration."""
    from scpo.config import load_config
    from scpo.credit.synthetic import synthetic_batch

    cfg = load_config(REPO / "params.yaml", profile="cpu")
    sizes = (2, 2, 3, 5) if quick else (cfg.train.iterations, cfg.rollout.n_tasks, cfg.rollout.group_size, None)
    iterations, groups, size, steps = sizes
    run = folder / "alfworld" / "scpo" / "seed0"
    for it in range(iterations):
        synthetic_batch(
            n_groups=groups,
            group_size=size,
            max_steps=steps or cfg.env.alfworld.max_steps,
            n_states=10,
            seed=it,
        ).to_parquet(run / "rollouts" / f"iter_{it:04d}.parquet")
    return run


def describe(run: Path) -> str:
    from scpo.analysis.explorer_data import RolloutCatalogue, group_table

    cat = RolloutCatalogue.from_source(run)
    name = next(iter(cat.runs))
    parts = []
    for it in cat.iterations(name):
        t = group_table(cat.batch(name, it))
        parts.append(
            f"iter {it}: {int(t['steps'].sum())} rows, {len(t)} groups x {int(t['trajectories'].max())}, "
            f"{int(t['mixed'].sum())} mixed"
        )
    return "; ".join(parts)


def redraws(run: Path, n: int) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) seconds per control change, by control (each value new, so nothing comes from the credit cache)."""
    from scpo.analysis.explorer import explore

    ex = explore(run)
    out: dict[str, list[float]] = {"tau": [], "kappa": [], "group": [], "iteration": [], "estimator": []}
    groups = [v for _, v in ex.group.options]
    its = [v for _, v in ex.iteration.options]
    for i in range(n):
        for name, change in (
            ("tau", lambda i=i: setattr(ex.options["tau"], "value", round(0.30 + 0.02 * i, 2))),
            ("kappa", lambda i=i: setattr(ex.options["kappa"], "value", round(0.20 + 0.01 * i, 2))),
            ("group", lambda: setattr(ex.group, "value", groups[(groups.index(ex.group.value) + 1) % len(groups)])),
            ("iteration", lambda: setattr(ex.iteration, "value", its[(its.index(ex.iteration.value) + 1) % len(its)])),
            ("estimator", lambda: setattr(ex.estimators["g2po"], "value", not ex.estimators["g2po"].value)),
        ):
            t0, c0 = time.perf_counter(), time.process_time()
            change()
            out[name].append((time.perf_counter() - t0, time.process_time() - c0))
            if "color:#b00" in ex.status.value:
                raise RuntimeError(f"redraw failed after a {name} change: {ex.status.value}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--rollouts", type=Path, default=None, help="a run folder with rollouts/ (default: synthetic, cpu-sized)"
    )
    ap.add_argument("--opens", type=int, default=5, help="fresh processes for the cold open")
    ap.add_argument("--redraws", type=int, default=20, help="changes per control")
    ap.add_argument("--quick", action="store_true", help="small synthetic rollouts, one open, one redraw: seconds")
    args = ap.parse_args()
    if args.quick:
        args.opens, args.redraws = 1, 1

    with tempfile.TemporaryDirectory() as tmp:
        run = args.rollouts or cpu_sized_run(Path(tmp), quick=args.quick)
        label = (
            ("synthetic, " + ("quick sizes" if args.quick else "cpu profile sizes")) if args.rollouts is None else run
        )
        print(f"rollouts: {label}: {describe(run)}")
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
        cold = [
            json.loads(
                subprocess.run(
                    [sys.executable, "-c", _COLD, str(run)], check=True, capture_output=True, text=True, env=env
                )
                .stdout.strip()
                .splitlines()[-1]
            )
            for _ in range(args.opens)
        ]
        rows = {
            "import scpo.analysis.explorer": ["import"],
            "import plotly's FigureWidget": ["plotly"],
            "explore(), first in the process": ["open"],
            "fresh process: all of the above": ["import", "plotly", "open"],
            "explore() again (warm process)": ["warm"],
        }
        print(f"{'open':<36}{'wall median s':>14}{'CPU median s':>13}   target")
        for label, parts in rows.items():
            wall = statistics.median(sum(c[p][0] for p in parts) for c in cold)
            cpu = statistics.median(sum(c[p][1] for p in parts) for c in cold)
            print(f"{label:<36}{wall:>14.2f}{cpu:>13.2f}   {'< 3 s' if parts in (['open'], ['warm']) else ''}")
        times = redraws(run, args.redraws)
        print(f"\n{'redraw after a change of':<36}{'wall median s':>14}{'CPU median s':>13}{'wall max s':>11}   target")
        for name, ts in times.items():
            print(
                f"{name:<36}{statistics.median(w for w, _ in ts):>14.3f}{statistics.median(c for _, c in ts):>13.3f}"
                f"{max(w for w, _ in ts):>11.3f}   < 1 s"
            )


if __name__ == "__main__":
    main()

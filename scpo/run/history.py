"""A run's history: history.csv (one row per iteration) and its dvclive folder, and the check a resume makes of it.

dvclive nests metric names on '/', so one name cannot be both a value and a folder: the per-task-type success rates are
`charts/success_rate_by_type/<task_type>` next to the overall `charts/success_rate` (the names: reports/METRICS.md).

Every checkpoint keeps a copy of history.csv as it was when the checkpoint was written (its rows 0..k-1), so a resume
can check the run's history against it (`history_problem`) and rebuild a truncated or damaged one from it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

__all__ = ["HistoryLog", "HISTORY_FILE", "STEP_SIGNAL", "history_problem"]

HISTORY_FILE = "history.csv"
# columns every row of history.csv has, whatever the method and the batch (checked when a checkpoint has no copy)
_EVERY_ROW = ("iteration", "charts/success_rate", "losses/n_updates", "losses/frac_steps_updated")


STEP_SIGNAL = "DVCLIVE_STEP_COMPLETED"  # dvclive's per-step signal file (dvclive.vscode)


class HistoryLog:
    """history.csv (one row per iteration) + dvclive. On resume, rows beyond the checkpoint are dropped and the kept
    rows are replayed into a fresh dvclive folder, so both end up exactly as an uninterrupted run's. dvclive's own
    `Live(resume=True)` would not: it continues after the last step it logged, which for a run killed between
    checkpoints is past the checkpoint, and keeps the rows of those iterations in its plot files (which the resumed run
    then writes again); and after a first step of 0 it starts at 0 again.

    A step is dvclive's `next_step` without its signal to the VS Code extension (the repository-wide file
    `.dvc/tmp/exps/run/DVCLIVE_STEP_COMPLETED`, written at each step and deleted by `end`): runs side by side in one
    repository (a stage's seeds, the learning benchmark's runs) would write and delete it under each other."""

    def __init__(self, run_dir: Path, keep_iterations: int = 0):
        import pandas as pd
        from dvclive import Live

        self.path = Path(run_dir) / HISTORY_FILE
        self.rows: list[dict[str, Any]] = []
        if keep_iterations and self.path.exists():
            df = pd.read_csv(self.path)
            df = df[df["iteration"] < keep_iterations]
            self.rows = [
                {k: v for k, v in r.items() if not (isinstance(v, float) and math.isnan(v))}
                for r in df.to_dict(orient="records")
            ]
        self.live = Live(
            dir=str(Path(run_dir) / "dvclive"), resume=False, save_dvc_exp=False, dvcyaml=None, report=None
        )
        for row in self.rows:
            self._to_live(row)
        self._write()

    def _to_live(self, row: dict[str, Any]) -> None:
        for k, v in row.items():
            if k != "iteration":
                self.live.log_metric(k, float(v))
        self.live.sync()  # what next_step does, less the signal file
        self.live.step += 1

    def _write(self) -> None:
        import pandas as pd

        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        pd.DataFrame(self.rows).to_csv(tmp, index=False)
        tmp.replace(self.path)

    def log(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self._to_live(row)
        self._write()

    def close(self) -> None:
        try:
            self.live.end()
        except FileNotFoundError as err:  # end's last act: deleting the signal file, if another process deleted it
            if Path(err.filename or "").name != STEP_SIGNAL:
                raise


def _read_rows(path: Path, iterations: int):
    """Rows 0..iterations-1 of a history.csv as a DataFrame (sorted columns, index reset); ValueError when the file
    cannot be read as one."""
    import pandas as pd

    try:
        df = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as err:
        raise ValueError(str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__) from None
    if "iteration" not in df.columns:
        raise ValueError("it has no 'iteration' column")
    df = df[pd.to_numeric(df["iteration"], errors="coerce") < iterations].dropna(axis=1, how="all")
    return df.reindex(sorted(df.columns), axis=1).reset_index(drop=True)


def history_problem(path: Path, iterations: int, reference: Path | None = None) -> str | None:
    """Why the run's history.csv `path` cannot continue a run resumed after `iterations` iterations, or None.

    With `reference` (the checkpoint's copy of history.csv): any difference in rows 0..iterations-1. Without one: an
    unreadable file, rows 0..iterations-1 not each there once in order, or one of them lacking a value every row has
    (`_EVERY_ROW`, `perf/*`; a line cut short)."""
    path = Path(path)
    if iterations <= 0:
        return None
    if not path.exists():
        return f"{path} is missing"
    try:
        rows = _read_rows(path, iterations)
    except ValueError as err:
        return f"{path} cannot be read ({err})"
    if reference is not None:
        try:
            expected = _read_rows(reference, iterations)
        except ValueError:
            expected = None
        if expected is not None:
            if rows.shape != expected.shape or list(rows.columns) != list(expected.columns):
                return f"{path} holds {len(rows)} of the checkpoint's {len(expected)} rows (0..{iterations - 1})"
            if not rows.equals(expected):
                return f"{path} differs from the checkpoint's copy in rows 0..{iterations - 1}"
            return None
    done = [int(i) for i in rows["iteration"].tolist()]
    if done != list(range(iterations)):
        missing = sorted(set(range(iterations)) - set(done))
        what = f"iterations {missing[:5]}{'...' if len(missing) > 5 else ''} missing" if missing else "rows repeated"
        return f"{path} does not hold rows 0..{iterations - 1} once each ({what})"
    needed = [c for c in rows.columns if c in _EVERY_ROW or c.startswith("perf/")]
    gaps = rows[needed].isna().any(axis=1)
    if gaps.any():
        return f"{path} has incomplete rows (iterations {rows['iteration'][gaps].astype(int).tolist()[:5]})"
    return None

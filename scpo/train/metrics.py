"""Per-iteration metrics (names explained in reports/METRICS.md), history.csv and dvclive logging.

dvclive nests metric names on '/', so one name cannot be both a value and a folder: the per-task-type success rates are
`charts/success_rate_by_type/<task_type>` next to the overall `charts/success_rate`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from scpo.batch import RolloutBatch

__all__ = ["rollout_metrics", "credit_metrics", "HistoryLog"]


def rollout_metrics(batch: RolloutBatch) -> dict[str, float]:
    """charts/*: success overall and per task type, task score, episode length (means over trajectories),
    invalid-answer rate (over steps)."""
    first = np.unique(batch.traj_id, return_index=True)[1]  # each trajectory's first row, in trajectory order
    won = batch.won[first].astype(float)
    types = batch.task_type[first]
    out = {
        "charts/success_rate": float(won.mean()),
        "charts/task_score": float(np.mean(batch.task_score[first].tolist())),
        "charts/episode_length": float(np.mean(batch.traj_len[first].tolist())),
        "charts/invalid_rate": float(1.0 - batch.valid.mean()),
    }
    for tt in sorted(set(types.tolist())):
        out[f"charts/success_rate_by_type/{tt}"] = float(np.mean(batch.won[first][types == tt].tolist()))
    return out


def credit_metrics(batch: RolloutBatch, result) -> dict[str, float]:
    """credit/*: group composition (all-failed / mixed / all-success), advantage moments, and the estimator's own stats
    (`CreditResult.stats`, e.g. scpo_credit_mean), which take precedence on equal names."""
    first = np.unique(batch.traj_id, return_index=True)[1]
    g, won = batch.group_id[first], batch.won[first].astype(float)
    n_groups = int(g.max()) + 1
    rate = np.bincount(g, weights=won, minlength=n_groups) / np.maximum(np.bincount(g, minlength=n_groups), 1)
    adv = np.asarray(result.advantages, dtype=float)
    out = {
        "credit/frac_all_failed_groups": float(np.mean(rate == 0)),
        "credit/frac_mixed_groups": float(np.mean((rate > 0) & (rate < 1))),
        "credit/frac_all_success_groups": float(np.mean(rate == 1)),
        "credit/adv_mean": float(adv.mean()),
        "credit/adv_std": float(adv.std()),
        "credit/adv_abs_mean": float(np.abs(adv).mean()),
    }
    for k, v in (result.stats or {}).items():
        if isinstance(v, (int, float, np.floating, np.integer)) and math.isfinite(float(v)):
            out[f"credit/{k}"] = float(v)
    return out


class HistoryLog:
    """history.csv (one row per iteration) + dvclive. On resume, rows beyond the checkpoint are dropped and the kept
    rows are replayed into a fresh dvclive folder, so both end up exactly as an uninterrupted run's."""

    def __init__(self, run_dir: Path, keep_iterations: int = 0):
        import pandas as pd
        from dvclive import Live

        self.path = Path(run_dir) / "history.csv"
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
        self.live.next_step()

    def _write(self) -> None:
        import pandas as pd

        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".csv.tmp")
        pd.DataFrame(self.rows).to_csv(tmp, index=False)
        tmp.replace(self.path)

    def log(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self._to_live(row)
        self._write()

    def close(self) -> None:
        self.live.end()

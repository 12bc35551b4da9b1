"""Training curves across runs: each run's history.csv (one row per iteration) -> long table -> seed-averaged figure and
a wide CSV (iteration, one column per method) that `dvc plots show` draws as one line per method."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from scpo.pipeline.layout import run_dir

__all__ = ["SUCCESS_METRIC", "load_histories", "wide_curves", "plot_curves"]

SUCCESS_METRIC = "charts/success_rate"


def _iteration_column(df: pd.DataFrame) -> pd.Series:
    for name in ("iteration", "step"):
        if name in df.columns:
            return df[name]
    return pd.Series(range(len(df)), index=df.index)


def load_histories(
    out_dir: str | Path,
    env: str,
    methods: Iterable[str],
    seeds: Iterable[int],
    metrics: Sequence[str] = (SUCCESS_METRIC,),
) -> pd.DataFrame:
    """Rows (env, method, seed, iteration, metric, value) from <out_dir>/<env>/<method>/seed<seed>/history.csv.

    Raises FileNotFoundError naming missing runs and KeyError naming a metric a history lacks."""
    frames, missing = [], []
    for method in methods:
        for seed in seeds:
            path = run_dir(out_dir, env, method, seed) / "history.csv"
            if not path.exists():
                missing.append(str(path))
                continue
            hist = pd.read_csv(path)
            absent = [m for m in metrics if m not in hist.columns]
            if absent:
                raise KeyError(f"{path} lacks metric(s) {absent}; it has {list(hist.columns)}")
            long = hist.assign(iteration=_iteration_column(hist))[["iteration", *metrics]].melt(
                id_vars="iteration", var_name="metric", value_name="value"
            )
            frames.append(long.assign(env=env, method=method, seed=int(seed)))
    if missing:
        raise FileNotFoundError(f"{len(missing)} training history file(s) missing: " + ", ".join(missing))
    cols = ["env", "method", "seed", "iteration", "metric", "value"]
    return pd.concat(frames, ignore_index=True)[cols]


def wide_curves(long: pd.DataFrame, metric: str = SUCCESS_METRIC) -> pd.DataFrame:
    """Seed-mean of `metric`: columns iteration + one per method (in order of appearance)."""
    rows = long[long["metric"] == metric]
    methods = list(dict.fromkeys(rows["method"]))
    wide = rows.groupby(["iteration", "method"])["value"].mean().unstack("method")
    return wide[methods].reset_index()


def plot_curves(long: pd.DataFrame, out: Path, metric: str = SUCCESS_METRIC, title: str = "") -> Path:
    """Line per method (mean over seeds, band = ±1 std), distinct colour and marker per method; written to `out`
    (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    rows = long[long["metric"] == metric]
    methods = list(dict.fromkeys(rows["method"]))
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    sns.lineplot(
        data=rows,
        x="iteration",
        y="value",
        hue="method",
        style="method",
        hue_order=methods,
        style_order=methods,
        markers=True,
        dashes=False,
        errorbar="sd",
        err_kws={"alpha": 0.08},
        palette="tab10",
        ax=ax,
    )
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if rows["value"].between(0, 1).all():  # a rate: show its whole range, never negative
        ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("training iteration")
    ax.set_ylabel(metric.split("/")[-1].replace("_", " ") + " (train rollouts)")
    ax.set_title(title or metric)
    ax.legend(title="method (mean ± sd over seeds)", bbox_to_anchor=(1.02, 1), loc="upper left", fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130, bbox_inches="tight")
    plt.close(fig)
    return out

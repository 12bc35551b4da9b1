"""Results tables: success per run from each run's eval.csv, then mean ± std over seeds, ours beside the published
figures.

Per run, a success rate pools every evaluated episode: success = sum(n * success) / sum(n) over the rows kept (all
splits, all task types for "all"; one task type for a task-type column). Over seeds: mean and sample standard deviation
(ddof=1), the papers' "mean ± std over seeds". Rates are reported in percent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from scpo.config import Config

__all__ = [
    "AGGREGATE_TASK_TYPES",
    "load_eval_runs",
    "pooled_success",
    "mean_std_over_seeds",
    "format_mean_std",
    "results_table",
    "comparison_table",
    "task_type_table",
    "our_scale_label",
    "write_table",
    "is_hard_type",
]

EVAL_COLUMNS = ("split", "task_type", "n", "success")
AGGREGATE_TASK_TYPES = frozenset({"all", "overall", "*", ""})  # rows that summarise the others; never pooled twice


def load_eval_runs(
    eval_root: str | Path, envs: Iterable[str], methods: Iterable[str], seeds: Iterable[int]
) -> pd.DataFrame:
    """Concatenate <eval_root>/<env>/<method>/seed<seed>/eval.csv into rows
    (env, method, seed, split, task_type, n, success).

    Raises FileNotFoundError naming every missing run, and ValueError naming a file whose columns differ from the
    contract.
    """
    frames, missing = [], []
    for env in envs:
        for method in methods:
            for seed in seeds:
                path = Path(eval_root) / env / method / f"seed{seed}" / "eval.csv"
                if not path.exists():
                    missing.append(str(path))
                    continue
                df = pd.read_csv(path)
                absent = [c for c in EVAL_COLUMNS if c not in df.columns]
                if absent:
                    raise ValueError(f"{path}: missing columns {absent}; expected {list(EVAL_COLUMNS)}")
                df = df[list(EVAL_COLUMNS)].copy()
                df["task_type"] = df["task_type"].fillna("").astype(str)
                df.insert(0, "seed", int(seed))
                df.insert(0, "method", method)
                df.insert(0, "env", env)
                frames.append(df)
    if missing:
        raise FileNotFoundError(f"{len(missing)} evaluation file(s) missing: " + ", ".join(missing))
    return pd.concat(frames, ignore_index=True)


def is_hard_type(task_type: str, hard_types: Sequence[str]) -> bool:
    """True when `task_type` contains one of the `hard_types` substrings (e.g. 'pick_two' in
    'pick_two_obj_and_place')."""
    return any(h in task_type for h in hard_types)


def pooled_success(evals: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Success pooled over episodes, sum(n * success) / sum(n) per `by` group, aggregate rows dropped.
    Columns: *by, n, success."""
    rows = evals[~evals["task_type"].isin(AGGREGATE_TASK_TYPES)]
    if rows.empty:  # an eval.csv with only aggregate rows (no task types): use those
        rows = evals
    weighted = rows.assign(_won=rows["n"] * rows["success"])
    out = weighted.groupby(list(by), sort=False, as_index=False)[["n", "_won"]].sum()
    out["success"] = np.where(out["n"] > 0, out["_won"] / out["n"].where(out["n"] > 0, 1), np.nan)
    return out.drop(columns="_won")


def mean_std_over_seeds(per_run: pd.DataFrame, by: Sequence[str], value: str = "success") -> pd.DataFrame:
    """mean, std (ddof=1; NaN for one seed) and n_seeds of `value` over the 'seed' rows of each `by` group."""
    agg = per_run.groupby(list(by), sort=False)[value].agg(mean="mean", std="std", n_seeds="count")
    return agg.reset_index()


def format_mean_std(mean: float, std: float, scale: float = 100.0, digits: int = 1) -> str:
    """'72.8 ± 3.6' (percent by default); '72.8' when std is NaN (one seed); 'n/a' when mean is NaN."""
    if mean is None or np.isnan(mean):
        return "n/a"
    if std is None or np.isnan(std):
        return f"{mean * scale:.{digits}f}"
    return f"{mean * scale:.{digits}f} ± {std * scale:.{digits}f}"


def _cells(stats: pd.DataFrame, column: str) -> pd.DataFrame:
    return stats.assign(**{column: [format_mean_std(m, s) for m, s in zip(stats["mean"], stats["std"])]})


def results_table(evals: pd.DataFrame, methods: Sequence[str], hard_types: Sequence[str]) -> pd.DataFrame:
    """The headline table: one row per method; per env the overall success over all eval splits ('<env> all'), and for
    envs with hard task types a '<env> hard' column (episodes of the hard types only). Cells: 'mean ± std' in
    percent."""
    table = pd.DataFrame({"method": list(methods)})
    for env in evals["env"].drop_duplicates():
        env_rows = evals[evals["env"] == env]
        stats = mean_std_over_seeds(pooled_success(env_rows, ["method", "seed"]), ["method"])
        col = f"{env} all"
        table = table.merge(_cells(stats, col)[["method", col]], on="method", how="left")
        n_seeds = stats.set_index("method")["n_seeds"]
        table[f"{env} seeds"] = table["method"].map(n_seeds).fillna(0).astype(int)
        hard = env_rows[env_rows["task_type"].map(lambda t: is_hard_type(t, hard_types))]
        if not hard.empty:
            hstats = mean_std_over_seeds(pooled_success(hard, ["method", "seed"]), ["method"])
            hcol = f"{env} hard"
            table = table.merge(_cells(hstats, hcol)[["method", hcol]], on="method", how="left")
    return table.fillna("n/a")


def comparison_table(
    results: pd.DataFrame,
    published: dict[str, dict[str, str]],
    envs: Sequence[str],
    ours_label: str,
    published_label: str,
) -> pd.DataFrame:
    """Ours beside the published figures: per env, a column '<env> · <ours_label>' (from `results_table`'s '<env> all')
    next to '<env> · <published_label>' ('—' where a method has no published figure)."""
    table = pd.DataFrame({"method": results["method"]})
    for env in envs:
        table[f"{env} · {ours_label}"] = results.get(f"{env} all", pd.Series("n/a", index=results.index))
        table[f"{env} · {published_label}"] = [published.get(m, {}).get(env, "—") for m in results["method"]]
    return table


def task_type_table(evals: pd.DataFrame, env: str, methods: Sequence[str], hard_types: Sequence[str]) -> pd.DataFrame:
    """Per task type of `env` (columns; hard types marked with '†' and placed last), one row per method,
    'mean ± std' in %."""
    env_rows = evals[(evals["env"] == env) & ~evals["task_type"].isin(AGGREGATE_TASK_TYPES)]
    stats = mean_std_over_seeds(pooled_success(env_rows, ["method", "task_type", "seed"]), ["method", "task_type"])
    stats = _cells(stats, "cell")
    wide = stats.pivot(index="method", columns="task_type", values="cell")
    types = sorted(wide.columns, key=lambda t: (is_hard_type(t, hard_types), t))
    wide = wide[types].rename(columns={t: f"{t} †" for t in types if is_hard_type(t, hard_types)})
    return wide.reindex(list(methods)).fillna("n/a").reset_index()


def our_scale_label(cfg: Config) -> str:
    """How our numbers were produced: model, scale, evaluation, profile (printed above every table of ours)."""
    p = cfg.policy
    model = (
        f"tiny Llama ({p.tiny_layers} layers x {p.tiny_hidden_size} hidden, vocab <= {p.tiny_vocab_size})"
        if p.profile == "tiny"
        else p.profile
    )
    episodes = "all" if cfg.eval.n_episodes is None else cfg.eval.n_episodes
    if cfg.eval.episodes_per_task > 1:
        episodes = f"{episodes} games x {cfg.eval.episodes_per_task}"
    return (
        f"{model}, behaviour-cloning warm start on {cfg.train.sft.n_demos} demos, "
        f"{cfg.rollout.n_tasks} tasks x {cfg.rollout.group_size} rollouts, {cfg.train.iterations} iterations, "
        f"eval {episodes} episodes per split (ALFWorld {', '.join(cfg.env.alfworld.eval_splits)}; "
        f"WebShop {', '.join(cfg.env.webshop.eval_splits)}) "
        f"at temperature {cfg.eval.temperature}, "
        f"profile '{cfg.profile}'"
    )


def write_table(
    df: pd.DataFrame,
    csv_path: Path,
    md_path: Path,
    title: str,
    note: str = "",
    formats: Mapping[str, str] | None = None,
) -> tuple[Path, Path]:
    """Write `df` as CSV and as Markdown (a '## title' heading, an optional note line, then the table). Floats are
    shown at 3 decimals, or in the format spec `formats[column]` (e.g. ".4f" for p-values such as 0.0625)."""
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(csv_path, index=False)
    shown = df.copy()
    formats = dict(formats or {})
    for col in shown.columns[shown.dtypes.eq(float)]:  # floats at 3 decimals; strings such as '50.0' kept as written
        spec = formats.get(col, ".3f")
        shown[col] = shown[col].map(lambda x, spec=spec: "n/a" if pd.isna(x) else format(x, spec))
    table = shown.to_markdown(index=False, disable_numparse=True)
    text = f"## {title}\n\n" + (f"{note}\n\n" if note else "") + table + "\n"
    md_path.write_text(text, encoding="utf-8")
    return csv_path, md_path

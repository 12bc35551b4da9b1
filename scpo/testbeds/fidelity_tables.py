"""Tables and figures of the credit-fidelity benchmark (notebook 07, `scpo fidelity`), under reports/.

reports/tables/credit_fidelity.{csv,md}               every estimator x eps x group kind (noisy-optimal rollouts)
reports/tables/credit_fidelity_by_task_type.{csv,md}  the same split by task type (all groups)
reports/tables/credit_fidelity_trained.{csv,md}       on the saved rollouts of the trained runs
reports/tables/credit_fidelity_inconsistency.{csv,md} semantic inconsistency rev. 2 + oracle-progress control
reports/tables/credit_fidelity_timing.json            wall / CPU seconds per phase, planner call times
reports/tables/scpo_defaults_sweep.{csv,md}           SCPO's options on fidelity
reports/tables/scpo_tau_calibration.{csv,md}          SCPO's tau per scorer: least wrong-sign credit, best AUC
reports/figures/credit_fidelity.png, scpo_defaults_sweep.png

Everything it reads is checked before the first file is written: the games of `fidelity.split` (one line naming
data.root when there are none), and the trained runs, of which only ALFWorld runs are used (the planner labels their
rollouts): a run at an ALFWorld path that holds another environment's rollouts is skipped, with one line saying so.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from scpo.analysis.fidelity_metrics import METRICS
from scpo.errors import DataError, ExpectedError
from scpo.pipeline.layout import ReportLayout, run_dir
from scpo.tables.success import write_table
from scpo.testbeds.fidelity import (
    FidelityResult,
    Timer,
    calibrate_tau,
    cpu_seconds,
    noisy_fidelity,
    plot_fidelity_vs_eps,
    plot_scpo_sweep,
    scpo_sweep,
    trained_fidelity,
)

__all__ = ["PROXY_NOTE", "WRONG_SIGN_NOTE", "readable", "trained_runs", "sweep_grid", "write_fidelity_report"]

PROXY_NOTE = (
    "q_t = V*(s_t) - V*(s_t+1) from an optimal planner with full knowledge; full knowledge is a proxy: a step "
    "that explores (opens a cabinet to look) has q <= 0, so false credit includes credit for useful exploration."
)
WRONG_SIGN_NOTE = (
    "Wrong-sign credit: wrong_sign_pos = #{A > 0, q < 0} / #{A > 0} (credited up, a step away from the goal); "
    "wrong_sign_neg = #{A < 0, q > 0} / #{A < 0} (credited down, a step of progress); wrong_sign = both over "
    "#{A != 0}; steps with A = 0 count in no denominator, steps with q = 0 are never wrong."
)


def readable(summary: pd.DataFrame, keys: list[str], kinds: tuple[str, ...] | None = ("all", "mixed")) -> pd.DataFrame:
    """One line per key: 'mean ± std [lo, hi]' per metric (95% t-interval over seeds), and the counts."""
    split = "kind" if "kind" in summary.columns else "task_type"
    data = summary if kinds is None or split != "kind" else summary[summary["kind"].isin(kinds)]
    out = data[keys + [split, "n_seeds", "n_groups", "n_pos_failed", "n_neg"]].copy()
    for m in METRICS:
        out[m] = [
            f"{a:.3f} ± {s:.3f} [{lo:.3f}, {hi:.3f}]" if pd.notna(a) else "n/a"
            for a, s, lo, hi in zip(data[f"{m}_mean"], data[f"{m}_std"], data[f"{m}_lo"], data[f"{m}_hi"])
        ]
    return out.reset_index(drop=True)


def inconsistency_view(counts: pd.DataFrame, source: str) -> pd.DataFrame:
    """Counts of `oracle_inconsistency` pooled per (estimator, source): same-step disagreement by pair kind, zero
    share, mean |dA| / std, the control's ordered share and the pair counts (scpo.analysis.inconsistency.rates)."""
    from scpo.analysis.inconsistency import COUNT_COLUMNS, PAIR_KINDS, rates

    cols = [c for c in (*COUNT_COLUMNS, "n_control", "n_ordered") if c in counts]
    pooled = rates(
        counts.groupby(["estimator", source, "pair_set", "kind"], sort=False, as_index=False)[cols].sum(min_count=1)
    )
    out = []
    for (est, src), part in pooled.groupby(["estimator", source], sort=False):
        same = part[part["pair_set"] == "same_step"].set_index("kind")
        row = {"estimator": est, source: src}
        for kind in ("all", *PAIR_KINDS):
            row[f"disagree_{kind}"] = same.loc[kind, "disagreement"] if kind in same.index else float("nan")
        row.update(
            zero_share=same.loc["all", "zero_share"],
            mean_abs_diff=same.loc["all", "mean_abs_diff"],
            control_ordered=same.loc["all", "control_ordered"],
            n_pairs=int(same.loc["all", "n_pairs"]),
            n_pairs_won_failed=int(same.loc["won_failed", "n_pairs"]),
            n_control=int(same.loc["all", "n_control"]),
        )
        out.append(row)
    return pd.DataFrame(out)


def run_env_name(run: Path) -> str | None:
    """The environment a run folder was trained on: its provenance's env.name, else its summary's, else the first
    saved rollouts' env_name (None when nothing says)."""
    for name, key in (("provenance.json", ("config", "env", "name")), ("summary.json", ("env",))):
        try:
            value = json.loads((Path(run) / name).read_text())
            for k in key:
                value = value[k]
            return str(value)
        except (OSError, ValueError, KeyError, TypeError):
            continue
    files = sorted((Path(run) / "rollouts").glob("iter_*.parquet"))
    if files:
        try:
            names = pd.read_parquet(files[0], columns=["env_name"])["env_name"]
            return str(names.iloc[0]) if len(names) else None
        except (OSError, ValueError, KeyError):
            return None
    return None


def trained_runs(cfg, note: Callable[[str], None] | None = None) -> dict[str, list[Path]]:
    """{method: [run dirs with saved rollouts]} over report.methods x report.seeds under <train.out_dir>/alfworld; a
    run there that was trained on another environment is left out, with one line to `note`."""
    out = {}
    for m in cfg.report.methods:
        runs = [run_dir(cfg.train.out_dir, "alfworld", m, s) for s in cfg.report.seeds]
        runs = [r for r in runs if (r / "rollouts").is_dir() and any((r / "rollouts").glob("iter_*"))]
        kept = []
        for r in runs:
            env = run_env_name(r)
            if env not in (None, "alfworld"):
                if note is not None:
                    note(f"skipping {r}: a {env} run (credit fidelity reads ALFWorld rollouts, which a planner labels)")
                continue
            kept.append(r)
        if kept:
            out[m] = kept
    return out


def _check_games(cfg) -> None:
    """DataError (one line) unless data.root holds ALFWorld games of fidelity.split."""
    from scpo.envs.alfworld import list_tasks

    f = cfg.fidelity
    try:
        tasks = list_tasks(f.split, cfg.data.root, limit=f.n_tasks)
    except ExpectedError:
        raise
    except (OSError, ValueError) as err:
        raise DataError(
            f"no ALFWorld games of split {f.split!r} under data.root={cfg.data.root} ({str(err).strip()[:160]}); "
            "run `scpo prepare-data --only alfworld`"
        ) from None
    if not tasks:
        raise DataError(
            f"no ALFWorld games of split {f.split!r} under data.root={cfg.data.root}; run "
            "`scpo prepare-data --only alfworld`"
        )


def sweep_grid(cfg) -> list[dict]:
    """The product of cfg.fidelity.sweep_* as SCPO option dicts."""
    f = cfg.fidelity
    return [
        {"scorer": sc, "step_text": st, "match": m, "tau": tau}
        for sc, st, m, tau in itertools.product(f.sweep_scorer, f.sweep_step_text, f.sweep_match, f.sweep_tau)
    ]


def _write(layout: ReportLayout, name: str, df: pd.DataFrame, title: str, note: str) -> dict:
    csv, md = layout.table(name)
    write_table(df, csv, md, title, note=note)
    return {name: str(csv)}


def _shown(path) -> str:
    """A run folder as the report names it: relative to the working directory (the repository root under DVC) when
    inside it, so that reports do not carry the absolute paths of the machine that made them."""
    path = Path(path)
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def write_fidelity_report(
    cfg,
    reports_dir: str | Path = "reports",
    *,
    trained: bool = True,
    sweep: bool = True,
    progress: bool = True,
    note: Callable[[str], None] | None = None,
) -> tuple[dict, FidelityResult]:
    """Run the benchmark of cfg.fidelity and write its tables and figures; returns ({name: path}, noisy result).
    `note(line)` receives the line of each trained run left out (module docstring)."""
    layout = ReportLayout(Path(reports_dir))
    f = cfg.fidelity
    _check_games(cfg)
    runs = trained_runs(cfg, note) if trained else {}
    t_start, c_start = time.perf_counter(), cpu_seconds()
    res = noisy_fidelity(cfg, progress=progress)
    n_tasks = res.groups["task_id"].nunique()
    setting = (
        f"noisy-optimal policy (planner's command with prob. 1 - eps, else a random admissible one), "
        f"{n_tasks} {f.split} tasks x seeds {list(f.seeds)}, groups of {f.group_size}, max {f.max_steps} steps; "
        f"mean ± std [95% t-interval] over seeds."
    )
    paths = {}
    full = res.summary.sort_values(["kind", "eps", "estimator"], kind="stable")
    csv, md = layout.table("credit_fidelity")
    full.to_csv(csv, index=False)
    shown = readable(res.summary, ["estimator", "eps"])
    write_table(
        shown,
        layout.tables / "credit_fidelity_view.csv",
        md,
        "Credit fidelity of every estimator",
        note=f"{setting} {PROXY_NOTE} {WRONG_SIGN_NOTE} Full numbers: credit_fidelity.csv.",
    )
    paths["credit_fidelity"] = str(csv)
    by_type = res.by_task_type[res.by_task_type["task_type"] != "all"]
    paths.update(
        _write(
            layout,
            "credit_fidelity_by_task_type",
            readable(by_type, ["estimator", "eps"]),
            "Credit fidelity by task type (all groups)",
            f"{setting} {PROXY_NOTE}",
        )
    )
    paths["figure"] = str(plot_fidelity_vs_eps(res.summary, layout.figure("credit_fidelity")))
    paths.update(
        _write(
            layout,
            "credit_fidelity_inconsistency",
            inconsistency_view(res.inconsistency, "eps"),
            "Semantic inconsistency (revision 2) on the same rollouts, with its oracle-progress control",
            f"{setting} Same-step pairs: identical observation and action in one group; disagreement = "
            "opposite signs among pairs with both advantages non-zero; control_ordered: same-observation "
            "pairs with different actions whose advantages are ordered like their oracle progress q "
            "(must not degrade when consistency improves). " + PROXY_NOTE,
        )
    )
    timing = {"noisy": {**res.seconds, **res.planner, "rows": int(sum(b.n_rows for b in res.batches.values()))}}
    if trained:
        if not runs:  # the same files either way (pipeline outputs), saying why they are empty
            pd.DataFrame().to_csv(layout.tables / "credit_fidelity_trained_full.csv", index=False)
            pd.DataFrame().to_csv(layout.tables / "credit_fidelity_trained_inconsistency.csv", index=False)
            paths.update(
                _write(
                    layout,
                    "credit_fidelity_trained",
                    pd.DataFrame({"note": ["no saved ALFWorld rollouts"]}),
                    "Credit fidelity on the trained policies' saved rollouts",
                    f"No run of {list(cfg.report.methods)} x seeds {list(cfg.report.seeds)} under "
                    f"{cfg.train.out_dir}/alfworld has saved rollouts.",
                )
            )
        else:
            tr = trained_fidelity(cfg, runs, progress=progress)
            timing["trained"] = {
                **tr.seconds,
                "rows": int(sum(b.n_rows for b in tr.batches.values())),
                "runs": {m: [_shown(r) for r in rs] for m, rs in runs.items()},
            }
            tr.summary.to_csv(layout.tables / "credit_fidelity_trained_full.csv", index=False)
            inc = inconsistency_view(tr.inconsistency, "policy_of")
            inc.to_csv(layout.tables / "credit_fidelity_trained_inconsistency.csv", index=False)
            paths.update(
                _write(
                    layout,
                    "credit_fidelity_trained",
                    readable(tr.summary, ["estimator", "policy_of"]),
                    "Credit fidelity on the trained policies' saved rollouts",
                    "Rollouts: every saved iteration of the ALFWorld runs (policy_of = the method that "
                    "trained the policy; seeds = its runs), q labelled by replay in the fast engine. "
                    + PROXY_NOTE
                    + " "
                    + WRONG_SIGN_NOTE,
                )
            )
    if sweep:
        from scpo.credit.dispatch import default_scorer

        scorers = {name: default_scorer(name, None) for name in f.sweep_scorer}
        before = {name: sc.stats for name, sc in scorers.items()}
        timer = Timer()
        with timer("sweep"):
            sw = scpo_sweep(cfg, res.batches, sweep_grid(cfg), progress=progress)
        timing["sweep"] = {**timer.seconds, "configs": len(sweep_grid(cfg))}
        for name, sc in scorers.items():  # model scorers: pairs scored once, then served from the cache across tau and
            # match; the lexical scorer scores whole matrices in rapidfuzz (cheaper than its cache) and bypasses it
            req = sc.stats["pairs_requested"] - before[name]["pairs_requested"]
            hits = sc.stats["cache_hits"] - before[name]["cache_hits"]
            timing["sweep"][f"{name}_pairs_requested"] = req
            timing["sweep"][f"{name}_cache_hit_rate"] = hits / req if req and hits else "pair cache not used"
        sw.to_csv(layout.tables / "scpo_defaults_sweep_full.csv", index=False)
        keys = [c for c in ("scorer", "step_text", "match", "tau") if c in sw.columns]
        agg = (
            sw[sw["kind"].isin(["all", "mixed"])]
            .groupby(keys + ["kind"], sort=False)[[f"{m}_mean" for m in METRICS]]
            .mean()
            .reset_index()
        )
        paths.update(
            _write(
                layout,
                "scpo_defaults_sweep",
                agg,
                "SCPO options on credit fidelity",
                f"Mean over eps {list(f.eps)} and seeds; {setting} {PROXY_NOTE}",
            )
        )
        paths["sweep_figure"] = str(plot_scpo_sweep(sw, layout.figure("scpo_defaults_sweep")))
        paths.update(
            _write(
                layout,
                "scpo_tau_calibration",
                calibrate_tau(sw, cfg.credit.scpo),
                "SCPO's tau calibrated per scorer against the planner's q",
                "Per scorer, step text and match of the sweep (is_default: the config's step text and match), in "
                f"mixed groups, mean over eps {list(f.eps)} and seeds: the tau of the grid with the least wrong-sign "
                f"credit (ties: higher AUC) and the tau with the best AUC, beside the default tau "
                f"{cfg.credit.scpo.tau:g}; calibrated: the default is the least-wrong-sign tau. {setting} "
                f"{WRONG_SIGN_NOTE} {PROXY_NOTE}",
            )
        )
    timing["total"] = {"wall_s": time.perf_counter() - t_start, "cpu_s": cpu_seconds() - c_start, "workers": f.workers}
    timing_path = layout.tables / "credit_fidelity_timing.json"
    timing_path.write_text(json.dumps(timing, indent=1))
    paths["timing"] = str(timing_path)
    return paths, res

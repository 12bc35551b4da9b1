"""Notebook 06's work: every table and curve of the paper-style report, written under reports/.

reports/tables/paper/comparison.{csv,md}              ours beside the published figures, each labelled
reports/tables/paper/results.{csv,md}                 success per method x env (mean ± std over seeds)
reports/tables/paper/task_types_<env>.{csv,md}        per task type (hard multi-step types marked †)
reports/tables/paper/published.{csv,md}               the papers' figures (other model and scale)
reports/tables/paper/success_curves_<env>.csv         seed-mean training success per method (dvc plots)
reports/figures/paper/success_curves_<env>.png
reports/results.md                                    all of the above on one page, ours and theirs separated
"""

from __future__ import annotations

from pathlib import Path

from scpo.config import Config
from scpo.pipeline.layout import ReportLayout
from scpo.tables.curves import load_histories, plot_curves, wide_curves
from scpo.tables.published import PUBLISHED_SCALE, published_by_method, published_table
from scpo.tables.success import (
    comparison_table,
    load_eval_runs,
    our_scale_label,
    results_table,
    task_type_table,
    write_table,
)

__all__ = ["write_paper_tables"]


def write_paper_tables(cfg: Config, reports_root: Path) -> dict:
    """Write the files listed in the module docstring;
    return {'results_md': Path, 'tables': [...], 'figures': [...]}."""
    layout = ReportLayout(Path(reports_root))
    tables_dir, figures_dir = layout.tables / "paper", layout.figures / "paper"
    rep = cfg.report
    ours = our_scale_label(cfg)
    evals = load_eval_runs(layout.eval, rep.envs, rep.methods, rep.seeds)
    tables, figures, sections = [], [], []

    def table(df, name, title, note):
        paths = write_table(df, tables_dir / f"{name}.csv", tables_dir / f"{name}.md", title, note)
        tables.extend(paths)
        sections.append(paths[1].read_text())

    hard = ", ".join(rep.hard_task_types)
    results = results_table(evals, rep.methods, rep.hard_task_types)
    table(
        comparison_table(results, published_by_method(), rep.envs, "ours", "published"),
        "comparison",
        "Success rate (%): ours beside the published figures",
        f"**ours** = {ours}.  \n**published** = {PUBLISHED_SCALE}.  \nDifferent models and scales: compare the "
        "ranking of methods, not the absolute numbers.",
    )
    table(
        results,
        "results",
        "Ours: success rate (%), mean ± std over seeds",
        f"Ours: {ours}. '<env> all': every evaluated episode of the eval splits; '<env> hard': the task types "
        f"containing {hard}.",
    )
    for env in rep.envs:
        table(
            task_type_table(evals, env, rep.methods, rep.hard_task_types),
            f"task_types_{env}",
            f"Ours, {env}: success rate (%) per task type, mean ± std over seeds",
            f"Ours: {ours}. † = hard multi-step type.",
        )
    table(
        published_table(),
        "published",
        "Published figures (not ours): success rate (%)",
        "From the papers (model per row; 16 tasks x 8 rollouts, 150 iterations); not comparable in absolute terms "
        "with ours (different model and scale).",
    )
    for env in rep.envs:
        long = load_histories(cfg.train.out_dir, env, rep.methods, rep.seeds)
        wide_curves(long).to_csv(tables_dir / f"success_curves_{env}.csv", index=False)
        title = f"{env}: success on training rollouts (mean ± sd over seeds {list(rep.seeds)})"
        figures.append(plot_curves(long, figures_dir / f"success_curves_{env}.png", title=title))
    results_md = layout.root / "results.md"
    results_md.write_text("# Results\n\n" + "\n".join(sections), encoding="utf-8")
    return {"results_md": results_md, "tables": tables, "figures": figures}

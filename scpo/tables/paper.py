"""Notebook 06's work: every table and curve of the paper-style report, written under reports/.

reports/tables/paper/comparison.{csv,md}              ours beside the published figures, each labelled
reports/tables/paper/results.{csv,md}                 success per method x env (mean ± std over seeds)
reports/tables/paper/task_types_<env>.{csv,md}        per task type (hard multi-step types marked †)
reports/tables/paper/published.{csv,md}               the papers' figures (other model and scale)
reports/tables/paper/success_curves_<env>.csv         seed-mean training success per method (dvc plots)
reports/figures/paper/success_curves_<env>.png
reports/results.md                                    all of the above on one page, ours and theirs separated,
                                                      headed by the learning benchmark (its cpu-profile tables, and
                                                      the full-size study's when its results are there)
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


def _learning_sections(reports_root: Path, study: Path | None) -> list[str]:
    """The learning benchmark's ranking and difference tables (Markdown), first the full-size study's (in its results
    folder or its tables/), then the pipeline's; the ones that exist."""
    sections = []
    for label, folder in (("Full-size study (experiments/learning_benchmark)", study), ("This pipeline run", None)):
        root = Path(folder) if folder is not None else ReportLayout(Path(reports_root)).tables
        for name in ("learning_ranking", "learning_differences"):
            path = next((p for p in (root / f"{name}.md", root / "tables" / f"{name}.md") if p.exists()), None)
            if path is not None:
                text = path.read_text(encoding="utf-8")
                sections.append(text.replace("## ", f"## {label}: ", 1))
    return sections


def write_paper_tables(cfg: Config, reports_root: Path, learning_study: Path | None = None) -> dict:
    """Write the files listed in the module docstring (`learning_study`: the full-size learning benchmark's results
    folder, read if it holds its tables); return {'results_md': Path, 'tables': [...], 'figures': [...]}."""
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
    headline = _learning_sections(layout.root, learning_study)
    intro = (
        "The headline is the learning benchmark: how fast each estimator makes the agent learn on a fixed task "
        "panel (AULC, paired seeds, the oracle and shuffled references; notebook 08). Below it, the short success "
        "runs of every method beside the published figures.\n\n"
    )
    results_md.write_text("# Results\n\n" + intro + "\n".join(headline + sections), encoding="utf-8")
    return {"results_md": results_md, "tables": tables, "figures": figures}

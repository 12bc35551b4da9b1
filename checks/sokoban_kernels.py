"""The Sokoban stage's conclusions under two kernel families, side by side (docs/reproducibility.md, "The Sokoban
stage under another kernel family").

Run the stage twice, pinned (the stage itself) and under another family (a fresh process without the pin's
variables: `scpo.testbeds.sokoban_stage.families`), each with its own runs folder and reports folder, then:

    python checks/sokoban_kernels.py --a reports --a-runs runs/sokoban --a-label pinned \
        --b /tmp/unpinned/reports --b-runs /tmp/unpinned/runs --b-label unpinned

prints, as markdown: how many curve points differ at the bit level and by how much, then every comparison of
sokoban_differences.csv with both columns (mean [95% paired-t CI], sign-flip Holm p, paired-t Holm p) and whether
its marks (sign, significant by sign-flip Holm, significant by paired-t Holm) agree. Exit 1 if a mark differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from scpo.testbeds.sokoban_tables import compare_marks, significance_marks

KEYS = ["start", "seed", "method", "iteration"]


def curve_differences(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """Points of the two runs' curves (same keys) whose success differs at all, the runs they belong to, the largest
    absolute difference."""
    both = a[KEYS + ["success"]].merge(b[KEYS + ["success"]], on=KEYS, suffixes=("_a", "_b"), validate="one_to_one")
    if len(both) != len(a) or len(both) != len(b):
        raise SystemExit("the two runs folders hold different runs")
    diff = (both["success_a"] - both["success_b"]).abs()
    runs = both.loc[diff > 0, ["start", "seed", "method"]].drop_duplicates()
    return {
        "points": len(both),
        "points_differing": int((diff > 0).sum()),
        "runs": len(both[["start", "seed", "method"]].drop_duplicates()),
        "runs_differing": len(runs),
        "max_abs_difference": float(diff.max()),
    }


def side_by_side(a: pd.DataFrame, b: pd.DataFrame, labels: tuple[str, str]) -> pd.DataFrame:
    """Every comparison of two sokoban_differences tables with both columns and the marks' agreement."""
    keys = ["start", "reference", "method"]
    marks = compare_marks(significance_marks(a), significance_marks(b), labels)
    cols = keys + ["mean", "lo", "hi", "p_holm", "p_t_holm"]
    both = a[cols].merge(b[cols], on=keys, suffixes=tuple(f"_{x}" for x in labels))
    return both.merge(marks[keys + ["agree"]], on=keys)


def markdown(table: pd.DataFrame, labels: tuple[str, str]) -> str:
    def cell(r, x):
        mark = "**" if r[f"p_holm_{x}"] <= 0.05 else ""
        return (
            f"{mark}{r[f'mean_{x}']:+.3f} [{r[f'lo_{x}']:+.3f}, {r[f'hi_{x}']:+.3f}]{mark} | "
            f"{r[f'p_holm_{x}']:.2g} | {r[f'p_t_holm_{x}']:.2g}"
        )

    head = " | ".join(f"{x}: AULC difference [95% paired t] | sign-flip Holm p | paired-t Holm p" for x in labels)
    lines = [f"| start | comparison | {head} | marks agree |", "|---" * (3 + 3 * len(labels)) + "|"]
    for _, r in table.iterrows():
        lines.append(
            f"| {r['start']} | {r['method']} - {r['reference']} | {cell(r, labels[0])} | {cell(r, labels[1])} | "
            f"{'yes' if r['agree'] else '**no**'} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for side in ("a", "b"):
        ap.add_argument(f"--{side}", type=Path, required=True, help="a reports folder")
        ap.add_argument(f"--{side}-runs", type=Path, required=True, help="its runs folder (curves.csv)")
        ap.add_argument(f"--{side}-label", default=side)
    args = ap.parse_args(argv)
    labels = (args.a_label, args.b_label)
    curves = [pd.read_csv(p / "curves.csv") for p in (args.a_runs, args.b_runs)]
    diffs = [pd.read_csv(p / "tables" / "sokoban_differences.csv") for p in (args.a, args.b)]
    c = curve_differences(*curves)
    print(
        f"Curves: {c['points_differing']} of {c['points']} points differ at the bit level ({c['runs_differing']} of "
        f"{c['runs']} runs), largest absolute difference {c['max_abs_difference']:.3g}.\n"
    )
    table = side_by_side(*diffs, labels)
    print(markdown(table, labels))
    agree = bool(np.all(table["agree"]))
    print(f"\nEvery mark agrees: {'yes' if agree else 'no'} ({int(table['agree'].sum())} of {len(table)}).")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())

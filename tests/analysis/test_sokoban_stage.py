"""The Sokoban benchmark's stage (notebook 09; `scpo.testbeds.sokoban_benchmark`, `sokoban_tables`, `sokoban_stage`):
wrong-sign credit counted against the exact advantage, the run folder's settings, the tables of a smoke run, and the
stage's significance marks under another kernel family (bit-different curves, the same marks)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from scpo.config import load_config
from scpo.errors import ExpectedError
from scpo.numerics import unsupported_reason
from scpo.testbeds.sokoban_benchmark import check_settings, run_settings, setup, wrong_sign_credit
from scpo.testbeds.sokoban_stage import OVERRIDES, families, run_in_family
from scpo.testbeds.sokoban_tables import compare_marks, significance_marks


@pytest.fixture(scope="module")
def smoke(repo_root):
    overrides = OVERRIDES | {"credit.exact_advantage.whiten": False}
    cfg = load_config(repo_root / "params.yaml", profile="smoke", overrides=overrides)
    s = run_settings(cfg.sokoban)
    return cfg, s, setup(cfg, s)


def test_wrong_sign_credit_is_zero_for_the_exact_advantage_and_large_for_shuffled_credit(smoke):
    cfg, s, env = smoke
    signs = wrong_sign_credit(s, env, 16, ["imitation"], ["exact_advantage", "grpo", "shuffled"]).set_index("method")
    exact = signs.loc["exact_advantage"]
    assert exact["n_positive"] > 0 and exact["n_negative"] > 0
    assert exact["wrong_given_positive"] == 0 and exact["wrong_given_negative"] == 0  # A = A^pi on every step
    shuffled = signs.loc["shuffled"]
    assert shuffled["n_positive"] + shuffled["n_negative"] > 0
    # credit permuted within each group lands on steps whose own advantage has the other sign
    assert np.nanmax(shuffled[["wrong_given_positive", "wrong_given_negative"]].to_numpy(float)) > 0.1


def test_a_run_folder_keeps_its_runs_only_under_its_settings(tmp_path, smoke):
    _, s, _ = smoke
    check_settings(tmp_path, s)
    check_settings(tmp_path, s)  # the same settings: accepted again
    with pytest.raises(ExpectedError, match="other settings"):
        check_settings(tmp_path, s | {"warm_iterations": s["warm_iterations"] + 1})
    # a folder from before n_tasks, group_size and panel_seed were recorded: its runs used 2, 8 and 0
    older = {k: v for k, v in s.items() if k not in ("n_tasks", "group_size", "panel_seed")}
    (tmp_path / "settings.json").write_text(json.dumps(older))
    check_settings(tmp_path, s | {"n_tasks": 2, "group_size": 8, "panel_seed": 0})
    (tmp_path / "settings.json").write_text(json.dumps(older))
    with pytest.raises(ExpectedError, match="other settings"):
        check_settings(tmp_path, s | {"n_tasks": 4, "group_size": 8, "panel_seed": 0})


def test_marks_compare_sign_and_both_tests():
    a = pd.DataFrame(
        {
            "start": ["imitation"] * 2,
            "reference": ["grpo"] * 2,
            "method": ["exact_advantage", "shuffled"],
            "mean": [0.2, -0.01],
            "p_holm": [0.001, 0.5],
            "p_t_holm": [0.001, 0.04],
        }
    )
    b = a.assign(mean=[0.1, 0.01])
    both = compare_marks(significance_marks(a), significance_marks(b), ("x", "y"))
    assert both["agree"].tolist() == [True, False]  # shuffled's sign flipped
    assert both["significant_t_x"].tolist() == [True, True]


@pytest.mark.slow
def test_the_smoke_stage_under_another_kernel_family_differs_in_bits_and_agrees_on_every_mark(tmp_path, repo_root):
    """The stage's computation (smoke profile) in two fresh processes: under the CPU pin and under ATen's portable
    kernels (`aten-default`; where the pin cannot hold, the machine's own kernels against those): the curves differ at
    the bit level, every significance mark (sign, sign-flip Holm, paired-t Holm) is the same."""
    first = "unpinned" if unsupported_reason() else "pinned"
    marks, curves = {}, {}
    for family in (first, "aten-default"):
        out = tmp_path / family
        run_in_family(family, out / "runs", out / "reports", profile="smoke", cwd=repo_root)
        curves[family] = pd.read_csv(out / "runs" / "curves.csv")
        marks[family] = significance_marks(pd.read_csv(out / "reports" / "tables" / "sokoban_differences.csv"))
    a, b = curves[first], curves["aten-default"]
    assert a[["start", "seed", "method", "iteration"]].equals(b[["start", "seed", "method", "iteration"]])
    assert (a["success"].to_numpy() != b["success"].to_numpy()).any()  # another kernel family: other bits
    both = compare_marks(marks[first], marks["aten-default"], (first, "aten_default"))
    assert len(both) == len(marks[first]) > 0 and both["agree"].all(), both


def test_kernel_families_differ_only_in_the_pins_variables():
    env = {"PATH": "/bin", "ATEN_CPU_CAPABILITY": "avx512", "SCPO_NUMERICS_PIN": "x"}
    fam = families(env)
    assert "ATEN_CPU_CAPABILITY" not in fam["unpinned"] and fam["unpinned"]["PATH"] == "/bin"
    assert fam["pinned"]["ATEN_CPU_CAPABILITY"] == "avx2" and fam["aten-default"]["ATEN_CPU_CAPABILITY"] == "default"
    assert fam["aten-default"]["MKL_CBWR"] == fam["pinned"]["MKL_CBWR"]

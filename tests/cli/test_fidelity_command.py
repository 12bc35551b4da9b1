"""`scpo fidelity`: the command-line options reach the config, and the command ends by printing what it wrote as
JSON (the testbed itself is stubbed here; tests/analysis/test_fidelity_metrics.py and the notebook smoke run cover
it)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from helpers import REPO
from helpers.runs import cli


def test_fidelity_passes_its_options_and_prints_the_written_files_as_json(tmp_path, monkeypatch):
    import scpo.testbeds.fidelity_tables as fidelity_report

    seen = {}

    def stub(cfg, reports_dir, *, trained, sweep, note=None):
        seen.update(cfg=cfg, reports_dir=reports_dir, trained=trained, sweep=sweep)
        paths = {"summary": str(Path(reports_dir) / "tables" / "credit_fidelity.csv")}
        return paths, SimpleNamespace(seconds={"noisy": 1.5}, planner={"calls": 3})

    monkeypatch.setattr(fidelity_report, "write_fidelity_report", stub)
    result = cli(
        "fidelity",
        "--params",
        REPO / "params.yaml",
        "--eps",
        "0.1,0.3",
        "--tasks",
        "2",
        "--seeds",
        "4,5",
        "--estimators",
        "grpo, oracle",
        "--no-trained",
        "--reports-dir",
        tmp_path / "reports",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "written": {"summary": str(tmp_path / "reports" / "tables" / "credit_fidelity.csv")},
        "seconds": {"noisy": 1.5},
        "planner": {"calls": 3},
    }
    f = seen["cfg"].fidelity
    assert (f.eps, f.n_tasks, f.seeds, f.methods) == ((0.1, 0.3), 2, (4, 5), ("grpo", "oracle"))
    assert seen["trained"] is False and seen["sweep"] is False

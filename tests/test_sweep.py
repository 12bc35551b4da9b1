"""`scpo sweep`: grid parsing, parameter routing, and a real Papermill sweep over a two-cell notebook."""

from __future__ import annotations

import json

import nbformat
import pytest

from scpo.pipeline.sweep import grid_points, parse_grid, point_parameters, point_slug, run_sweep


def test_parse_grid_yaml_values():
    assert parse_grid(["method=grpo,scpo", "credit.scpo.tau=0.6,0.8", "seed=0"]) == {
        "method": ["grpo", "scpo"], "credit.scpo.tau": [0.6, 0.8], "seed": [0]}
    for bad in (["method"], ["=1,2"], ["a=1", "a=2"], []):
        with pytest.raises(ValueError):
            parse_grid(bad)


def test_grid_points_product_in_order():
    points = grid_points({"a": [1, 2], "b": ["x", "y"]})
    assert points == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]
    assert point_slug({"credit.scpo.tau": 0.8, "method": "scpo"}) == "credit.scpo.tau-0.8__method-scpo"
    assert point_slug({"x": "a/b c"}) == "x-a_b_c"


def test_parameters_route_dotted_keys_into_overrides():
    params = point_parameters({"method": "scpo", "credit.scpo.tau": 0.8, "report.methods": ["grpo"]},
                              ["method", "overrides"], base={"overrides": "train.iterations=1"})
    assert params == {"method": "scpo", "overrides": 'train.iterations=1; credit.scpo.tau=0.8; report.methods=["grpo"]'}
    with pytest.raises(ValueError, match="'lr'"):
        point_parameters({"lr": 1}, ["method", "overrides"])
    with pytest.raises(ValueError, match="no 'overrides'"):
        point_parameters({"a.b": 1}, ["method"])


def _notebook(path):
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('x = 1\noverrides = ""\nsummary_json = ""')
    params.metadata["tags"] = ["parameters"]
    body = nbformat.v4.new_code_cell(
        "import json\n"
        "assert x != 3, 'x = 3 fails on purpose'\n"
        "json.dump({'x2': 2 * x, 'nested': {'overrides': overrides}}, open(summary_json, 'w'))")
    nb.cells = [params, body]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_run_sweep_executes_each_point_and_records_failures(tmp_path):
    notebook = _notebook(tmp_path / "nb.ipynb")
    summary = run_sweep(notebook, ["x=2,3", "a.b=7"], tmp_path / "out")
    assert summary["x"].tolist() == [2, 3]
    assert summary["status"].iloc[0] == "ok"
    assert summary["status"].iloc[1].startswith("failed: PapermillExecutionError")
    assert summary["x2"].iloc[0] == 4
    assert summary["nested.overrides"].iloc[0] == "a.b=7"
    assert (tmp_path / "out" / "x-2__a.b-7.ipynb").exists()
    assert (tmp_path / "out" / "summary.csv").exists()
    assert (tmp_path / "out" / "summary.md").read_text().startswith("## Sweep of nb.ipynb")
    executed = json.loads((tmp_path / "out" / "x-2__a.b-7.ipynb").read_text())
    assert any("injected-parameters" in c["metadata"].get("tags", []) for c in executed["cells"])

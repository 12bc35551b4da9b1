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


def _gpu_notebook(path):
    """A point that records the GPU it was given (CUDA_VISIBLE_DEVICES) in its summary."""
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('x = 1\noverrides = ""\nsummary_json = ""')
    params.metadata["tags"] = ["parameters"]
    body = nbformat.v4.new_code_cell(
        "import json, os\n"
        "json.dump({'x2': 2 * x, 'gpu': os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}, open(summary_json, 'w'))")
    nb.cells = [params, body]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_local_backend_gives_each_point_one_gpu(tmp_path):
    """`--backend local --gpus 0,1`: 4 points, 2 at a time, each in its own Papermill process whose
    CUDA_VISIBLE_DEVICES is one GPU id; the summary has the serial sweep's rows in grid order."""
    notebook = _gpu_notebook(tmp_path / "nb.ipynb")
    summary = run_sweep(notebook, ["x=1,2,3,4"], tmp_path / "local", backend="local", gpus="0,1")
    assert summary["x"].tolist() == [1, 2, 3, 4] and (summary["status"] == "ok").all()
    assert summary["x2"].tolist() == [2, 4, 6, 8]
    assert set(summary["gpu"].astype(str)) <= {"0", "1"} and len(set(summary["gpu"].astype(str))) >= 1
    failing = run_sweep(_notebook(tmp_path / "fail.ipynb"), ["x=2,3"], tmp_path / "local_fail", backend="local",
                        jobs=2)
    assert failing["status"].iloc[0] == "ok" and failing["status"].iloc[1].startswith("failed:")
    assert "x = 3 fails on purpose" in failing["status"].iloc[1]
    with pytest.raises(ValueError, match="backend='slurm'"):
        run_sweep(notebook, ["x=1"], tmp_path / "bad", backend="slurm")


def test_ray_backend_runs_points_as_ray_tasks_and_writes_the_serial_summary(tmp_path):
    """A local Ray instance (CPU: 0 GPUs per point) runs 4 points, one of them failing; summary.csv and summary.md
    are the serial sweep's, byte for byte once the two parent folders' names (of equal length) are set aside."""
    import ray  # the dev extra installs it
    notebook = _notebook(tmp_path / "nb.ipynb")
    grid = ["x=1,2,3,4", "a.b=7"]
    (tmp_path / "serial").mkdir()
    (tmp_path / "ray___").mkdir()
    serial = run_sweep(notebook, grid, tmp_path / "serial" / "out")
    try:
        ray.init(num_cpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
        parallel = run_sweep(notebook, grid, tmp_path / "ray___" / "out", backend="ray", gpus_per_point=0)
    finally:
        ray.shutdown()
    assert parallel["status"].tolist() == serial["status"].tolist() and parallel["status"].iloc[2].startswith("failed")
    for name in ("summary.csv", "summary.md"):
        text = (tmp_path / "ray___" / "out" / name).read_text().replace("ray___", "serial")
        assert text == (tmp_path / "serial" / "out" / name).read_text()

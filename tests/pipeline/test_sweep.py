"""`scpo sweep`: grid parsing, parameter routing, and a real Papermill sweep over a two-cell notebook."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from scpo.cli import app
from scpo.pipeline.sweep import grid_points, parse_grid, point_parameters, point_slug, run_sweep

from helpers.notebooks import write_notebook


def test_parse_grid_yaml_values():
    assert parse_grid(["method=grpo,scpo", "credit.scpo.tau=0.6,0.8", "seed=0"]) == {
        "method": ["grpo", "scpo"],
        "credit.scpo.tau": [0.6, 0.8],
        "seed": [0],
    }
    for bad in (["method"], ["=1,2"], ["a=1", "a=2"], []):
        with pytest.raises(ValueError):
            parse_grid(bad)


def test_grid_points_product_in_order():
    points = grid_points({"a": [1, 2], "b": ["x", "y"]})
    assert points == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 2, "b": "x"}, {"a": 2, "b": "y"}]
    assert point_slug({"credit.scpo.tau": 0.8, "method": "scpo"}) == "credit.scpo.tau-0.8__method-scpo"
    assert point_slug({"x": "a/b c"}) == "x-a_b_c"


def test_parameters_route_dotted_keys_into_overrides():
    params = point_parameters(
        {"method": "scpo", "credit.scpo.tau": 0.8, "report.methods": ["grpo"]},
        ["method", "overrides"],
        base={"overrides": "train.iterations=1"},
    )
    assert params == {"method": "scpo", "overrides": 'train.iterations=1; credit.scpo.tau=0.8; report.methods=["grpo"]'}
    with pytest.raises(ValueError, match="'lr'"):
        point_parameters({"lr": 1}, ["method", "overrides"])
    with pytest.raises(ValueError, match="no 'overrides'"):
        point_parameters({"a.b": 1}, ["method"])


def _notebook(path):
    return write_notebook(
        path,
        'x = 1\noverrides = ""\nout_dir = ""\nsummary_json = ""',
        "import json, pathlib\n"
        "assert x != 3, 'x = 3 fails on purpose'\n"
        "pathlib.Path(out_dir).mkdir(parents=True)  # fails when two points share a folder\n"
        "(pathlib.Path(out_dir) / 'run.txt').write_text(str(x))\n"
        "json.dump({'x2': 2 * x, 'x': 'the run summary names x too', 'nested': {'overrides': overrides}},\n"
        "          open(summary_json, 'w'))",
    )


def test_run_sweep_executes_each_point_in_its_own_folder_and_records_failures(tmp_path, capfd):
    notebook = _notebook(tmp_path / "nb.ipynb")
    summary = run_sweep(notebook, ["x=2,3,4", "a.b=7"], tmp_path / "out")
    assert summary["x"].tolist() == [2, 3, 4]  # the grid's column, not the run summary's `x`
    assert summary["result.x"].iloc[0] == "the run summary names x too"
    assert summary["status"].tolist()[0::2] == ["ok", "ok"]
    # the notebook's own error, and the cell it came from (not Papermill's wrapper, PapermillExecutionError)
    assert summary["status"].iloc[1] == "failed: AssertionError: x = 3 fails on purpose (In [3]: import json, pathlib)"
    assert summary["result.x2"].tolist()[0::2] == [4, 8]
    assert summary["result.nested.overrides"].iloc[0] == "a.b=7"
    assert summary["point"].tolist() == ["x-2__a.b-7", "x-3__a.b-7", "x-4__a.b-7"]
    for x, point_dir in zip((2, 4), summary["point_dir"].tolist()[0::2]):  # every point wrote into a folder of its own
        assert (Path(point_dir) / "run.txt").read_text() == str(x)
    assert (tmp_path / "out" / "x-2__a.b-7.ipynb").exists()
    assert (tmp_path / "out" / "summary.csv").exists()
    assert (tmp_path / "out" / "summary.md").read_text().startswith("## Sweep of nb.ipynb")
    executed = json.loads((tmp_path / "out" / "x-2__a.b-7.ipynb").read_text())
    assert any("injected-parameters" in c["metadata"].get("tags", []) for c in executed["cells"])
    assert "running over TCP" not in capfd.readouterr().err  # kernels on IPC transport


def test_a_long_point_name_becomes_a_hash_folder():
    from scpo.pipeline.sweep import point_folder

    point = {"credit.scpo.reference": "shortest", "credit.scpo.step_text": "action_next_obs", "x": "y" * 80}
    name = point_folder(point, 7)
    assert name.startswith("p007-") and len(name) == 17 and name == point_folder(point, 7)
    assert point_folder({"x": 1}, 0) == "x-1"


def test_the_sweep_command_exits_1_when_a_point_fails(tmp_path):
    notebook = _notebook(tmp_path / "nb.ipynb")
    result = CliRunner().invoke(app, ["sweep", str(notebook), "--grid", "x=2,3", "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "x-3: failed: AssertionError: x = 3 fails on purpose" in result.stderr
    assert "1 of 2 points ok" in result.stderr


def _fingerprint(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_overwrite_of_a_sweep_still_running_is_refused_in_one_line(tmp_path):
    """A sweep (a second process) still runs in OUT: `scpo sweep --overwrite --out OUT` names it and changes nothing,
    rather than removing its folders and mixing two sweeps' records and summaries."""
    import subprocess
    import sys
    import time

    from helpers import REPO

    notebook = write_notebook(
        tmp_path / "slow.ipynb",
        'x = 1\nout_dir = ""',
        "import pathlib, time\npathlib.Path(out_dir).mkdir(parents=True)\ntime.sleep(600 if x == 1 else 0)",
    )
    out = tmp_path / "out"
    running = subprocess.Popen(
        [sys.executable, "-m", "scpo.cli", "sweep", str(notebook), "--grid", "x=1", "--out", str(out)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 300
        while not (out / "x-1").is_dir():  # the first point runs
            assert running.poll() is None and time.time() < deadline, "the first sweep did not start its point"
            time.sleep(0.2)
        before = _fingerprint(out)
        result = CliRunner().invoke(app, ["sweep", str(notebook), "--grid", "x=2", "--out", str(out), "--overwrite"])
        assert result.exit_code == 1, result.output
        lines = [ln for ln in result.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and f"sweep folder {out} is in use by pid {running.pid}" in lines[0], result.stderr
        assert _fingerprint(out) == before and running.poll() is None
    finally:
        running.kill()
        running.wait()


def _config_notebook(path):
    """A notebook taking params / profile / overrides (as the project's notebooks do) that reports what it got."""
    return write_notebook(
        path,
        'params = "params.yaml"\nprofile = ""\noverrides = ""\nmethod = "gigpo"\nsummary_json = ""',
        "import json\n"
        "from scpo.pipeline.notebook import notebook_config\n"
        "cfg, root = notebook_config(params, profile, overrides, **{'credit.method': method})\n"
        "json.dump({'profile': cfg.profile, 'iterations': cfg.train.iterations, 'method': cfg.credit.method},\n"
        "          open(summary_json, 'w'))",
    )


def test_profile_and_set_reach_every_point(tmp_path, repo_root):
    notebook = _config_notebook(tmp_path / "cfg.ipynb")
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            str(notebook),
            "--grid",
            "method=grpo,scpo",
            "--out",
            str(tmp_path / "out"),
            "--params",
            str(repo_root / "params.yaml"),
            "--profile",
            "smoke",
            "--set",
            "train.iterations=7",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = pd.read_csv(tmp_path / "out" / "summary.csv")
    assert summary["method"].tolist() == ["grpo", "scpo"] and summary["result.method"].tolist() == ["grpo", "scpo"]
    assert summary["result.profile"].tolist() == ["smoke"] * 2 and summary["result.iterations"].tolist() == [7, 7]


def test_a_bad_point_config_stops_the_sweep_before_anything_runs(tmp_path, repo_root):
    notebook = _config_notebook(tmp_path / "cfg.ipynb")
    result = CliRunner().invoke(
        app,
        [
            "sweep",
            str(notebook),
            "--grid",
            "method=grpo,nosuch",
            "--out",
            str(tmp_path / "out"),
            "--params",
            str(repo_root / "params.yaml"),
            "--set",
            "train.iterations=7",
        ],
    )
    assert result.exit_code == 2
    assert "point method-nosuch:" in result.stderr and "nosuch" in result.stderr
    assert not (tmp_path / "out").exists()


def _gpu_notebook(path):
    """A point that records the GPU it was given (CUDA_VISIBLE_DEVICES) in its summary."""
    return write_notebook(
        path,
        'x = 1\noverrides = ""\nsummary_json = ""',
        "import json, os\n"
        "json.dump({'x2': 2 * x, 'gpu': os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}, open(summary_json, 'w'))",
    )


def test_local_backend_gives_each_point_one_gpu(tmp_path, monkeypatch):
    """`--backend local --gpus 0,1` on a machine showing GPUs 0 and 1: 4 points, 2 at a time, each in its own Papermill
    process whose CUDA_VISIBLE_DEVICES is one GPU id; the summary has the serial sweep's rows in grid order."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    notebook = _gpu_notebook(tmp_path / "nb.ipynb")
    summary = run_sweep(notebook, ["x=1,2,3,4"], tmp_path / "local", backend="local", gpus="0,1")
    assert summary["x"].tolist() == [1, 2, 3, 4] and (summary["status"] == "ok").all()
    assert summary["result.x2"].tolist() == [2, 4, 6, 8]
    assert set(summary["result.gpu"].astype(str)) <= {"0", "1"} and len(set(summary["result.gpu"].astype(str))) >= 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU: --jobs 2 runs two points at once on the CPU
    failing = run_sweep(_notebook(tmp_path / "fail.ipynb"), ["x=2,3"], tmp_path / "local_fail", backend="local", jobs=2)
    assert failing["status"].iloc[0] == "ok" and failing["status"].iloc[1].startswith("failed:")
    # the notebook's own error, read from the Papermill process's output, as the serial backend reports it
    assert failing["status"].iloc[1] == "failed: AssertionError: x = 3 fails on purpose (In [3]: import json, pathlib)"
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


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--jobs", "0"], "--jobs 0: allowed: an integer >= 1"),
        (["--backend", "local", "--jobs", "-1"], "--jobs -1: allowed: an integer >= 1"),
        (["--backend", "local", "--gpus", "0,1"], "--gpus 0,1: GPU 0 is not on this machine (no GPU is visible"),
    ],
    ids=["jobs-0", "jobs-negative", "gpus-on-a-cpu"],
)
def test_jobs_and_gpus_this_machine_cannot_honour_are_refused(tmp_path, monkeypatch, args, expected):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # a machine without GPUs
    notebook = _notebook(tmp_path / "nb.ipynb")
    result = CliRunner().invoke(app, ["sweep", str(notebook), "--grid", "x=1", "--out", str(tmp_path / "out"), *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().startswith(expected), result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--set", "a.b=1", "--grid", "a.b=2,3"], "--set a.b=1 and --grid a.b=2,3 set the same key"),
        (["--set", "credit.method=grpo", "--grid", "method=grpo,scpo"], "--set credit.method=grpo and --grid method="),
    ],
    ids=["dotted", "notebook-parameter"],
)
def test_a_set_the_grid_would_override_is_refused(tmp_path, args, expected):
    notebook = _notebook(tmp_path / "nb.ipynb")
    result = CliRunner().invoke(app, ["sweep", str(notebook), "--out", str(tmp_path / "out"), *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().startswith(expected) and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "out").exists()

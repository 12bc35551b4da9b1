"""`scpo sweep`: execute one notebook per point of a parameter grid with Papermill, then write a summary table.

    run_sweep("notebooks/02_train.ipynb", ["method=grpo,scpo", "credit.scpo.tau=0.6,0.8"], "reports/sweeps/tau")

Grid items are `name=v1,v2,...` (values parsed as YAML); the sweep is their Cartesian product. A name that is one of the
notebook's parameters is passed as that parameter; a dotted config key (e.g. `credit.scpo.tau`) is appended to the
notebook's `overrides` parameter ("key=value; ..."), so it goes through the same config validation as params.yaml.
When the notebook declares a `summary_json` parameter, each point writes its results there and they become columns of
the summary. One failing point is recorded (status 'failed: <error>') and the sweep goes on.

Where the points run (`backend`), on existing engines rather than a scheduler of our own:
- `serial`: one after the other in this process (the default);
- `local`: `jobs` points at once on this machine, each a Papermill process; with `gpus` (e.g. "0,1,2,3") each point
  gets one GPU through CUDA_VISIBLE_DEVICES, handed back when it ends (one point per GPU);
- `ray`: each point a Ray task asking for `gpus_per_point` GPUs (Ray sets CUDA_VISIBLE_DEVICES), on the cluster of
  `ray_address` (None: a local Ray instance; "auto": the cluster this machine joined). Notebook, outputs and data must be
  on paths every node sees.
Every backend writes the same summary: one row per point, in grid order.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import pandas as pd
import yaml
from tqdm.auto import tqdm

__all__ = ["parse_grid", "grid_points", "point_slug", "point_parameters", "run_sweep", "BACKENDS"]


def parse_grid(grid: Sequence[str]) -> dict[str, list[Any]]:
    """['method=grpo,scpo', 'seed=0,1'] -> {'method': ['grpo', 'scpo'], 'seed': [0, 1]} (values parsed as YAML)."""
    out: dict[str, list[Any]] = {}
    for item in grid:
        name, sep, values = item.partition("=")
        name = name.strip()
        if not sep or not name or not values.strip():
            raise ValueError(f"grid item {item!r} is not of the form name=v1,v2,...")
        if name in out:
            raise ValueError(f"grid name {name!r} appears twice (in {item!r}); give all its values in one item")
        out[name] = [yaml.safe_load(v.strip()) for v in values.split(",")]
    if not out:
        raise ValueError("the grid is empty: pass at least one name=v1,v2,... item")
    return out


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The Cartesian product of the grid, in the order the names and values were given."""
    names = list(grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*grid.values())]


def point_slug(point: dict[str, Any]) -> str:
    """A file-name-safe, deterministic name for a point: 'method-scpo__credit.scpo.tau-0.8'."""
    text = "__".join(f"{k}-{v}" for k, v in point.items())
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)


def point_parameters(
    point: dict[str, Any], notebook_params: Sequence[str], base: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Papermill parameters for one point: notebook parameters as themselves, dotted config keys into `overrides`.

    Raises ValueError naming a grid name that is neither a notebook parameter nor a dotted config key."""
    params = dict(base or {})
    extra = []
    for name, value in point.items():
        if name in notebook_params:
            params[name] = value
        elif "." in name:
            extra.append(f"{name}={json.dumps(value) if not isinstance(value, str) else value}")
        else:
            raise ValueError(
                f"grid name {name!r} is neither a parameter of the notebook "
                f"({', '.join(notebook_params)}) nor a dotted config key such as credit.scpo.tau"
            )
    if extra:
        if "overrides" not in notebook_params:
            raise ValueError(f"the notebook has no 'overrides' parameter, so config keys {extra} cannot be swept")
        params["overrides"] = "; ".join(x for x in [str(params.get("overrides") or ""), *extra] if x)
    return params


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[key] = v
    return out


BACKENDS = ("serial", "local", "ray")


def _execute_point(notebook: str, output: str, params: dict[str, Any], kernel: str, cwd: str | None,
                   gpu: str | None = None) -> str:
    """Run one point's notebook -> status ('ok' | 'failed: <error>'). In this process (gpu None), or as a Papermill
    process whose CUDA_VISIBLE_DEVICES is `gpu`."""
    if gpu is None:
        import papermill as pm

        try:
            pm.execute_notebook(notebook, output, parameters=params, kernel_name=kernel, cwd=cwd, progress_bar=False)
            return "ok"
        except Exception as err:  # noqa: BLE001 - one failing point must not stop the sweep; the error is recorded
            first_line = str(err).strip().splitlines()[0] if str(err).strip() else ""
            return f"failed: {type(err).__name__}: {first_line}"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu} if gpu != "" else dict(os.environ)
    cmd = [sys.executable, "-m", "papermill", notebook, output, "-k", kernel, "--no-progress-bar",
           "-y", json.dumps(params)] + (["--cwd", cwd] if cwd else [])
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode == 0:
        return "ok"
    lines = [x for x in done.stderr.strip().splitlines() if x.strip()]
    error = next((x for x in reversed(lines) if "Error" in x or "Exception" in x), lines[-1] if lines else "")
    return f"failed: {error.strip()}"


def _ray_execute(notebook, output, params, kernel, cwd):  # a Ray task: Ray has set CUDA_VISIBLE_DEVICES already
    return _execute_point(notebook, output, params, kernel, cwd)


def run_sweep(notebook: str | Path, grid: Sequence[str], out: str | Path, kernel: str = "python3",
              base_parameters: dict[str, Any] | None = None, cwd: str | Path | None = None, backend: str = "serial",
              jobs: int = 1, gpus: str | None = None, gpus_per_point: float = 1.0,
              ray_address: str | None = None) -> pd.DataFrame:
    """Execute `notebook` once per grid point into `out/<slug>.ipynb`; write `out/summary.csv` and `out/summary.md`
    (one row per point: the grid values, status, the executed notebook, and the point's summary_json values).
    `backend`, `jobs`, `gpus`, `gpus_per_point`, `ray_address`: where the points run (module docstring)."""
    import papermill as pm

    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not one of {', '.join(BACKENDS)}")
    notebook, out = Path(notebook), Path(out)
    if not notebook.exists():
        raise FileNotFoundError(f"no notebook at {notebook}")
    notebook_params = list(pm.inspect_notebook(str(notebook)))
    points = grid_points(parse_grid(grid))
    out.mkdir(parents=True, exist_ok=True)
    tasks = []
    for point in points:
        slug = point_slug(point)
        params = point_parameters(point, notebook_params, base_parameters)
        if "summary_json" in notebook_params:
            params["summary_json"] = str((out / f"{slug}.json").resolve())
        tasks.append((point, slug, params))
    args = [(str(notebook.resolve()), str((out / f"{slug}.ipynb").resolve()), params, kernel,
             str(cwd) if cwd else None) for _, slug, params in tasks]
    bar = tqdm(total=len(tasks), desc=f"sweep {notebook.stem} ({backend})", unit="point")
    if backend == "serial":
        statuses = []
        for a in args:
            statuses.append(_execute_point(*a))
            bar.update()
    elif backend == "local":
        devices = [g.strip() for g in gpus.split(",")] if gpus else [""] * max(1, jobs)
        free: queue.Queue = queue.Queue()
        for d in devices:
            free.put(d)

        def run_one(a):
            gpu = free.get()
            try:
                return _execute_point(*a, gpu=gpu)
            finally:
                free.put(gpu)
                bar.update()

        with ThreadPoolExecutor(max_workers=len(devices)) as pool:
            statuses = list(pool.map(run_one, args))
    else:
        import ray

        ray.init(address=ray_address, ignore_reinit_error=True, log_to_driver=False)
        remote = ray.remote(num_gpus=gpus_per_point)(_ray_execute)
        refs = [remote.remote(*a) for a in args]
        pending = list(refs)
        while pending:
            _, pending = ray.wait(pending, num_returns=1)
            bar.update()
        statuses = ray.get(refs)
    bar.close()
    rows = []
    for (point, slug, _), status in zip(tasks, statuses):
        row: dict[str, Any] = {**point, "notebook": str(out / f"{slug}.ipynb"), "status": status}
        summary_path = out / f"{slug}.json"
        if status == "ok" and summary_path.exists():
            row.update(_flatten(json.loads(summary_path.read_text())))
        rows.append(row)
    summary = pd.DataFrame(rows)
    summary.to_csv(out / "summary.csv", index=False)
    (out / "summary.md").write_text(f"## Sweep of {notebook.name}\n\n" + summary.to_markdown(index=False) + "\n")
    return summary

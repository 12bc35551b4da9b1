"""`scpo sweep`: execute one notebook per point of a parameter grid with Papermill, then write a summary table.

    run_sweep("notebooks/02_train.ipynb", ["method=grpo,scpo", "credit.scpo.tau=0.6,0.8"], "reports/sweeps/tau")

Grid items are `name=v1,v2,...` (values parsed as YAML); the sweep is their Cartesian product. A name that is one of the
notebook's parameters is passed as that parameter; a dotted config key (e.g. `credit.scpo.tau`) is appended to the
notebook's `overrides` parameter ("key=value; ..."), so it goes through the same config validation as params.yaml.
When the notebook declares a `summary_json` parameter, each point writes its results there and they become columns of
the summary. One failing point is recorded (status 'failed: <error>') and the sweep goes on.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from tqdm.auto import tqdm

__all__ = ["parse_grid", "grid_points", "point_slug", "point_parameters", "run_sweep"]


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


def run_sweep(
    notebook: str | Path,
    grid: Sequence[str],
    out: str | Path,
    kernel: str = "python3",
    base_parameters: dict[str, Any] | None = None,
    cwd: str | Path | None = None,
) -> pd.DataFrame:
    """Execute `notebook` once per grid point into `out/<slug>.ipynb`; write `out/summary.csv` and `out/summary.md`
    (one row per point: the grid values, status, the executed notebook, and the point's summary_json values)."""
    import papermill as pm

    notebook, out = Path(notebook), Path(out)
    if not notebook.exists():
        raise FileNotFoundError(f"no notebook at {notebook}")
    notebook_params = list(pm.inspect_notebook(str(notebook)))
    points = grid_points(parse_grid(grid))
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for point in tqdm(points, desc=f"sweep {notebook.stem}", unit="point"):
        slug = point_slug(point)
        params = point_parameters(point, notebook_params, base_parameters)
        summary_path = out / f"{slug}.json"
        if "summary_json" in notebook_params:
            params["summary_json"] = str(summary_path.resolve())
        row: dict[str, Any] = {**point, "notebook": str(out / f"{slug}.ipynb")}
        try:
            pm.execute_notebook(
                str(notebook),
                str(out / f"{slug}.ipynb"),
                parameters=params,
                kernel_name=kernel,
                cwd=str(cwd) if cwd else None,
                progress_bar=False,
            )
            row["status"] = "ok"
        except Exception as err:
            first_line = str(err).strip().splitlines()[0] if str(err).strip() else ""
            row["status"] = f"failed: {type(err).__name__}: {first_line}"
        if row["status"] == "ok" and summary_path.exists():
            row.update(_flatten(json.loads(summary_path.read_text())))
        rows.append(row)
    summary = pd.DataFrame(rows)
    summary.to_csv(out / "summary.csv", index=False)
    (out / "summary.md").write_text(f"## Sweep of {notebook.name}\n\n" + summary.to_markdown(index=False) + "\n")
    return summary

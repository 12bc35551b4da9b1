"""`scpo sweep`: execute one notebook per point of a parameter grid with Papermill, then write a summary table.

    run_sweep("notebooks/02_train.ipynb", ["method=grpo,scpo", "credit.scpo.tau=0.6,0.8"], "reports/sweeps/tau",
              profile="smoke", overrides=["train.iterations=2"])

Grid items are `name=v1,v2,...` (values parsed as YAML); the sweep is their Cartesian product. A name that is one of the
notebook's parameters is passed as that parameter; a dotted config key (e.g. `credit.scpo.tau`) is appended to the
notebook's `overrides` parameter ("key=value; ..."), so it goes through the same config validation as params.yaml.
`params`, `profile` and `overrides` (`--params`, `--profile`, `--set`) apply to every point; for the project's notebooks
(which take all three) every point's config is validated before the first one runs, so a typo fails the sweep at once
(`SweepError`, one line).

A value given twice for one name (`--grid method=grpo,grpo`), two points whose folder names coincide, or a key set
both by the grid and by --set / --profile / --params (`--set train.lr=0.1 --grid train.lr=0.01,0.02`) is refused
before anything runs.

`<out>` belongs to one sweep: one writer at a time holds its lock (`scpo.pipeline.folder_lock.RunLock`, as a run
folder's), so a second sweep into it, `--overwrite` included, fails at once naming the first; `<out>/sweep.json` records
its notebook, grid and points. A sweep into a non-empty `<out>` is refused in one line naming what it holds (another
grid's sweep, or other files) unless `overwrite`; then the earlier sweep's own entries (its summary, notebooks, point
folders and records) are removed first, and only when `<out>` holds nothing else: not a `.git`, not the current
directory or one above it, not `data.root` (`scpo.pipeline.safe_replace`, the same guard as a run folder's
`--overwrite`).

Every point gets its own folder, `<out>/<point>/` (`<point>`: the grid values, e.g. `method-scpo__credit.scpo.tau-0.8`,
or `p003-<hash>` when that would be too long), passed as the notebook's `out_dir` parameter when it has one and the grid
does not set it; so two points never write into one run folder. The summary lists it (`point`, `point_dir`).
When the notebook declares a `summary_json` parameter, each point writes its results there and they become `result.*`
columns of the summary (never overwriting a grid column). A failing point is recorded with its real error
(`failed: <ename>: <evalue> (In [<n>]: <first line of the cell>)`) and the sweep goes on; the command exits non-zero.
Serial points' kernels use IPC transport (no "Kernel is running over TCP" warning per point); `local` points are
Papermill processes whose output is captured, and Ray workers' output does not reach the driver (with IPC transport
their kernels did not answer).

Where the points run (`backend`), on existing engines rather than a scheduler of our own:
- `serial`: one after the other in this process (the default);
- `local`: `jobs` points at once on this machine, each a Papermill process; with `gpus` (e.g. "0,1,2,3", or "auto":
  every visible GPU) each point gets one GPU through CUDA_VISIBLE_DEVICES, handed back when it ends (one point per
  GPU). On a machine with visible GPUs, `jobs` > 1 without `gpus` (every point would train on the first GPU) and a GPU
  named twice are refused in one line;
- `ray`: each point a Ray task asking for `gpus_per_point` GPUs (Ray sets CUDA_VISIBLE_DEVICES), on the cluster of
  `ray_address` (None: a local Ray instance; "auto": the cluster this machine joined). Notebook, outputs and data must
  be on paths every node sees.
Every backend writes the same summary: one row per point, in grid order.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import queue
import re
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from tqdm.auto import tqdm

from scpo.config import ConfigError, load_config, parse_overrides
from scpo.errors import ExpectedError, PlacementError, write_problem
from scpo.pipeline.folder_lock import LOCK_FILE, RunLock, check_not_in_use
from scpo.pipeline.safe_replace import ReplaceError, check_replaceable, remove_own_entries

__all__ = [
    "parse_grid",
    "grid_points",
    "point_slug",
    "point_folder",
    "point_parameters",
    "failure_status",
    "failure_status_from_notebook",
    "failure_status_from_log",
    "run_sweep",
    "SweepError",
    "RESERVED_COLUMNS",
    "BACKENDS",
    "SWEEP_RECORD",
    "check_sweep_folder",
]

RESERVED_COLUMNS = ("point", "point_dir", "status", "notebook")
SWEEP_RECORD = "sweep.json"
_SWEEP_FILES = (".gitignore", "summary.csv", "summary.md", SWEEP_RECORD)
BACKENDS = ("serial", "local", "ray")
_MAX_SLUG = 100


class SweepError(ExpectedError, ValueError):
    """A sweep that cannot start: a bad grid, a name the notebook does not take, a point whose config is invalid."""


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
        try:
            parsed = [yaml.safe_load(v.strip()) for v in values.split(",")]
        except yaml.YAMLError as err:
            raise ValueError(f"grid item {item!r}: a value is not valid YAML ({_first_line(str(err))})") from None
        twice = [v for i, v in enumerate(parsed) if v in parsed[:i]]
        if twice:
            raise ValueError(
                f"grid item {item!r} gives the value {twice[0]!r} twice; give each value once (two points would "
                "run the same config into one folder)"
            )
        out[name] = parsed
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


def point_folder(point: dict[str, Any], index: int) -> str:
    """The point's folder name: its slug, or `p<index>-<sha1 of the slug>` when the slug is over 100 characters."""
    slug = point_slug(point)
    if len(slug) <= _MAX_SLUG:
        return slug
    return f"p{index:03d}-{hashlib.sha1(slug.encode()).hexdigest()[:12]}"


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


def failure_status(err: BaseException) -> str:
    """'failed: <ename>: <evalue> (In [<n>]: <first line>)' for a Papermill cell error (the exception raised in the
    notebook, not Papermill's wrapper), 'failed: <type>: <message>' for anything else; one line."""
    ename, evalue = getattr(err, "ename", None), getattr(err, "evalue", None)
    if ename is not None:
        source = [ln.strip() for ln in str(getattr(err, "source", "") or "").splitlines() if ln.strip()]
        cell = getattr(err, "exec_count", None)
        where = f" (In [{cell}]: {source[0][:80]})" if source else ""
        return f"failed: {ename}: {_first_line(str(evalue))}{where}"
    return f"failed: {type(err).__name__}: {_first_line(str(err))}"


def _first_line(text: str, limit: int = 300) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    line = lines[0] if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[key] = v
    return out


def _shared_parameters(
    notebook_params: Sequence[str], params: str | Path | None, profile: str | None, overrides: Sequence[str]
) -> dict[str, Any]:
    """The notebook parameters every point gets from --params / --profile / --set."""
    shared: dict[str, Any] = {}
    for name, value in (
        ("params", str(params) if params else None),
        ("profile", profile),
        ("overrides", "; ".join(overrides) if overrides else None),
    ):
        if value is None:
            continue
        if name not in notebook_params:
            raise SweepError(
                f"--{'set' if name == 'overrides' else name} needs a {name!r} parameter, which the "
                f"notebook does not declare ({', '.join(notebook_params)})"
            )
        shared[name] = value
    return shared


# notebook parameters that the project's notebooks turn into config keys (checked up front with the rest)
NOTEBOOK_KEYS = {"method": "credit.method", "env": "env.name", "seed": "train.seed"}


def _check_no_clash(
    grid: dict[str, list[Any]], sets: dict[str, Any], params: str | Path | None, profile: str | None
) -> None:
    """SweepError when --set, --profile or --params and the grid set the same key (`--set train.lr=0.1 --grid
    train.lr=0.01,0.02`): the grid's value would win at every point, silently."""
    shared = {**sets, **({"profile": profile} if profile else {}), **({"params": params} if params else {})}
    for name, values in grid.items():
        for key in (name, NOTEBOOK_KEYS.get(name)):
            if key in shared:
                given = f"--{key}" if key in ("profile", "params") else f"--set {key}"
                raise SweepError(
                    f"{given}={shared[key]} and --grid {name}={','.join(map(str, values))} set the same key (the "
                    f"grid's value would win at every point); keep one of them"
                )


def _check_configs(points: list[dict[str, Any]], all_params: list[dict[str, Any]], config_file: Path) -> None:
    """Validate every point's config (params file, profile, `NOTEBOOK_KEYS`, the `overrides` string) before any point
    runs."""
    from scpo.pipeline.notebook import split_overrides

    for point, p in zip(points, all_params):
        keys = {key: p[name] for name, key in NOTEBOOK_KEYS.items() if p.get(name) not in (None, "")}
        try:
            load_config(
                config_file, profile=p.get("profile") or None, overrides={**keys, **split_overrides(p.get("overrides"))}
            )
        except ConfigError as err:
            raise SweepError(f"point {point_slug(point)}: {_first_line(str(err))}") from None


def failure_status_from_notebook(path: str | Path) -> str | None:
    """`failure_status` for a point run as a Papermill process, read from the executed notebook it wrote: the error
    output's ename and evalue and its cell; None when the notebook holds no error output."""
    try:
        nb = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    for cell in nb.get("cells", []):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                source = [ln.strip() for ln in "".join(cell.get("source", "")).splitlines() if ln.strip()]
                where = f" (In [{cell.get('execution_count')}]: {source[0][:80]})" if source else ""
                return f"failed: {output.get('ename')}: {_first_line(str(output.get('evalue', '')))}{where}"
    return None


def failure_status_from_log(log: str) -> str:
    """`failure_status` for a point run as a Papermill process that left no error in its notebook (the kernel died,
    Papermill itself failed): the last `<Name>Error: message` line of its stderr."""
    lines = [ln.rstrip() for ln in log.splitlines() if ln.strip()]
    errors = [
        ln
        for ln in lines
        if re.match(r"[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b:?", ln)
        and not ln.startswith(("papermill.exceptions.", "PapermillExecutionError"))
    ]
    cell = next((m.group(1) for ln in lines if (m := re.search(r'Exception encountered at "In \[(\d+)\]"', ln))), None)
    failing = next((ln.split("----> ", 1)[1].strip() for ln in lines if "----> " in ln), "")
    failing = re.sub(r"^\d+\s+", "", failing)
    error = errors[-1].strip() if errors else (lines[-1].strip() if lines else "no output")
    where = f" (In [{cell}]: {failing[:80]})" if cell and failing else ""
    return f"failed: {_first_line(error)}{where}"


def _execute_point(
    notebook: str,
    output: str,
    params: dict[str, Any],
    kernel: str,
    cwd: str | None,
    gpu: str | None = None,
    ipc: bool = False,
) -> str:
    """Run one point's notebook -> status ('ok' | `failure_status`). In this process (gpu None; with `ipc` its kernel
    on IPC transport), or as a Papermill process whose CUDA_VISIBLE_DEVICES is `gpu`."""
    if gpu is None:
        import papermill as pm
        from traitlets.config import Config as TraitletsConfig

        transport = TraitletsConfig({"KernelManager": {"transport": "ipc"}}) if ipc else TraitletsConfig()
        try:
            pm.execute_notebook(
                notebook, output, parameters=params, kernel_name=kernel, cwd=cwd, progress_bar=False, config=transport
            )
            return "ok"
        except Exception as err:
            return failure_status(err)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu} if gpu != "" else dict(os.environ)
    cmd = [
        sys.executable,
        "-m",
        "papermill",
        notebook,
        output,
        "-k",
        kernel,
        "--no-progress-bar",
        "-y",
        json.dumps(params),
    ] + (["--cwd", cwd] if cwd else [])
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode == 0:
        return "ok"
    return failure_status_from_notebook(output) or failure_status_from_log(done.stderr)


def _local_devices(gpus: str | None, jobs: int) -> list[str]:
    """The local backend's slots: one per GPU of `gpus` ("auto": every visible GPU), else `jobs` slots that leave
    CUDA_VISIBLE_DEVICES as it is (refused on a machine with GPUs when jobs > 1: the points would share the first).
    `jobs` < 1 and a GPU id this machine does not show are refused, never changed into something else."""
    from scpo.pipeline.devices import unique_gpus, visible_gpus

    if isinstance(jobs, bool) or jobs < 1:
        raise SweepError(f"--jobs {jobs}: allowed: an integer >= 1 (points run at once)")
    try:
        if gpus == "auto":
            found = visible_gpus()
            if not found:
                raise SweepError("--gpus auto but no GPU is visible (CUDA_VISIBLE_DEVICES / torch.cuda)")
            return found
        if gpus:
            ids = unique_gpus([g.strip() for g in gpus.split(",") if g.strip()])
            visible = visible_gpus()
            absent = [g for g in ids if g not in visible]
            if absent:
                seen = (
                    f"visible: {','.join(visible)}"
                    if visible
                    else "no GPU is visible (CUDA_VISIBLE_DEVICES / torch.cuda)"
                )
                raise SweepError(
                    f"--gpus {gpus}: GPU {absent[0]} is not on this machine ({seen}); name visible GPUs, "
                    "or leave --gpus out and set --jobs"
                )
            return ids
    except PlacementError as err:
        raise SweepError(str(err)) from None
    found = visible_gpus()
    if found and jobs > 1:
        raise SweepError(
            f"--jobs {jobs} without --gpus on a machine with {len(found)} visible GPU(s): every point would train on "
            f"the first one; pass --gpus auto (one point per GPU) or --gpus {','.join(found)}"
        )
    return [""] * max(1, jobs)


def _recorded_points(out: Path) -> tuple[list[str] | None, str]:
    """(the point folders of the sweep recorded in `out`, its grid in words): from sweep.json, else from summary.csv's
    `point` column (a folder with a summary and no sweep.json); (None, "") when `out` holds no sweep."""
    try:
        record = json.loads((out / SWEEP_RECORD).read_text())
        return list(record["points"]), " ".join(f"--grid {g}" for g in record["grid"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        points = pd.read_csv(out / "summary.csv")["point"].astype(str).tolist()
    except (OSError, ValueError, KeyError, pd.errors.ParserError):
        return None, ""
    return points, f"{len(points)} points"


def check_sweep_folder(out: Path, grid: Sequence[str], overwrite: bool, protected: dict[str, Any]) -> None:
    """ReplaceError (one line, nothing removed) when `out` may not receive this sweep: a file; non-empty without
    `overwrite`; with `overwrite`, holding anything but an earlier sweep's own entries, or a place no command removes
    (`scpo.pipeline.safe_replace.check_replaceable`)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ReplaceError(f"--out {out} is a file, not a folder; choose a folder for the sweep")
    names = sorted(n for n in os.listdir(out) if n != LOCK_FILE) if out.is_dir() else []
    if names in ([], [".gitignore"]):
        return
    points, earlier = _recorded_points(out)
    own = set(_SWEEP_FILES) | {f"{p}{ext}" for p in points or [] for ext in ("", ".ipynb", ".json")}
    if not overwrite:
        same = earlier == " ".join(f"--grid {g}" for g in grid)
        what = (
            f"a sweep of {'this grid' if same else 'another grid'} ({earlier})"
            if points is not None
            else f"files that are not a sweep's ({', '.join(names[:5])}{', ...' if len(names) > 5 else ''})"
        )
        raise ReplaceError(
            f"sweep folder {out} is not empty, it holds {what}; add --overwrite to replace "
            f"{'it' if points is not None else 'them'}, or choose another --out"
        )
    check_replaceable(out, lambda name: name in own or name == LOCK_FILE, "sweep", protected)


def _ray_execute(notebook, output, params, kernel, cwd):  # a Ray task: Ray has set CUDA_VISIBLE_DEVICES already
    return _execute_point(notebook, output, params, kernel, cwd)


def run_sweep(
    notebook: str | Path,
    grid: Sequence[str],
    out: str | Path,
    kernel: str = "python3",
    base_parameters: dict[str, Any] | None = None,
    cwd: str | Path | None = None,
    backend: str = "serial",
    jobs: int = 1,
    gpus: str | None = None,
    gpus_per_point: float = 1.0,
    ray_address: str | None = None,
    params: str | Path | None = None,
    profile: str | None = None,
    overrides: Sequence[str] = (),
    overwrite: bool = False,
) -> pd.DataFrame:
    """Execute `notebook` once per grid point into `out/<point>.ipynb`, the point's files in `out/<point>/`; write
    `out/summary.csv` and `out/summary.md` (one row per point, in grid order: the grid values, point, point_dir,
    status, the executed notebook, and the point's summary_json values as `result.*`). SweepError (nothing run) when
    the sweep cannot start. `params`, `profile`, `overrides`: the notebook parameters of every point (--params,
    --profile, --set); `overwrite` passes `overwrite=True` to notebooks that take it (a point may replace its folder's
    run). `backend`, `jobs`, `gpus`, `gpus_per_point`, `ray_address`: where the points run (module docstring)."""
    import papermill as pm

    if backend not in BACKENDS:
        raise SweepError(f"backend={backend!r} is not one of {', '.join(BACKENDS)}")
    if isinstance(jobs, bool) or jobs < 1:
        raise SweepError(f"--jobs {jobs}: allowed: an integer >= 1 (points run at once)")
    if backend == "local":
        _local_devices(gpus, jobs)  # refused before anything runs
    notebook, out = Path(notebook), Path(out)
    if not notebook.exists():
        raise SweepError(f"no notebook at {notebook}")
    notebook_params = list(pm.inspect_notebook(str(notebook)))
    try:
        _check_no_clash(parse_grid(grid), parse_overrides(list(overrides)), params, profile)
        points = grid_points(parse_grid(grid))
        reserved = [name for name in points[0] if name in RESERVED_COLUMNS or name.startswith("result.")]
        if reserved:
            raise ValueError(
                f"grid name {reserved[0]!r} is a column of the summary; reserved: "
                f"{', '.join(RESERVED_COLUMNS)}, result.*"
            )
        shared = {**(base_parameters or {}), **_shared_parameters(notebook_params, params, profile, overrides)}
        all_params = [point_parameters(point, notebook_params, shared) for point in points]
    except ValueError as err:
        raise SweepError(str(err)) from None
    names = [point_folder(point, index) for index, point in enumerate(points)]
    shared_folder = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if shared_folder is not None:
        raise SweepError(f"two points of the grid would share the folder {out / shared_folder}; use distinct values")
    protected: dict[str, Any] = {"the scpo code": Path(__file__).resolve().parents[1]}
    if {"params", "profile", "overrides"} <= set(notebook_params):  # the project's notebooks (notebook_config)
        config_file = Path(shared.get("params") or "params.yaml")
        if not config_file.is_absolute():
            config_file = Path(cwd or Path.cwd()) / config_file
        if config_file.exists():
            _check_configs(points, all_params, config_file)
            try:
                base_cfg = load_config(config_file, profile=shared.get("profile") or None)
                protected.update({"data.root": base_cfg.data.root, "data.shared_dir": base_cfg.data.shared_dir})
            except ConfigError:  # valid only with each point's values (checked above): the data is theirs
                pass
    check_not_in_use(out, "sweep folder")
    check_sweep_folder(out, grid, overwrite, protected)
    with RunLock(out, "sweep folder") as lock:  # one sweep at a time writes into `out`
        if lock.note:
            tqdm.write(lock.note, file=sys.stderr)
        return _sweep_into(notebook, out, grid, points, names, all_params, notebook_params, shared, protected,
                           overwrite, kernel, backend, jobs, gpus, gpus_per_point, ray_address, cwd)  # fmt: skip


def _sweep_into(notebook, out, grid, points, names, all_params, notebook_params, shared, protected, overwrite, kernel,
                backend, jobs, gpus, gpus_per_point, ray_address, cwd) -> pd.DataFrame:  # fmt: skip
    """The sweep once it holds `out`'s lock: the folder checked again (no other sweep can start now) and cleared,
    every point run, the summary."""
    check_sweep_folder(out, grid, overwrite, protected)
    try:
        if overwrite:
            points_before, _ = _recorded_points(out)
            own = set(_SWEEP_FILES) | {f"{p}{e}" for p in points_before or [] for e in ("", ".ipynb", ".json")}
            remove_own_entries(out, lambda n: n in own, keep=(LOCK_FILE,))
        out.mkdir(parents=True, exist_ok=True)
        if not (out / ".gitignore").exists():  # the points' folders hold whole runs (models): regenerable, not for git
            (out / ".gitignore").write_text("# the sweep's points' folders (scpo sweep)\n/*/\n")
        (out / SWEEP_RECORD).write_text(
            json.dumps({"notebook": str(notebook), "grid": list(grid), "points": names}, indent=2) + "\n"
        )
    except OSError as err:
        raise ReplaceError(f"{write_problem(err, out) or err}; choose another --out") from None
    tasks = []
    for index, (point, point_params) in enumerate(zip(points, all_params)):
        name = names[index]
        if "out_dir" in notebook_params and "out_dir" not in point and "out_dir" not in shared:
            point_params["out_dir"] = str((out / name).resolve())
        if overwrite and "overwrite" in notebook_params:
            point_params["overwrite"] = True
        if "summary_json" in notebook_params:
            (out / f"{name}.json").unlink(missing_ok=True)  # a stale one from an earlier sweep must not pass for this
            point_params["summary_json"] = str((out / f"{name}.json").resolve())
        tasks.append((point, name, point_params))
    args = [
        (str(notebook.resolve()), str((out / f"{name}.ipynb").resolve()), p, kernel, str(cwd) if cwd else None)
        for _, name, p in tasks
    ]
    bar = tqdm(total=len(tasks), desc=f"sweep {notebook.stem} ({backend})", unit="point")
    if backend == "serial":
        statuses = []
        for a in args:
            statuses.append(_execute_point(*a, ipc=True))
            bar.update()
    elif backend == "local":
        devices = _local_devices(gpus, jobs)
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
    for (point, name, _), status in zip(tasks, statuses):
        row: dict[str, Any] = {
            **point,
            "point": name,
            "point_dir": str(out / name),
            "notebook": str(out / f"{name}.ipynb"),
            "status": status,
        }
        summary_path = out / f"{name}.json"
        if status == "ok" and summary_path.exists():
            row.update({f"result.{k}": v for k, v in _flatten(json.loads(summary_path.read_text())).items()})
        rows.append(row)
    summary = pd.DataFrame(rows)
    summary.to_csv(out / "summary.csv", index=False)
    (out / "summary.md").write_text(f"## Sweep of {notebook.name}\n\n" + summary.to_markdown(index=False) + "\n")
    return summary

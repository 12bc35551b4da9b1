"""The `scpo` command: config, methods, prepare-data, train, eval, sweep, notebook, credit-map, import, parity,
fidelity, provenance.

Every command reads params.yaml (`--params`), a profile (`--profile`) and dotted overrides (`--set key=value`,
repeatable), validated by the same typed config as Papermill parameters. Heavy modules are imported inside each command.

Everyday mistakes (a bad config value, missing data, a run folder in use or holding another run, a checkpoint that
cannot be restored, a model that is not on this machine) end the command with one red line on stderr naming the value
or path and what to do, and exit code 1 (2 for config errors); `scpo --debug COMMAND ...` (or `--debug` after the
command, or SCPO_DEBUG=1) shows the traceback instead. Commands that write end with one line naming what they wrote.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import typer

from scpo.config import Config, ConfigError, load_config, parse_overrides
from scpo.credit.registry import available_methods
from scpo.errors import DataError, ExpectedError, write_problem

ABOUT = "Credit assignment for group-based RL of LLM agents: SCPO and the estimators it is compared with."


def expand_home(path: Path | None) -> Path | None:
    """A path option's value with a leading `~` expanded: the shell leaves `--out=~/x` (and a quoted "~/x") as it is,
    which would make a folder literally named `~` in the current folder."""
    return path.expanduser() if path is not None else None


app = typer.Typer(add_completion=False, no_args_is_help=True, help=ABOUT)

ParamsOpt = typer.Option(Path("params.yaml"), "--params", callback=expand_home, help="params.yaml to read")
ProfileOpt = typer.Option(None, "--profile", help="smoke | cpu | gpu (default: params.yaml's `profile`)")
SetOpt = typer.Option(None, "--set", help="dotted override, e.g. --set credit.scpo.tau=0.8 (repeatable)")
DebugOpt = typer.Option(False, "--debug", help="show the traceback of an error instead of its one-line message")

_DEBUG = {"on": False}  # set by the callback on every invocation


@app.callback(help=ABOUT)
def _main(debug: bool = DebugOpt) -> None:
    _DEBUG["on"] = debug or os.environ.get("SCPO_DEBUG", "") not in ("", "0")


@contextmanager
def _one_line_errors(debug: bool = False) -> Iterator[None]:
    """Print an ExpectedError as its message in red and exit 1 (2 for a config error); re-raise it under --debug."""
    try:
        yield
    except ExpectedError as err:
        if debug or _DEBUG["on"]:
            raise
        typer.secho(str(err).strip() or type(err).__name__, fg=typer.colors.RED, err=True)
        raise typer.Exit(2 if isinstance(err, ConfigError) else 1) from None


def _done(line: str) -> None:
    """The final line of a command that wrote something (stdout, so it survives `2>/dev/null`)."""
    typer.secho(line, fg=typer.colors.GREEN)


def _config(
    params: Path, profile: str | None, sets: list[str] | None, extra: dict | None = None, debug: bool = False
) -> Config:
    with _one_line_errors(debug):
        overrides = parse_overrides(sets)
        overrides.update(extra or {})
        return load_config(params, profile=profile, overrides=overrides)


@app.command("methods")
def methods() -> None:
    """Every registered credit method: its name, what it is (its module's first line), the option sections it reads
    and what it needs besides the rollouts."""
    from scpo.credit.registry import METHODS

    for name, spec in METHODS.items():
        typer.echo(f"{name}: {spec.summary}")
        extra = ", ".join([*spec.columns, *(["the policy's scores"] if spec.policy_scores else [])])
        role = f"; {spec.bound}" if spec.bound else ""
        typer.echo(f"    reads credit.{', credit.'.join(spec.sections)}" + (f"; needs {extra}" if extra else "") + role)


@app.command("prepare-data")
def prepare_data(
    params: Path = ParamsOpt,
    profile: str | None = ProfileOpt,
    sets: list[str] | None = SetOpt,
    only: str | None = typer.Option(None, help="alfworld | webshop (default: both)"),
) -> None:
    """Copy, unpack or download ALFWorld games and WebShop files into data/ and build the WebShop catalogue (idempotent:
    complete data is only verified), then print the counts. Without the data and without internet: one line saying
    where it looked and what to run."""
    from scpo.data.prepare import prepare_data as run_prepare

    cfg = _config(params, profile, sets)
    try:
        with _one_line_errors():
            summary = run_prepare(cfg, only)
    except ValueError as err:  # `--only` naming neither dataset
        typer.secho(str(err), fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    if "alfworld" in summary:
        counts = {k: v for k, v in summary["alfworld"].items() if k != "total"}
        typer.echo(
            "ALFWorld games per split: "
            + ", ".join(f"{k} {v}" for k, v in counts.items())
            + f"; total {summary['alfworld']['total']}"
        )
    if "webshop" in summary:
        typer.echo("WebShop: " + ", ".join(f"{k} {v}" for k, v in summary["webshop"].items()))


@app.command("config")
def check_config(
    params: Path = ParamsOpt,
    profile: str | None = ProfileOpt,
    sets: list[str] | None = SetOpt,
) -> None:
    """Validate params.yaml with a profile and overrides, as every command does, without running anything: one line
    naming a bad key (exit 2), else the resolved value of each key given with --set (e.g. before `dvc exp run -S`,
    which writes its values into params.yaml first)."""
    cfg = _config(params, profile, sets)
    resolved = json.loads(cfg.model_dump_json())
    shown = []
    for key in parse_overrides(sets):
        value = resolved
        for part in key.split("."):
            value = value[part]
        shown.append(f"{key}={json.dumps(value)}")
    _done(f"{params}: valid with profile {cfg.profile}" + (f"; {', '.join(shown)}" if shown else ""))


@app.command()
def train(
    params: Path = ParamsOpt,
    profile: str | None = ProfileOpt,
    sets: list[str] | None = SetOpt,
    stage: str = typer.Option("rl", help="sft (behaviour-cloning warm start) | rl"),
    method: str | None = typer.Option(
        None, help=f"credit method: {', '.join(available_methods())} (default: credit.method)"
    ),
    env: str | None = typer.Option(None, help="alfworld | webshop (default: env.name)"),
    seed: int | None = typer.Option(None, help="train.seed"),
    out: Path | None = typer.Option(
        None, callback=expand_home, help="run directory (default: <train.out_dir>/<env>/<method>/seed<seed>)"
    ),
    resume: bool = typer.Option(
        False,
        "--resume",
        help="continue from the newest restorable checkpoint of the run directory (its recorded config must match)",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite", help="replace what the run directory holds (only once every check of the new run passed)"
    ),
    force: bool = typer.Option(False, "--force", help="with --resume: accept a config that differs from the run's"),
    debug: bool = DebugOpt,
) -> None:
    """Behaviour-cloning warm start (--stage sft) or group RL (--stage rl --method NAME) into an empty run directory
    (or --resume it, or --overwrite it)."""
    from scpo.train.run import run_training

    extra = {k: v for k, v in {"credit.method": method, "env.name": env, "train.seed": seed}.items() if v is not None}
    cfg = _config(params, profile, sets, extra, debug)
    with _one_line_errors(debug):
        summary = run_training(cfg, stage=stage, out_dir=out, resume=resume, overwrite=overwrite, force=force)
    _done(_train_line(summary))


def _train_line(summary: dict) -> str:
    where = summary["run_dir"]
    if summary.get("skipped"):
        return f"SFT warm start skipped ({summary['skipped']}); wrote {where}/summary.json"
    if summary["stage"] == "sft":
        bc = summary.get("bc", {})
        return (
            f"SFT warm start on {summary['env']} (seed {summary['seed']}): {int(summary['demos']['n_steps'])} demo "
            f"steps, loss {bc.get('loss_first_epoch', float('nan')):.3f} -> "
            f"{bc.get('loss_last_epoch', float('nan')):.3f}; "
            f"wrote {where}/model, summary.json, provenance.json"
        )
    final = summary.get("final", {}).get("charts/success_rate")
    success = f", success {final:.2f} on the last iteration" if final is not None else ""
    n = summary["iterations"]
    if n == 0:
        return (
            f"{summary['method']} on {summary['env']} (seed {summary['seed']}): 0 iterations (train.iterations=0), "
            f"no checkpoint; wrote {where}/model (the start model), summary.json, provenance.json"
        )
    return (
        f"{summary['method']} on {summary['env']} (seed {summary['seed']}): {n} iteration{'s' if n != 1 else ''}"
        f"{success}; wrote {where}/model, checkpoints/, history.csv, summary.json, provenance.json"
    )


@app.command("eval")
def evaluate(
    params: Path = ParamsOpt,
    profile: str | None = ProfileOpt,
    sets: list[str] | None = SetOpt,
    checkpoint: Path = typer.Option(..., callback=expand_home, help="run directory or checkpoint to evaluate"),
    out: Path | None = typer.Option(
        None,
        callback=expand_home,
        help="where eval.json + eval.csv go (default: <run>/evals/iter_XXXX for a checkpoint, else <checkpoint>/eval)",
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace an existing eval.json in --out"),
    force: bool = typer.Option(
        False, "--force", help="evaluate with --set values that contradict the run's env / policy settings"
    ),
    debug: bool = DebugOpt,
) -> None:
    """Evaluate a policy on the eval splits of the environment it was trained on (read from the run; temperature
    eval.temperature); success per task type as JSON + CSV."""
    from scpo.train.evaluate import default_eval_dir, run_evaluation

    cfg = _config(params, profile, sets, debug=debug)
    out = out if out is not None else default_eval_dir(checkpoint)
    with _one_line_errors(debug):
        result = run_evaluation(
            cfg,
            checkpoint=checkpoint,
            out_dir=out,
            force=force,
            overwrite=overwrite,
            note=lambda line: typer.echo(line, err=True),
        )
    splits = ", ".join(f"{name} {r['success']:.2f} (n={r['n']})" for name, r in result["splits"].items())
    _done(f"evaluated {checkpoint} on {result['env']}: success {splits}; wrote {out}/eval.json, eval.csv")


@app.command()
def sweep(
    notebook: Path = typer.Argument(..., callback=expand_home, help="notebook to execute per grid point"),
    grid: list[str] = typer.Option(..., "--grid", help="name=v1,v2,... (repeatable); the product is swept"),
    out: Path = typer.Option(
        Path("reports/sweeps"),
        callback=expand_home,
        help="folder for executed notebooks, the points' folders and the summary",
    ),
    params: Path | None = typer.Option(
        None, "--params", callback=expand_home, help="params.yaml for every point (default: the notebook's own default)"
    ),
    profile: str | None = ProfileOpt,
    sets: list[str] | None = SetOpt,
    overwrite: bool = typer.Option(False, "--overwrite", help="let each point replace what its folder holds"),
    kernel: str = typer.Option("python3", help="Jupyter kernel"),
    backend: str = typer.Option("serial", help="serial | local (--jobs / --gpus on this machine) | ray"),
    jobs: int = typer.Option(1, help="local: points at once (without --gpus)"),
    gpus: str | None = typer.Option(
        None, help="local: GPU ids, one point per GPU, e.g. 0,1,2,3; auto: every visible GPU"
    ),
    gpus_per_point: float = typer.Option(1.0, help="ray: GPUs each point asks for (0 on CPU nodes)"),
    ray_address: str | None = typer.Option(
        None, help="ray: cluster address (auto: the one this node joined; default: a local Ray instance)"
    ),
    debug: bool = DebugOpt,
) -> None:
    """Papermill sweep: run NOTEBOOK once per point of the grid, each point in its own folder (<out>/<point>/), then
    write summary.csv / summary.md. Exits 1 when any point failed (its status holds the error)."""
    from scpo.pipeline.sweep import SweepError, run_sweep

    with _one_line_errors(debug):
        try:
            summary = run_sweep(
                notebook,
                grid,
                out,
                kernel=kernel,
                backend=backend,
                jobs=jobs,
                gpus=gpus,
                gpus_per_point=gpus_per_point,
                ray_address=ray_address,
                params=params,
                profile=profile,
                overrides=sets or [],
                overwrite=overwrite,
            )
        except SweepError as err:
            typer.secho(str(err), fg=typer.colors.RED, err=True)
            raise typer.Exit(2) from None
    failed = summary[summary["status"] != "ok"]
    for _, row in failed.iterrows():
        typer.secho(f"{row['point']}: {row['status']}", fg=typer.colors.RED, err=True)
    line = f"{len(summary) - len(failed)} of {len(summary)} points ok; wrote {out}/summary.csv, summary.md"
    if len(failed):
        typer.secho(line, fg=typer.colors.RED, err=True)
        raise typer.Exit(1)
    _done(line)


@app.command(
    "notebook",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
    add_help_option=False,
)
def notebook(ctx: typer.Context) -> None:
    """Papermill on one notebook, with Papermill's arguments (NOTEBOOK OUTPUT -p NAME VALUE ...; --help: its options).
    A cell that fails is printed as it showed in the notebook (one line for an everyday mistake) with the cell and the
    executed notebook, exit 1, instead of inside Papermill's traceback."""
    from scpo.pipeline.run_notebook import run_notebook

    raise typer.Exit(run_notebook(ctx.args, prog_name="scpo notebook"))


@app.command("credit-map")
def credit_map(
    rollouts: Path = typer.Argument(
        ..., callback=expand_home, help="saved rollouts: a .parquet / .jsonl file, or a run / rollouts folder"
    ),
    params: Path = ParamsOpt,
    profile: str | None = ProfileOpt,
    sets: list[str] | None = SetOpt,
    iteration: int = typer.Option(-1, help="saved iteration (-1: the latest one with a mixed group)"),
    group: int = typer.Option(-1, help="group id to draw (-1: the most informative, as notebook 04 picks it)"),
    out: Path = typer.Option(Path("reports/figures/credit_map.png"), callback=expand_home, help="figure path"),
) -> None:
    """Heat map of every estimator's per-step advantages on one group of saved rollouts (notebook 04's figure)."""
    from scpo.analysis.credit_maps import credit_map_figure
    from scpo.analysis.rollout_files import mixed_groups

    cfg = _config(params, profile, sets)
    with _one_line_errors():
        if Path(out).is_dir():
            raise ConfigError(f"--out {out} is a folder; give the figure's file name, e.g. {Path(out) / 'map.png'}")
        _check_figure_suffix(out)
        try:
            path, view, _ = credit_map_figure(
                rollouts, cfg, iteration=iteration, group=group, out=out, refuse_blank=True
            )
        except OSError as err:
            if write_problem(err, out) is None:
                raise
            raise ExpectedError(f"{write_problem(err, out)}; choose another --out") from None
    if view.group not in mixed_groups(view.batch):
        typer.echo(
            f"note: group {view.group} has no won and lost siblings: the group-relative estimators' advantages are 0 "
            "on it; only estimators with other baselines show credit",
            err=True,
        )
    _done(f"wrote {path} (iteration {view.iteration}, group {view.group})")


def _check_figure_suffix(out: Path) -> None:
    """ConfigError (before any work) when matplotlib cannot write a figure of `out`'s suffix."""
    from matplotlib.backend_bases import FigureCanvasBase

    kinds = FigureCanvasBase.get_supported_filetypes()
    if out.suffix.lstrip(".").lower() not in kinds:
        raise ConfigError(
            f"--out {out}: a figure cannot be written as {out.suffix or 'a file without a suffix'}; "
            f"allowed suffixes: {', '.join('.' + k for k in sorted(kinds))}"
        )


@app.command("import")
def import_rollouts(
    source: Path = typer.Argument(
        ..., callback=expand_home, help="a steps JSONL (or a folder of them), or a folder of rollout files"
    ),
    out: Path = typer.Argument(
        ..., callback=expand_home, help="the run folder to write (<out>/rollouts/iter_XXXX.parquet, import.json)"
    ),
    kind: str = typer.Option("auto", "--from", help="auto | jsonl | rollouts (verl-agent's writer, a run of ours)"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace an earlier import in OUT"),
) -> None:
    """Rollouts of another trainer (verl-agent's writer, or a JSONL of steps: docs/import.md) into a run folder the
    explorer, credit-map and every analysis read, one iteration at a time."""
    from scpo.importers.run_import import import_run

    with _one_line_errors():
        summary = import_run(source, out, kind=kind, overwrite=overwrite)
    _done(summary.line())


@app.command()
def parity(
    split: str = typer.Option("valid_seen", help="ALFWorld split, or several comma-separated: valid_seen,valid_unseen"),
    games: int | None = typer.Option(None, help="first N games (default: all)"),
    random_walks: int = typer.Option(2, help="seeded random walks per game"),
    walk_steps: int = typer.Option(40, help="steps per random walk"),
    data_root: Path = typer.Option(Path("data/alfworld"), callback=expand_home, help="prepared ALFWorld root"),
    out: Path | None = typer.Option(None, callback=expand_home, help="write the per-game report as JSON"),
) -> None:
    """ALFWorld parity: play walkthroughs and random walks in both engines and report agreement."""
    from scpo.envs.alfworld.parity import main as parity_main

    with _one_line_errors():
        _check_parity_inputs(split, games, random_walks, walk_steps, data_root, out)
        parity_main(
            split=split, games=games, random_walks=random_walks, walk_steps=walk_steps, data_root=data_root, out=out
        )


def _check_parity_inputs(
    split: str, games: int | None, random_walks: int, walk_steps: int, data_root: Path, out: Path | None
) -> None:
    """Every `scpo parity` input checked before a game is played (ConfigError / DataError, one line): known splits,
    positive counts, games present under `data_root`, and `--out` a file name (not a folder) in a writable place."""
    from scpo.envs.alfworld.games import SPLITS, list_tasks

    splits = [s.strip() for s in split.split(",")]
    unknown = [s for s in splits if s not in SPLITS]
    if unknown:
        raise ConfigError(f"--split {unknown[0]!r} is not an ALFWorld split; allowed: {', '.join(SPLITS)}")
    for option, value, least in (
        ("--games", games, 1),
        ("--random-walks", random_walks, 0),
        ("--walk-steps", walk_steps, 1),
    ):
        if value is not None and (isinstance(value, bool) or value < least):
            raise ConfigError(
                f"{option} {value}: allowed: an integer >= {least}"
                + (" (or leave it out: all games)" if option == "--games" else "")
            )
    if out is not None:
        if out.is_dir():
            raise ConfigError(f"--out {out} is a folder; give the report's file name, e.g. {out / 'parity.json'}")
        if out.suffix != ".json":
            raise ConfigError(f"--out {out}: the report is JSON; give a file name ending in .json")
    for name in splits:
        if not list_tasks(name, data_root):  # DataError naming the folder when there is no ALFWorld data at all
            raise DataError(
                f"no ALFWorld games of split {name!r} under {data_root}; run `scpo prepare-data --only alfworld`"
            )


@app.command()
def fidelity(
    params: Path = ParamsOpt,
    profile: str | None = ProfileOpt,
    sets: list[str] | None = SetOpt,
    eps: str | None = typer.Option(None, help="noise levels, comma-separated (default: fidelity.eps)"),
    tasks: int | None = typer.Option(None, help="first N games of fidelity.split (default: fidelity.n_tasks)"),
    seeds: str | None = typer.Option(None, help="task seeds, comma-separated (default: fidelity.seeds)"),
    estimators: str | None = typer.Option(
        None, help=f"credit methods, comma-separated, of {', '.join(available_methods())} (default: fidelity.methods)"
    ),
    trained: bool = typer.Option(True, "--trained/--no-trained", help="also the trained runs' saved rollouts"),
    sweep: bool = typer.Option(False, "--sweep/--no-sweep", help="also sweep SCPO's options"),
    reports_dir: Path = typer.Option(Path("reports"), callback=expand_home, help="where tables/ and figures/ go"),
) -> None:
    """Credit fidelity of every estimator against the planner's oracle progress (ALFWorld): tables and a figure."""
    from scpo.testbeds.fidelity_tables import write_fidelity_report

    with _one_line_errors():
        extra = {
            k: v
            for k, v in {
                "fidelity.eps": _number_list("--eps", eps, float),
                "fidelity.n_tasks": tasks,
                "fidelity.seeds": _number_list("--seeds", seeds, int),
                "fidelity.methods": [x.strip() for x in estimators.split(",")] if estimators else None,
            }.items()
            if v is not None
        }
    cfg = _config(params, profile, sets, extra)
    with _one_line_errors():
        paths, res = write_fidelity_report(
            cfg, reports_dir, trained=trained, sweep=sweep, note=lambda line: typer.echo(line, err=True)
        )
    typer.echo(json.dumps({"written": paths, "seconds": res.seconds, "planner": res.planner}, indent=1))


def _number_list(option: str, text: str | None, kind: type) -> list | None:
    """'0.2,0.4' -> [0.2, 0.4] (None for no option); ConfigError naming the option and the value that is not one."""
    if not text:
        return None
    out = []
    for item in text.split(","):
        try:
            out.append(kind(item.strip()))
        except ValueError:
            what = "a number" if kind is float else "an integer"
            raise ConfigError(f"{option} {text!r}: {item.strip()!r} is not {what}; give e.g. {option} 1,2") from None
    return out


provenance_app = typer.Typer(no_args_is_help=True, help="What runs were computed with, and what differs between two.")
app.add_typer(provenance_app, name="provenance")


@provenance_app.command("diff")
def provenance_diff(
    a: Path = typer.Argument(
        ..., callback=expand_home, help="a run or checkpoint folder, a provenance.json, or a reports/environment.json"
    ),
    b: Path = typer.Argument(..., callback=expand_home, help="the same for the other result"),
) -> None:
    """One line per difference between two results' records, grouped (packages, lock, python, cpu, numerics, config,
    git); exit 0 when they agree, 1 when they differ (docs/reproducibility.md says which differences break bit
    identity)."""
    from scpo.software import GROUPS, differences, load_record

    try:
        ra, rb = load_record(a), load_record(b)
    except ValueError as err:
        typer.secho(str(err), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    found = differences(ra, rb)
    for group, line in found:
        typer.echo(f"{group}: {line}")
    if not found:
        typer.echo(f"no differences between {a} and {b} in {', '.join(GROUPS)}")
        return
    counts = {g: sum(1 for grp, _ in found if grp == g) for g in GROUPS}
    typer.echo(f"{len(found)} differences (" + ", ".join(f"{g} {n}" for g, n in counts.items() if n) + ")")
    raise typer.Exit(1)


if __name__ == "__main__":
    app()

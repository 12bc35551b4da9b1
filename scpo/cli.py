"""The `scpo` command: prepare-data, train, eval, sweep, credit-map, parity, convert-checkpoint, fidelity.

Every command reads params.yaml (`--params`), a profile (`--profile`) and dotted overrides (`--set key=value`, repeatable),
validated by the same typed config as Papermill parameters. Heavy modules are imported inside each command.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from scpo.config import Config, ConfigError, load_config, parse_overrides

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Credit assignment for group-based RL of LLM agents (SCPO, GRPO, GiGPO, HGPO, G2PO, ProGPO, HCAPO).")

ParamsOpt = typer.Option(Path("params.yaml"), "--params", help="params.yaml to read")
ProfileOpt = typer.Option(None, "--profile", help="smoke | cpu | gpu (default: params.yaml's `profile`)")
SetOpt = typer.Option(None, "--set", help="dotted override, e.g. --set credit.scpo.tau=0.8 (repeatable)")


def _config(params: Path, profile: Optional[str], sets: Optional[List[str]], extra: dict | None = None) -> Config:
    try:
        overrides = parse_overrides(sets)
        overrides.update(extra or {})
        return load_config(params, profile=profile, overrides=overrides)
    except ConfigError as err:
        typer.secho(str(err), fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None


@app.command("prepare-data")
def prepare_data(params: Path = ParamsOpt, profile: Optional[str] = ProfileOpt, sets: Optional[List[str]] = SetOpt,
                 only: Optional[str] = typer.Option(None, help="alfworld | webshop (default: both)")) -> None:
    """Copy, unpack or download ALFWorld games and WebShop files into data/ and build the WebShop catalogue (idempotent:
    complete data is only verified), then print the counts. Without the data and without internet: one line saying
    where it looked and what to run."""
    from scpo.data.errors import DataError
    from scpo.data.prepare import prepare_data as run_prepare

    cfg = _config(params, profile, sets)
    try:
        summary = run_prepare(cfg, only)
    except (DataError, ValueError) as err:
        typer.secho(str(err), fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None
    if "alfworld" in summary:
        counts = {k: v for k, v in summary["alfworld"].items() if k != "total"}
        typer.echo("ALFWorld games per split: " + ", ".join(f"{k} {v}" for k, v in counts.items())
                   + f"; total {summary['alfworld']['total']}")
    if "webshop" in summary:
        typer.echo("WebShop: " + ", ".join(f"{k} {v}" for k, v in summary["webshop"].items()))


@app.command()
def train(params: Path = ParamsOpt, profile: Optional[str] = ProfileOpt, sets: Optional[List[str]] = SetOpt,
          stage: str = typer.Option("rl", help="sft (behaviour-cloning warm start) | rl"),
          method: Optional[str] = typer.Option(None, help="credit method (default: credit.method)"),
          env: Optional[str] = typer.Option(None, help="alfworld | webshop (default: env.name)"),
          seed: Optional[int] = typer.Option(None, help="train.seed"),
          out: Optional[Path] = typer.Option(None, help="run directory (default: <train.out_dir>/<env>/<method>/seed<seed>)"),
          resume: bool = typer.Option(False, "--resume", help="continue from the last checkpoint in the run directory")) -> None:
    """Behaviour-cloning warm start (--stage sft) or group RL (--stage rl --method NAME)."""
    from scpo.train.checkpoint import CheckpointError
    from scpo.train.runner import run_training

    extra = {k: v for k, v in {"credit.method": method, "env.name": env, "train.seed": seed}.items() if v is not None}
    cfg = _config(params, profile, sets, extra)
    try:
        run_training(cfg, stage=stage, out_dir=out, resume=resume)
    except CheckpointError as err:
        typer.secho(str(err), fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None


@app.command("eval")
def evaluate(params: Path = ParamsOpt, profile: Optional[str] = ProfileOpt, sets: Optional[List[str]] = SetOpt,
             checkpoint: Path = typer.Option(..., help="run directory or checkpoint to evaluate"),
             out: Path = typer.Option(Path("reports/eval"), help="where the JSON + CSV go")) -> None:
    """Evaluate a policy on the eval splits (temperature eval.temperature); success per task type as JSON + CSV."""
    from scpo.train.evaluate import run_evaluation

    cfg = _config(params, profile, sets)
    run_evaluation(cfg, checkpoint=checkpoint, out_dir=out)


@app.command()
def sweep(notebook: Path = typer.Argument(..., help="notebook to execute per grid point"),
          grid: List[str] = typer.Option(..., "--grid", help="name=v1,v2,... (repeatable); the product is swept"),
          out: Path = typer.Option(Path("reports/sweeps"), help="folder for executed notebooks and the summary"),
          kernel: str = typer.Option("python3", help="Jupyter kernel"),
          backend: str = typer.Option("serial", help="serial | local (--jobs / --gpus on this machine) | ray"),
          jobs: int = typer.Option(1, help="local: points at once (without --gpus)"),
          gpus: Optional[str] = typer.Option(None, help="local: GPU ids, one point per GPU, e.g. 0,1,2,3"),
          gpus_per_point: float = typer.Option(1.0, help="ray: GPUs each point asks for (0 on CPU nodes)"),
          ray_address: Optional[str] = typer.Option(None, help="ray: cluster address (auto: the one this node "
                                                    "joined; default: a local Ray instance)")) -> None:
    """Papermill sweep: run NOTEBOOK once per point of the grid, then write summary.csv / summary.md."""
    from scpo.pipeline.sweep import run_sweep

    run_sweep(notebook, grid, out, kernel=kernel, backend=backend, jobs=jobs, gpus=gpus,
              gpus_per_point=gpus_per_point, ray_address=ray_address)


@app.command("credit-map")
def credit_map(rollouts: Path = typer.Argument(..., help="saved rollouts (.parquet / .jsonl)"),
               params: Path = ParamsOpt, profile: Optional[str] = ProfileOpt, sets: Optional[List[str]] = SetOpt,
               group: int = typer.Option(0, help="group id to draw"),
               out: Path = typer.Option(Path("reports/figures/credit_map.png"), help="figure path")) -> None:
    """Heat map of every estimator's per-step advantages on one group of saved rollouts."""
    from scpo.analysis.credit_maps import credit_map_figure

    cfg = _config(params, profile, sets)
    path = credit_map_figure(rollouts, cfg, group=group, out=out)
    typer.echo(f"wrote {path}")


@app.command()
def parity(split: str = typer.Option("valid_seen", help="ALFWorld split, or several comma-separated: valid_seen,valid_unseen"),
           games: Optional[int] = typer.Option(None, help="first N games (default: all)"),
           random_walks: int = typer.Option(2, help="seeded random walks per game"),
           walk_steps: int = typer.Option(40, help="steps per random walk"),
           data_root: Path = typer.Option(Path("data/alfworld"), help="prepared ALFWorld root"),
           out: Optional[Path] = typer.Option(None, help="write the per-game report as JSON")) -> None:
    """ALFWorld parity: play walkthroughs and random walks in both engines and report agreement."""
    from scpo.envs.alfworld.parity import main as parity_main

    parity_main(split=split, games=games, random_walks=random_walks, walk_steps=walk_steps, data_root=data_root, out=out)


@app.command()
def fidelity(params: Path = ParamsOpt, profile: Optional[str] = ProfileOpt, sets: Optional[List[str]] = SetOpt,
             eps: Optional[str] = typer.Option(None, help="noise levels, comma-separated (default: fidelity.eps)"),
             tasks: Optional[int] = typer.Option(None, help="first N games of fidelity.split (default: fidelity.n_tasks)"),
             seeds: Optional[str] = typer.Option(None, help="task seeds, comma-separated (default: fidelity.seeds)"),
             estimators: Optional[str] = typer.Option(None, help="credit methods, comma-separated (default: "
                                                      "fidelity.methods)"),
             trained: bool = typer.Option(True, "--trained/--no-trained", help="also the trained runs' saved rollouts"),
             sweep: bool = typer.Option(False, "--sweep/--no-sweep", help="also sweep SCPO's options"),
             reports_dir: Path = typer.Option(Path("reports"), help="where tables/ and figures/ go")) -> None:
    """Credit fidelity of every estimator against the planner's oracle progress (ALFWorld): tables and a figure."""
    from scpo.analysis.fidelity_report import write_fidelity_report

    extra = {k: v for k, v in {
        "fidelity.eps": [float(x) for x in eps.split(",")] if eps else None, "fidelity.n_tasks": tasks,
        "fidelity.seeds": [int(x) for x in seeds.split(",")] if seeds else None,
        "fidelity.methods": [x.strip() for x in estimators.split(",")] if estimators else None}.items() if v is not None}
    cfg = _config(params, profile, sets, extra)
    paths, res = write_fidelity_report(cfg, reports_dir, trained=trained, sweep=sweep)
    typer.echo(json.dumps({"written": paths, "seconds": res.seconds, "planner": res.planner}, indent=1))


@app.command("convert-checkpoint")
def convert_checkpoint(path: Path = typer.Argument(..., help="a checkpoint folder, or a run folder (all its checkpoints)")
                       ) -> None:
    """Rewrite old checkpoints' optimizer.pt / rng.pt (pickles) as safetensors; only for checkpoints you trust."""
    from scpo.train.checkpoint import CheckpointError
    from scpo.train.legacy_checkpoint import WARNING, convert_checkpoint as convert, legacy_checkpoints

    typer.secho(f"WARNING: {WARNING}", fg=typer.colors.YELLOW, err=True)
    todo = legacy_checkpoints(path)
    if not todo:
        typer.secho(f"no checkpoint with optimizer.pt and rng.pt to convert at {path}", fg=typer.colors.RED, err=True)
        raise typer.Exit(1)
    try:
        for ckpt in todo:
            convert(ckpt)
            typer.echo(f"converted {ckpt}: optimizer.safetensors, rng.safetensors written; optimizer.pt, rng.pt removed")
    except CheckpointError as err:
        typer.secho(str(err), fg=typer.colors.RED, err=True)
        raise typer.Exit(1) from None


if __name__ == "__main__":
    app()

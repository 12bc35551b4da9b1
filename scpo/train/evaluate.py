"""`run_evaluation(cfg, checkpoint, out_dir)`: `cfg.eval.episodes_per_task` episodes (default one) per task on each
evaluation split of the environment (`env.<name>.eval_splits`: ALFWorld valid_seen and valid_unseen, WebShop test) at
`cfg.eval.temperature`; success overall and per task type, written as `eval.json` and `eval.csv` (split, task_type, n,
success; task_type "all" is the split's overall row; `n` counts episodes, so games x episodes_per_task).

`eval.n_episodes` tasks are taken evenly spaced over the split's sorted task list (ALFWorld's ids sort by task type, so
the first n would cover only one or two types).

What the policy was trained on comes from the run, not from the command line: `config_for_checkpoint` reads the run's
provenance (`provenance.json` of the run folder, or a checkpoint's state.json) and takes the environment (`env.name`,
its `env.<name>` section: step limit, options; `env.history_length`), the `policy` section (profile, prompt and
answer lengths, dtype) and `rollout.action_choice` from it. An explicit override contradicting the run is an error
unless forced; the evaluation splits (`env.<name>.eval_splits`) are the evaluation's choice. Every check (model files,
evaluation data, an existing eval.json, an --out that is a file) runs before anything is written.

One evaluation at a time writes into an --out: it holds the folder's lock (`scpo.pipeline.folder_lock.RunLock`, as
training does), so a second `scpo eval` into the same folder fails at once naming the first; each writes its files under
temporary names of its own and renames them into place. `--overwrite` replaces eval.json and eval.csv only.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from scpo.config import Config, ConfigError, apply_overrides, validate_config
from scpo.envs.registry import env_settings
from scpo.errors import RunFolderError, write_problem
from scpo.pipeline.folder_lock import RunLock, check_not_in_use
from scpo.policy import load_policy, resolve_model_dir
from scpo.policy.placement import check_engine, resolve_device
from scpo.rollout import collect_rollouts, make_engine
from scpo.run.checkpoint import model_problem
from scpo.run.inputs import data_record, task_list
from scpo.run.provenance import read_provenance, write_json_atomic
from scpo.train.seeding import iteration_seed, seed_everything, set_threads

__all__ = [
    "run_evaluation",
    "default_eval_dir",
    "evaluation_tasks",
    "config_for_checkpoint",
    "run_provenance",
    "FROM_RUN",
]

# dotted keys an evaluation takes from the run it evaluates ("env.<name>" is the trained environment's section) ...
FROM_RUN = ("env.name", "env.history_length", "env.<name>", "policy", "rollout.action_choice")
# ... except these evaluation choices, which an explicit override sets
EVAL_CHOICES = ("env.<name>.eval_splits",)


def default_eval_dir(checkpoint: Path) -> Path:
    """Where `scpo eval` writes by default: `<run>/evals/<iter_XXXX>/` for a checkpoint (or a folder inside one), out
    of `checkpoints/`, which pruning clears; `<checkpoint>/eval/` for a run or model folder."""
    checkpoint = Path(checkpoint)
    for folder in (checkpoint, *checkpoint.parents):
        if folder.parent.name == "checkpoints":
            return folder.parent.parent / "evals" / folder.name
    return checkpoint / "eval"


def run_provenance(checkpoint: Path) -> tuple[dict, Path] | None:
    """(provenance, where it was found) for a run folder, a checkpoint folder or a model folder inside either (the
    folder itself, then its parent, then its grandparent); None when there is none."""
    path = Path(checkpoint).resolve()
    for folder in (path, path.parent, path.parent.parent):
        record = read_provenance(folder)
        if record is not None:
            return record, folder
    return None


def _covered(key: str, env_name: str, keys: tuple[str, ...] = FROM_RUN) -> bool:
    keys = tuple(k.replace("<name>", env_name) for k in keys)
    return any(key == k or key.startswith(k + ".") for k in keys)


def config_for_checkpoint(cfg: Config, checkpoint: Path, force: bool = False) -> tuple[Config, str]:
    """`cfg` with the `FROM_RUN` settings of the run that `checkpoint` belongs to, and a line saying where they came
    from. An explicit override (`cfg.origin`) of one of them that differs from the run's raises ConfigError unless
    `force` (then the override wins). Without any provenance, `cfg` as it is."""
    found = run_provenance(checkpoint)
    if found is None:
        return cfg, (
            f"no run record (provenance.json, checkpoint state.json) at or above {checkpoint}: evaluating with "
            f"the config given (env.name={cfg.env.name!r}, policy.profile={cfg.policy.profile!r})"
        )
    record, where = found
    saved = record["config"]
    name = saved["env"]["name"]
    from_run = {
        "env.name": name,
        "env.history_length": saved["env"]["history_length"],
        f"env.{name}": saved["env"][name],
        "policy": saved["policy"],
        "rollout.action_choice": saved["rollout"]["action_choice"],
    }
    overrides = cfg.origin.get("overrides", {})
    choices = {k: v for k, v in overrides.items() if _covered(k, name, EVAL_CHOICES)}
    explicit = {k: v for k, v in overrides.items() if _covered(k, name) and k not in choices}
    flat_run = _flatten(from_run)
    conflicts = {
        k: v
        for k, v in explicit.items()
        if k in flat_run and flat_run[k] != _jsonable(v) or k == "env.name" and v != name
    }
    if conflicts and not force:
        shown = "; ".join(
            f"{k}={v!r} (the run: {flat_run.get(k, name if k == 'env.name' else '?')!r})" for k, v in conflicts.items()
        )
        raise ConfigError(
            f"{checkpoint} was trained with other settings than asked for: {shown}; drop them (the "
            "evaluation takes them from the run) or add --force to evaluate with them anyway"
        )
    raw = apply_overrides(cfg.model_dump(mode="json"), from_run)
    raw = apply_overrides(raw, {**(explicit if force else {}), **choices})
    new = validate_config(raw, source=f"the run record in {where}", origin=cfg.origin)
    return new, f"evaluating on {new.env.name} with the run's env and policy settings ({shown_path(where)})"


def shown_path(path: str | Path) -> str:
    """`path` relative to the working directory when it lies below it (results name no folder of the machine they ran
    on), else as given."""
    path = Path(path)
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


def _jsonable(value):
    return list(value) if isinstance(value, tuple) else value


def _flatten(tree: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in tree.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def evaluation_tasks(all_tasks: list[str], n: int | None) -> list[str]:
    """All tasks, or `n` evenly spaced ones (deterministic)."""
    if n is None or n >= len(all_tasks):
        return list(all_tasks)
    idx = np.unique(np.linspace(0, len(all_tasks) - 1, n).round().astype(int))
    return [all_tasks[i] for i in idx]


def run_evaluation(
    cfg: Config, checkpoint: Path, out_dir: Path, force: bool = False, overwrite: bool = True, note=None
) -> dict:
    """Evaluate the policy at `checkpoint` (model / run / checkpoint dir) on the environment it was trained on
    (`config_for_checkpoint`); returns the eval.json dict. `overwrite=False` refuses an `out_dir` that already holds
    an eval.json. `note(line)` receives the line saying where the settings came from."""
    t_start = time.perf_counter()
    cfg, where = config_for_checkpoint(cfg, checkpoint, force=force)
    env = env_settings(cfg)
    check_engine(cfg.rollout.engine, resolve_device(cfg.train.device))  # before loading: no GPU, or no vLLM
    model_dir = resolve_model_dir(checkpoint)
    problem = model_problem(model_dir)
    if problem:
        raise RunFolderError(f"cannot evaluate {checkpoint}: {problem}")
    splits = {split: task_list(env, split) for split in env.eval_splits}
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise RunFolderError(f"--out {out_dir} is a file, not a folder; choose a folder for eval.json and eval.csv")
    check_not_in_use(out_dir)
    _check_no_result(out_dir, overwrite)
    try:
        with RunLock(out_dir):
            _check_no_result(out_dir, overwrite)  # again, now that no other evaluation can start
            return _evaluate(cfg, env, model_dir, splits, out_dir, where, note, t_start)
    except OSError as err:
        problem = write_problem(err, out_dir)
        if problem is None:
            raise
        raise RunFolderError(f"{problem}; free space or make it writable, then evaluate again") from err


def _check_no_result(out_dir: Path, overwrite: bool) -> None:
    if not overwrite and (out_dir / "eval.json").exists():
        raise RunFolderError(
            f"{out_dir / 'eval.json'} exists (an earlier evaluation); add --overwrite to replace it, "
            "or choose another --out"
        )


def _evaluate(cfg: Config, env, model_dir: Path, splits: dict, out_dir: Path, where: str, note, t_start) -> dict:
    """The evaluation itself (`run_evaluation` holds --out's lock)."""
    if note is not None:
        note(where)
    set_threads(cfg.train.torch_threads)
    policy = load_policy(model_dir, dtype=cfg.policy.dtype, device=resolve_device(cfg.train.device))
    engine = make_engine(cfg, policy, model_dir=model_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    result: dict = {
        "checkpoint": shown_path(model_dir),
        "env": cfg.env.name,
        "temperature": cfg.eval.temperature,
        "settings_from": where,
        "splits": {},
    }
    rows = []
    for split in env.eval_splits:
        seed_everything(iteration_seed(cfg.train.seed, -1))
        tasks = evaluation_tasks(splits[split], cfg.eval.n_episodes)
        trajectories, timing = collect_rollouts(
            env.package,
            tasks,
            cfg.eval.episodes_per_task,
            engine,
            env_name=env.name,
            seed=cfg.train.seed,
            **env.play_options(),
            temperature=cfg.eval.temperature,
            top_p=1.0,
            desc=f"eval {split}",
        )
        won = np.array([t.won for t in trajectories], dtype=float)
        per_type = {}
        for tt in sorted({t.task_type for t in trajectories}):
            sel = np.array([t.task_type == tt for t in trajectories])
            per_type[tt] = {"n": int(sel.sum()), "success": float(won[sel].mean())}
            rows.append({"split": split, "task_type": tt, "n": int(sel.sum()), "success": float(won[sel].mean())})
        rows.append({"split": split, "task_type": "all", "n": len(trajectories), "success": float(won.mean())})
        result["splits"][split] = {
            "n": len(trajectories),
            "success": float(won.mean()),
            "task_score": float(np.mean([t.task_score for t in trajectories])),
            "episode_length": float(np.mean([len(t) for t in trajectories])),
            "invalid_rate": float(np.mean([not s.valid for t in trajectories for s in t.steps])),
            "per_task_type": per_type,
            "data": data_record(env, tasks),  # the prepared data evaluated on (games / catalogue), as a digest
            "env_s": timing.env_s,
            "gen_s": timing.gen_s,
        }
    result["wall_s"] = time.perf_counter() - t_start
    import pandas as pd

    tmp = out_dir / f".eval.csv.{os.getpid()}.tmp"
    pd.DataFrame(rows, columns=["split", "task_type", "n", "success"]).to_csv(tmp, index=False)
    tmp.replace(out_dir / "eval.csv")
    write_json_atomic(out_dir / "eval.json", result)
    return result

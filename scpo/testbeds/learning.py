"""The learning benchmark: does better credit make the agent learn faster? Every estimator of `learning.methods` trains
from the same warm start on a fixed panel of training tasks, with paired seeds, and the panel is evaluated on a fixed
episode list as it learns (docs/algorithms.md, "Measuring learning").

    results = run_learning(cfg, warm_starts={"alfworld": "runs/alfworld/sft/seed0"})   # one dict per run

One run = (environment, method, seed):
- RL (`scpo.train.run.run_training`) with `credit.method` = method (`<method>+ds`: with dynamic sampling, for the
  methods of `learning.dynamic_sampling`; a label of `learning.variants`: that variant's overrides, its credit.method
  among them), `train.seed` = seed, `learning.iterations`
  iterations of `learning.n_tasks` tasks drawn from the panel (`train.panel_size` = `learning.panel_size`,
  `scpo.envs.panel`), a checkpoint every `learning.eval_every` iterations; the rest of the config as given. Within a
  seed every method draws the same tasks (the draws are seeded by the seed and the iteration only);
- the panel evaluation: every panel task `learning.eval_episodes_per_task` times at `eval.temperature`, for the warm
  start (iteration 0: once per environment and seed, `warm_start_evaluation`) and every checkpoint; the environment
  seeds and the sampler's RNG are set the same way for every method and evaluation point, so within a seed every
  policy plays the same episode list;
- the unseen evaluation: the final policy on `learning.unseen_split[env]` (one episode per task), whether what was
  learnt generalises.
A run writes `<learning.out_dir>/<env>/<method>/seed<k>/result.json`; a run whose result is there is not repeated (an
interrupted benchmark continues where it stopped; the training itself resumes from its checkpoints). A method whose
need an environment cannot meet (the oracle on an environment without a planner) is left out there, and said so.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from concurrent.futures import as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from scpo.config import DYNAMIC_SAMPLING_SUFFIX, Config, apply_overrides, validate_config
from scpo.workers import worker_executor

__all__ = [
    "RunKey",
    "labels",
    "run_keys",
    "left_out",
    "pairing_settings",
    "run_config",
    "learning_run",
    "warm_start_evaluation",
    "run_learning",
    "own_rollouts_fidelity",
    "RESULT_FILE",
    "FIDELITY_ENVS",
]

RESULT_FILE = "result.json"
FIDELITY_ENVS = ("alfworld",)  # where the fidelity sources measure credit: the fidelity benchmark, ALFWorld's planner


@dataclass(frozen=True)
class RunKey:
    env: str
    method: str  # a registered method, <method>+ds (with dynamic sampling) or a label of learning.variants
    seed: int

    @property
    def dynamic_sampling(self) -> bool:
        return self.method.endswith(DYNAMIC_SAMPLING_SUFFIX)

    def folder(self, root: str | Path) -> Path:
        return Path(root) / self.env / self.method / f"seed{self.seed}"


def labels(cfg: Config) -> dict[str, str]:
    """{run label: the credit method it trains with}, in the benchmark's order: learning.methods, then <method>+ds for
    learning.dynamic_sampling, then the labels of learning.variants."""
    L = cfg.learning
    out = {m: m for m in L.methods}
    out.update({m + DYNAMIC_SAMPLING_SUFFIX: m for m in L.dynamic_sampling})
    out.update({label: v["credit.method"] for label, v in L.variants.items()})
    return out


def left_out(cfg: Config) -> dict[str, list[str]]:
    """{env: run labels it cannot run}: the oracle (and its variants) where the environment declares no planner."""
    from scpo.credit.registry import method_spec
    from scpo.envs.registry import env_spec

    return {
        env: [
            label
            for label, method in labels(cfg).items()
            if method_spec(method).oracle and env_spec(env).oracle_progress is None
        ]
        for env in cfg.learning.envs
    }


def run_keys(cfg: Config) -> list[RunKey]:
    """Every (env, label, seed) the benchmark trains (`labels`), seeds innermost."""
    skip = left_out(cfg)
    return [
        RunKey(env, m, s)
        for env in cfg.learning.envs
        for m in labels(cfg)
        if m not in skip[env]
        for s in cfg.learning.seeds
    ]


def pairing_settings(cfg: Config, key: RunKey, warm_start: str | Path) -> dict:
    """The dotted settings that pair the runs of a seed (`scpo.config.LEARNING_RUN_SETTINGS`, exactly these keys):
    the same panel, task draws, iterations, checkpoints and warm start for every label."""
    L = cfg.learning
    return {
        "env.name": key.env,
        "train.seed": key.seed,
        "train.iterations": L.iterations,
        "train.panel_size": L.panel_size,
        "train.panel_seed": L.panel_seed,
        "rollout.n_tasks": L.n_tasks,
        "train.checkpoint_every": L.eval_every,
        "train.keep_checkpoints": None,
        "train.save_rollouts_every": 1,
        "train.init_from": str(warm_start),
        "train.rl_start": "warm_start",
    }


def run_config(cfg: Config, key: RunKey, warm_start: str | Path) -> Config:
    """The run's config: `cfg` with the label's method (and dynamic sampling), then its variant's overrides, then the
    pairing settings (`pairing_settings`, last: no variant changes them)."""
    overrides = {
        "credit.method": labels(cfg)[key.method],
        "rollout.dynamic_sampling.enable": key.dynamic_sampling,
        **cfg.learning.variants.get(key.method, {}),
        **pairing_settings(cfg, key, warm_start),
    }
    raw = apply_overrides(cfg.model_dump(mode="json"), overrides)
    return validate_config(raw, source=f"the learning benchmark's run {key}", origin=cfg.origin)


def evaluation_points(iterations: int, every: int) -> list[int]:
    """0, every, 2 every, ..., and the last iteration."""
    return sorted({0, *range(every, iterations + 1, every), iterations})


def _evaluate(cfg: Config, model_dir: Path, tasks: list[str], episodes: int, seed: int) -> dict:
    """Success (overall and per task type), task score and episode length of the policy at `model_dir` on `tasks`,
    `episodes` episodes each at eval.temperature; environment seeds and the sampler's RNG fixed by `seed`."""
    from scpo.envs.registry import env_settings
    from scpo.policy import load_policy
    from scpo.policy.placement import resolve_device
    from scpo.rollout import collect_rollouts, make_engine
    from scpo.train.seeding import iteration_seed, seed_everything

    env = env_settings(cfg)
    policy = load_policy(model_dir, dtype=cfg.policy.dtype, device=resolve_device(cfg.train.device))
    engine = make_engine(cfg, policy, model_dir=model_dir)
    seed_everything(iteration_seed(seed, -1))
    trajectories, _ = collect_rollouts(
        env.package,
        tasks,
        episodes,
        engine,
        env_name=env.name,
        seed=seed,
        **env.play_options(),
        temperature=cfg.eval.temperature,
        top_p=1.0,
        progress=False,
    )
    won = np.array([t.won for t in trajectories], dtype=float)
    types = np.array([t.task_type for t in trajectories])
    return {
        "n": len(trajectories),
        "success": float(won.mean()),
        "task_score": float(np.mean([t.task_score for t in trajectories])),
        "episode_length": float(np.mean([len(t) for t in trajectories])),
        "per_type": {tt: float(won[types == tt].mean()) for tt in sorted(set(types.tolist()))},
    }


def warm_start_evaluation(cfg: Config, key: RunKey, warm_start: str | Path, panel: list[str]) -> dict:
    """The panel evaluation of the warm start (iteration 0), the same for every method of a seed (same model, panel,
    episode list and sampler seed): computed once per (environment, seed) and kept in
    `<learning.out_dir>/<env>/warm_start/seed<k>.json`, reused only when the warm start's model digest (its
    manifest), the panel, the episode count and the temperature all match."""
    from scpo.policy import resolve_model_dir
    from scpo.run.provenance import write_json_atomic

    model = resolve_model_dir(warm_start)
    manifest = Path(warm_start) / "manifest.json"
    digest = json.loads(manifest.read_text())["model"]["sha256"] if manifest.exists() else None
    inputs = {
        "model": str(model),
        "model_sha256": digest,
        "panel": list(panel),
        "episodes": cfg.learning.eval_episodes_per_task,
        "temperature": cfg.eval.temperature,
        "seed": key.seed,
    }
    path = Path(cfg.learning.out_dir) / key.env / "warm_start" / f"seed{key.seed}.json"
    if digest is not None and path.exists():
        kept = json.loads(path.read_text())
        if kept.get("inputs") == inputs:
            return kept["evaluation"]
    evaluation = _evaluate(cfg, model, panel, cfg.learning.eval_episodes_per_task, key.seed)
    if digest is not None:
        write_json_atomic(path, {"inputs": inputs, "evaluation": evaluation})
    return evaluation


def learning_run(cfg: Config, key: RunKey, warm_start: str | Path) -> dict:
    """Train and evaluate one run (module docstring) into `key.folder(learning.out_dir)`; returns its result dict."""
    import pandas as pd

    from scpo.envs.panel import task_panel
    from scpo.envs.registry import env_settings
    from scpo.run.provenance import write_json_atomic
    from scpo.train.evaluate import evaluation_tasks
    from scpo.train.run import run_training

    folder = key.folder(cfg.learning.out_dir)
    result_path = folder / RESULT_FILE
    if result_path.exists():
        done = json.loads(result_path.read_text())
        if done.get("key") == [key.env, key.method, key.seed]:
            return done
    t0 = time.perf_counter()
    run_cfg = run_config(cfg, key, warm_start)
    train_dir = folder / "train"
    if not (train_dir / "summary.json").exists():
        resume = (train_dir / "checkpoints").is_dir() and any((train_dir / "checkpoints").glob("iter_*"))
        run_training(run_cfg, stage="rl", out_dir=train_dir, resume=resume, overwrite=not resume and train_dir.exists())
    env = env_settings(run_cfg)
    L = cfg.learning
    panel = task_panel(env, L.panel_size, L.panel_seed)
    curve = [{"iteration": 0, **warm_start_evaluation(run_cfg, key, warm_start, panel)}]
    for it in evaluation_points(L.iterations, L.eval_every)[1:]:
        model = train_dir / "checkpoints" / f"iter_{it:04d}" / "model"
        curve.append({"iteration": it, **_evaluate(run_cfg, model, panel, L.eval_episodes_per_task, key.seed)})
    split = L.unseen_split.get(key.env)
    unseen = None
    if split is not None:
        tasks = evaluation_tasks(env.package.list_tasks(split, data_root=env.data_root), L.unseen_n_tasks)
        unseen = {"split": split, **_evaluate(run_cfg, train_dir / "model", tasks, 1, key.seed)}
    history = pd.read_csv(train_dir / "history.csv")
    result = {
        "key": [key.env, key.method, key.seed],
        "env": key.env,
        "method": key.method,
        "seed": key.seed,
        "panel": panel,
        "curve": curve,
        "unseen": unseen,
        "train_success": history["charts/success_rate"].tolist(),
        "train_task_score": history["charts/task_score"].tolist(),
        "wall_s": time.perf_counter() - t0,
    }
    write_json_atomic(result_path, result)
    return result


def _one(cfg: Config, key: RunKey, warm_start: str) -> dict:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stderr(buf), contextlib.redirect_stdout(buf):
        return learning_run(cfg, key, warm_start)


def run_learning(
    cfg: Config, warm_starts: Mapping[str, str | Path], *, workers: int | None = None, progress: bool = True
) -> list[dict]:
    """Every run of `run_keys(cfg)`, `learning.parallel_runs` (or `workers`) at once in worker processes
    (`scpo.workers`); -> their result dicts, in `run_keys` order. A failed run fails the benchmark with its
    error after the others finished."""
    keys = run_keys(cfg)
    missing = [env for env in cfg.learning.envs if env not in warm_starts]
    if missing:
        raise ValueError(f"no warm start given for {missing}; the learning benchmark starts every run from one")
    for k in keys:  # every run's config is valid (a variant's overrides among them) before any run starts
        run_config(cfg, k, warm_starts[k.env])
    workers = cfg.learning.parallel_runs if workers is None else workers
    results: dict[RunKey, dict] = {}
    errors = []
    bar = tqdm(total=len(keys), desc="learning runs", unit="run", disable=not progress)
    if workers <= 1:
        for k in keys:
            try:
                results[k] = _one(cfg, k, str(warm_starts[k.env]))
            except Exception as e:
                errors.append(f"{k.env}/{k.method}/seed{k.seed}: {type(e).__name__}: {e}")
            bar.update()
    else:
        with worker_executor(workers, preload=("scpo.testbeds.learning",)) as pool:
            futures = {pool.submit(_one, cfg, k, str(warm_starts[k.env])): k for k in keys}
            for f in as_completed(futures):
                k = futures[f]
                try:
                    results[k] = f.result()
                    bar.set_postfix_str(f"{k.env}/{k.method}/seed{k.seed}", refresh=False)
                except Exception as e:
                    errors.append(f"{k.env}/{k.method}/seed{k.seed}: {type(e).__name__}: {e}")
                bar.update()
    bar.close()
    if errors:
        print("\n".join(errors), file=sys.stderr)
        raise RuntimeError(f"{len(errors)} of {len(keys)} learning runs failed; the first: {sorted(errors)[0]}")
    return [results[k] for k in keys]


def own_rollouts_fidelity(cfg: Config, results: list[dict]) -> dict[str, float]:
    """Per estimator of `learning.methods`, its credit fidelity AUC (all groups) on the benchmark runs' own saved
    rollouts: every ALFWorld run's saved iteration `learning.fidelity_runs_iteration`, labelled with the planner's
    oracle progress (`scpo.testbeds.fidelity.trained_fidelity`); {} without ALFWorld runs. Estimators that need the
    policy's Monte-Carlo values (`mc_advantage`) are left out: only training can play them."""
    from scpo.credit.registry import method_spec
    from scpo.testbeds.fidelity import trained_fidelity

    runs: dict[str, list[Path]] = {}
    for r in results:
        if r["env"] in FIDELITY_ENVS:
            key = RunKey(r["env"], r["method"], r["seed"])
            runs.setdefault(r["method"], []).append(key.folder(cfg.learning.out_dir) / "train")
    scorable = [m for m in cfg.learning.methods if not method_spec(m).policy_values]
    if not runs or not scorable:
        return {}
    res = trained_fidelity(
        cfg, runs, methods=scorable, iterations=[cfg.learning.fidelity_runs_iteration], progress=False
    )
    summary = res.summary
    return summary[summary["kind"] == "all"].groupby("estimator")["auc_mean"].mean().to_dict()

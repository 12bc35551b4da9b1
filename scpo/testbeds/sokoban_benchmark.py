"""The Sokoban learning benchmark's runs (notebook 09, experiments/sokoban_learning): a small MLP softmax policy
(`scpo.testbeds.tabular_policy`) trained by each estimator on a panel of Sokoban 6x6 one-box rooms whose optimal plan
takes at least `min_v_star` moves, its success computed exactly by dynamic programming; gradient fidelity and
wrong-sign credit of every estimator on the same policy (`scpo.testbeds.tabular_learning`).

    s = run_settings(cfg.sokoban)                     # what a run's result depends on
    env = setup(cfg, s)                               # the panel's graph, the credit options, the demonstrations
    curves = learning_runs(s, env, starts, seeds, methods, out, workers)   # one CSV per run under out/runs/
    per_batch = fidelity_runs(s, env, batches, starts)                     # cosines with the exact gradient

Two starts per seed: `random` (the MLP's initialisation drawn from the seed; Adam at `cold_lr` for `cold_iterations`)
and `imitation` (the same, then behaviour cloning on the optimal plans of `demo_rooms` train rooms outside the panel
for `imitation_epochs` full-batch Adam steps at lr 1e-3; RL with a fresh Adam at `warm_lr` for `warm_iterations`).
An iteration draws `n_tasks` panel rooms and `group_size` episodes of each at temperature 1 and takes one Adam step.
PPO trains a critic of its own (`scpo.testbeds.tabular_critic`: Adam at `critic_lr_ratio` times the policy's lr,
`critic_epochs` steps per iteration); its runs also score their own batches beside GRPO and the exact advantage
every `eval_every` iterations (`.critic` and `.probes` files beside the run's CSV).

Finished runs are kept under OUT/runs/ (one CSV per start, seed and method, written under a temporary name and renamed
when complete) and not repeated; a folder made with other settings is refused (`check_settings`).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from scpo.errors import ExpectedError

__all__ = [
    "NO_FIDELITY",
    "PPO_PROBES",
    "run_settings",
    "check_settings",
    "setup",
    "start_model",
    "learning_runs",
    "critic_records",
    "fidelity_runs",
    "wrong_sign_credit",
]

NO_FIDELITY = {"hcapo", "ppo"}  # hcapo needs a language model's hindsight scores; ppo a critic (scored along its runs)
PPO_PROBES = ("grpo", "exact_advantage")  # scored beside PPO on its own batches as its critic learns
CRITIC_KEYS = ("critic_lr_ratio", "critic_epochs")  # settings only PPO's runs depend on
# settings a folder's settings.json did not record before they were configurable, with the value its runs used
UNRECORDED = {"n_tasks": 2, "group_size": 8, "panel_seed": 0}
SETTINGS = (
    *("cold_iterations", "warm_iterations", "cold_lr", "warm_lr", "eval_every", "fidelity_batches", "panel_size"),
    *("min_v_star", "demo_rooms", "imitation_epochs", "hidden", *CRITIC_KEYS, *UNRECORDED),
)
SIGN_TOLERANCE = 1e-12  # |A^pi| at or below this counts as 0 (neither sign): the DP's rounding, not a preference
_WORKER: dict = {}


def run_settings(section) -> dict:
    """What a run's result depends on (`SETTINGS` of the `sokoban` config section or any object with those
    attributes): not how many seeds or which methods, since a run of (start, seed, method) is the same whatever the
    others."""
    return {k: getattr(section, k) for k in SETTINGS}


def check_settings(out: Path, s: Mapping) -> None:
    """Refuse `out` if its runs were made with other settings (ExpectedError), else record `s` there. A folder from
    before the critic's settings existed holds no PPO run, so its runs stand and the critic's settings are added; one
    from before `UNRECORDED` were recorded stands where `s` has the values its runs used."""
    saved_path = Path(out) / "settings.json"
    if saved_path.exists():
        saved = json.loads(saved_path.read_text())
        added = set(s) - set(saved)
        older = added <= set(CRITIC_KEYS) | set(UNRECORDED)
        older &= all(s[k] == UNRECORDED[k] for k in added & set(UNRECORDED))
        older &= not (added & set(CRITIC_KEYS)) or not list((Path(out) / "runs").glob("*_ppo.csv"))
        if saved != s and not (older and saved == {k: v for k, v in s.items() if k not in added}):
            raise ExpectedError(f"{out} holds runs made with other settings ({saved_path}); choose another folder")
    saved_path.write_text(json.dumps(dict(s), indent=2) + "\n")


def setup(cfg, s: Mapping) -> dict:
    """The world (the panel's graph), the credit options, the demonstrations: what every run shares. `cfg`: the
    project's Config (Sokoban's environment section, the credit options, data.root)."""
    import torch

    from scpo.envs import sokoban
    from scpo.envs.sokoban.room import SYMBOLS, render, step
    from scpo.testbeds.tabular_policy import TabularWorld, sokoban_panel

    torch.set_num_threads(1)
    options = cfg.env.sokoban
    panel = sokoban_panel(s["panel_size"], s["panel_seed"], s["min_v_star"], options.train_split)
    world = TabularWorld.build(
        "sokoban", panel, max_steps=options.max_steps, alphabet=list(SYMBOLS.values()), data_root=cfg.data.root
    )
    demos = []
    for task in [t for t in sokoban.list_tasks(options.train_split) if t not in panel][: s["demo_rooms"]]:
        state = sokoban.initial_state(task)
        for move in sokoban.expert_plan(state):
            demos.append((render(state), move))
            state = step(state, move)[0]
    return {"cfg": cfg, "credit": cfg.credit.for_env("sokoban"), "world": world, "demos": demos, "panel": panel}


def start_model(env: dict, s: Mapping, start: str, seed: int):
    """The policy a run starts from (module docstring)."""
    from scpo.testbeds.tabular_learning import imitate
    from scpo.testbeds.tabular_policy import mlp_policy

    world = env["world"]
    model = mlp_policy(world.n_features, world.n_actions, s["hidden"], seed=seed)
    if start == "imitation":
        imitate(world, model, env["demos"], s["imitation_epochs"])
    return model


def _init_worker(cfg, s: Mapping, env: dict | None = None) -> None:
    _WORKER.update(env or setup(cfg, s), settings=s, starts={})


def _run(job: tuple[str, int, str]) -> tuple[tuple[str, int, str], pd.DataFrame, float, dict[str, pd.DataFrame]]:
    """One learning run -> its curve, seconds, and for PPO its critic's record per iteration and the probes of its
    batches (`tabular_learning.learn`)."""
    from scpo.testbeds.tabular_critic import CriticOptions, TabularCritic
    from scpo.testbeds.tabular_learning import PPO, learn

    start, seed, method = job
    env, s = _WORKER, _WORKER["settings"]
    key = (start, seed)
    if key not in env["starts"]:
        env["starts"] = {key: start_model(env, s, start, seed).state_dict()}
    model = start_model(env, s, "random", seed)
    model.load_state_dict(env["starts"][key])
    cold = start == "random"
    lr = s["cold_lr"] if cold else s["warm_lr"]
    critic, probes = None, []
    if method == PPO:
        options = CriticOptions(lr=s["critic_lr_ratio"] * lr, epochs=s["critic_epochs"])
        critic = TabularCritic.from_policy(env["world"], model, options)
    t0 = time.perf_counter()
    curve = learn(
        env["world"],
        model,
        method,
        env["credit"],
        iterations=s["cold_iterations"] if cold else s["warm_iterations"],
        lr=lr,
        n_tasks=s["n_tasks"],
        group_size=s["group_size"],
        seed=seed,
        eval_every=s["eval_every"],
        data_root=env["cfg"].data.root,
        critic=critic,
        probe_methods=PPO_PROBES if critic is not None else (),
        probes=probes,
    )
    extras = {}
    if critic is not None:
        extras = {
            "critic": pd.DataFrame(critic.history).rename_axis("iteration").reset_index(),
            "probes": pd.DataFrame(probes),
        }
    return job, curve, time.perf_counter() - t0, extras


def learning_runs(
    s: Mapping,
    env: dict,
    starts: Sequence[str],
    seeds: Sequence[int],
    methods: Sequence[str],
    out: Path,
    workers: int,
) -> pd.DataFrame:
    """Every (start, seed, method) curve, finished ones read back from OUT/runs/; with one worker in this process
    (on `env`), else in `workers` processes that each set up their own (a progress bar over the runs to make)."""
    from tqdm.auto import tqdm

    runs = Path(out) / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    jobs = [(st, seed, m) for seed in seeds for st in starts for m in methods]  # seed by seed
    todo = [j for j in jobs if not (runs / f"{j[0]}_{j[1]}_{j[2]}.csv").exists()]

    def save(done) -> None:
        for (st, seed, m), curve, sec, extras in tqdm(done, total=len(todo), desc="learning runs"):
            for kind, frame in extras.items():  # before the run's own file, which marks it done
                frame.to_csv(runs / f"{st}_{seed}_{m}.{kind}", index=False)
            curve.assign(seconds=sec).to_csv(runs / f"{st}_{seed}_{m}.csv.tmp", index=False)
            (runs / f"{st}_{seed}_{m}.csv.tmp").rename(runs / f"{st}_{seed}_{m}.csv")

    if workers <= 1 or len(todo) <= 1:
        _init_worker(env["cfg"], s, env)
        save(map(_run, todo))
    else:
        with mp.get_context("spawn").Pool(workers, _init_worker, (env["cfg"], s)) as pool:
            save(pool.imap_unordered(_run, todo))
    frames = [pd.read_csv(runs / f"{st}_{seed}_{m}.csv").assign(start=st, seed=seed, method=m) for st, seed, m in jobs]
    return pd.concat(frames, ignore_index=True)


def critic_records(out: Path, starts: Sequence[str], seeds: Sequence[int], kind: str) -> pd.DataFrame:
    """The PPO runs' `kind` records ("critic": per iteration; "probes": per probed batch and method), every start and
    seed, from OUT/runs/ (empty where no PPO run was made)."""
    frames = [
        pd.read_csv(path).assign(start=st, seed=seed)
        for st in starts
        for seed in seeds
        if (path := Path(out) / "runs" / f"{st}_{seed}_ppo.{kind}").exists()
    ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def fidelity_methods(methods: Sequence[str] | None = None) -> list[str]:
    """The estimators a fixed policy's batches score: `methods` (default every registered one) but `NO_FIDELITY`."""
    from scpo.credit import available_methods

    return [m for m in (methods or available_methods()) if m not in NO_FIDELITY]


def fidelity_runs(
    s: Mapping, env: dict, batches: int, starts: Sequence[str], methods: Sequence[str] | None = None
) -> pd.DataFrame:
    """Per start (seed 0's policy): every estimator's cosines with the exact gradient over `batches` batches
    (`tabular_learning.fidelity`), the policy's exact panel success and the mean and median cosine between the
    exact gradients of the panel's rooms (`room_gradient_cosines`)."""
    from scpo.testbeds.tabular_learning import fidelity, room_gradient_cosines

    frames = []
    for start in starts:
        model = start_model(env, s, start, 0)
        per_batch = fidelity(
            env["world"],
            model,
            fidelity_methods(methods),
            env["credit"],
            n_batches=batches,
            n_tasks=s["n_tasks"],
            group_size=s["group_size"],
            seed=0,
            data_root=env["cfg"].data.root,
        )
        pairs = room_gradient_cosines(env["world"], model)
        frames.append(
            per_batch.assign(
                start=start,
                success=float(env["world"].table(model).success.mean()),
                room_cos_mean=float(pairs.mean()),
                room_cos_median=float(np.median(pairs)),
            )
        )
    return pd.concat(frames, ignore_index=True)


def wrong_sign_credit(
    s: Mapping, env: dict, batches: int, starts: Sequence[str], methods: Sequence[str] | None = None
) -> pd.DataFrame:
    """Per start (seed 0's policy, the batches `fidelity_runs` scores: same rooms, same random streams) and
    estimator: how often its credit has the wrong sign against the policy's exact advantage A^pi(s_t, a_t) =
    Q^pi - V^pi of the step (`ExactTable.advantage`), pooled over the batches' steps:

        wrong_given_positive = #{A > 0 and A^pi < 0} / #{A > 0}
        wrong_given_negative = #{A < 0 and A^pi > 0} / #{A < 0}

    with A^pi within `SIGN_TOLERANCE` of 0 counted as neither sign; n_positive, n_negative: the denominators (a share
    is NaN where its denominator is 0). The exact advantage's own shares are 0 by construction (its whitening only
    divides by the batch's sd: `scpo.credit.exact_advantage`), a check of the counting."""
    from scpo.testbeds.tabular_learning import method_advantages
    from scpo.train.collect import sample_tasks

    world, rows_out = env["world"], []
    scored = fidelity_methods(methods)
    for start in starts:
        model = start_model(env, s, start, 0)
        table = world.table(model)
        counts = {m: np.zeros(4, dtype=np.int64) for m in scored}
        for b in range(batches):
            drawn = sample_tasks(list(world.graph.tasks), s["n_tasks"], 0, b)
            batch, rows = world.rollouts(model, drawn, s["group_size"], seed=_batch_stream(0, b))
            adv = method_advantages(
                world, batch, rows, table, scored, env["credit"], np.random.default_rng([0, b, 1]), env["cfg"].data.root
            )
            exact = table.advantage[rows.edge]
            for m in scored:
                a = np.asarray(adv[m], dtype=np.float64)
                pos, neg = a > 0, a < 0
                counts[m] += [
                    pos.sum(),
                    (pos & (exact < -SIGN_TOLERANCE)).sum(),
                    neg.sum(),
                    (neg & (exact > SIGN_TOLERANCE)).sum(),
                ]
        for m, (n_pos, w_pos, n_neg, w_neg) in counts.items():
            rows_out.append(
                {
                    "start": start,
                    "method": m,
                    "n_positive": int(n_pos),
                    "wrong_given_positive": w_pos / n_pos if n_pos else np.nan,
                    "n_negative": int(n_neg),
                    "wrong_given_negative": w_neg / n_neg if n_neg else np.nan,
                }
            )
    return pd.DataFrame(rows_out)


def _batch_stream(seed: int, batch: int) -> int:
    """The rollouts' random stream of (seed, batch), as `tabular_learning.fidelity` and `learn` draw it."""
    return int(np.random.SeedSequence([seed, batch]).generate_state(1)[0])

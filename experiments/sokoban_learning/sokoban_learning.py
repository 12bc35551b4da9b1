"""Sokoban learning comparison with exact success: a small MLP softmax policy (`scpo.testbeds.tabular_policy`) trained
by each estimator on a panel of Sokoban 6x6 one-box rooms whose optimal plan takes at least 4 moves, its success
computed exactly by dynamic programming; gradient fidelity of every estimator on the same policy; the rank
correlation between the two (`scpo.testbeds.tabular_learning`; statistics: `scpo.analysis.learning_stats`).

Settings (README.md): the cpu profile's credit options for Sokoban, 15 steps, the panel of
experiments/gradient_fidelity (16 `train` rooms with V* >= 4, panel seed 0), learning.n_tasks tasks x
rollout.group_size episodes per iteration at temperature 1, one Adam step per iteration. Two starts per seed:
`random` (the MLP's initialisation drawn from the seed; lr --cold-lr) and `imitation` (the same, then behaviour
cloning on the optimal plans of --demo-rooms `train` rooms outside the panel for --imitation-epochs full-batch Adam
steps at lr 1e-3; RL with a fresh Adam at --warm-lr). PPO trains a critic of its own (scpo.testbeds.tabular_critic:
Adam at --critic-lr-ratio times the policy's lr, --critic-epochs steps per iteration) and its runs score their own
batches beside GRPO and the exact advantage every --eval-every iterations (ppo_critic.csv, ppo_probes.csv,
ppo_summary.csv, ppo_critic.png).

    env $(python -m scpo.numerics env) python experiments/sokoban_learning/sokoban_learning.py \
        --out experiments/sokoban_learning/results
    python experiments/sokoban_learning/sokoban_learning.py --quick --out /tmp/sokoban_learning_quick

Finished runs are kept under OUT/runs/ (one CSV per start, seed and method) and not repeated; a folder made with
other settings is refused.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
STARTS = ("random", "imitation")
LEARNING_METHODS = [  # every registered estimator but HCAPO (it needs a language model's hindsight scores)
    *("exact_advantage", "oracle", "grpo", "gigpo", "scpo", "rloo", "shuffled", "mc_advantage"),
    *("progpo_c", "progpo_r", "g2po", "hgpo", "graphgpo"),
    "ppo",  # with a learned critic (scpo.testbeds.tabular_critic)
]
EXTRA_COMPARISONS = [("scpo", "gigpo"), ("ppo", "exact_advantage")]  # besides every method against GRPO
NO_FIDELITY = {"hcapo", "ppo"}  # hcapo needs a language model's hindsight scores; ppo a critic (scored along its runs)
PPO_PROBES = ("grpo", "exact_advantage")  # scored beside PPO on its own batches as its critic learns
CRITIC_KEYS = ("critic_lr_ratio", "critic_epochs")  # settings only PPO's runs depend on
_WORKER: dict = {}


def settings(args) -> dict:
    """What a run's result depends on (not how many seeds or which methods: a run of (start, seed, method) is the
    same whatever the others)."""
    keys = [
        "cold_iterations",
        "warm_iterations",
        "cold_lr",
        "warm_lr",
        "eval_every",
        "fidelity_batches",
        "panel_size",
        "min_v_star",
        "demo_rooms",
        "imitation_epochs",
        "hidden",
        *CRITIC_KEYS,
    ]
    return {k: getattr(args, k) for k in keys}


def check_settings(out: Path, s: dict) -> None:
    """Refuse `out` if its runs were made with other settings (ExpectedError); a folder from before the critic's
    settings existed holds no PPO run, so its runs stand and the critic's settings are added to it."""
    from scpo.errors import ExpectedError

    saved_path = out / "settings.json"
    if saved_path.exists():
        saved = json.loads(saved_path.read_text())
        older = set(s) - set(saved) == set(CRITIC_KEYS) and not list((out / "runs").glob("*_ppo.csv"))
        if saved != s and not (older and saved == {k: v for k, v in s.items() if k not in CRITIC_KEYS}):
            raise ExpectedError(f"{out} holds runs made with other settings ({saved_path}); choose another --out")
    saved_path.write_text(json.dumps(s, indent=2) + "\n")


def setup(s: dict) -> dict:
    """The world (the panel's graph), the credit options, the demonstrations: what every run shares."""
    import torch

    from scpo.config import load_config
    from scpo.envs import sokoban
    from scpo.envs.sokoban.room import SYMBOLS, render, step
    from scpo.testbeds.tabular_policy import TabularWorld, sokoban_panel

    torch.set_num_threads(1)
    cfg = load_config(ROOT / "params.yaml", profile="cpu", overrides={"env.name": "sokoban", "env.history_length": 0})
    panel = sokoban_panel(s["panel_size"], cfg.learning.panel_seed, s["min_v_star"], cfg.env.sokoban.train_split)
    world = TabularWorld.build(
        "sokoban", panel, max_steps=cfg.env.sokoban.max_steps, alphabet=list(SYMBOLS.values()), data_root=cfg.data.root
    )
    demos = []
    for task in [t for t in sokoban.list_tasks(cfg.env.sokoban.train_split) if t not in panel][: s["demo_rooms"]]:
        state = sokoban.initial_state(task)
        for move in sokoban.expert_plan(state):
            demos.append((render(state), move))
            state = step(state, move)[0]
    return {
        "cfg": cfg,
        "credit": cfg.credit.for_env("sokoban"),
        "world": world,
        "demos": demos,
        "panel": panel,
    }


def start_model(env: dict, s: dict, start: str, seed: int):
    """The policy a run starts from (module docstring)."""
    from scpo.testbeds.tabular_learning import imitate
    from scpo.testbeds.tabular_policy import mlp_policy

    world = env["world"]
    model = mlp_policy(world.n_features, world.n_actions, s["hidden"], seed=seed)
    if start == "imitation":
        imitate(world, model, env["demos"], s["imitation_epochs"])
    return model


def _init_worker(s: dict, env: dict | None = None) -> None:
    _WORKER.update(env or setup(s), settings=s, starts={})


def _run(job: tuple[str, int, str]) -> tuple[tuple[str, int, str], pd.DataFrame, float, dict[str, pd.DataFrame]]:
    """One learning run -> its curve, seconds, and for PPO its critic's record per iteration and the probes of its
    batches (`learn`)."""
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
        n_tasks=env["cfg"].learning.n_tasks,
        group_size=env["cfg"].rollout.group_size,
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
    s: dict, env: dict, starts: list[str], seeds: int, methods: list[str], out: Path, workers: int
) -> pd.DataFrame:
    """Every (start, seed, method) curve, finished ones read back from OUT/runs/; with one worker in this process
    (on `env`), else in `workers` processes that each set up their own."""
    from tqdm.auto import tqdm

    runs = out / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    jobs = [(st, seed, m) for seed in range(seeds) for st in starts for m in methods]  # seed by seed
    todo = [j for j in jobs if not (runs / f"{j[0]}_{j[1]}_{j[2]}.csv").exists()]

    def save(done) -> None:
        for (st, seed, m), curve, sec, extras in tqdm(done, total=len(todo), desc="learning runs"):
            for kind, frame in extras.items():  # before the run's own file, which marks it done
                frame.to_csv(runs / f"{st}_{seed}_{m}.{kind}", index=False)
            curve.assign(seconds=sec).to_csv(runs / f"{st}_{seed}_{m}.csv.tmp", index=False)
            (runs / f"{st}_{seed}_{m}.csv.tmp").rename(runs / f"{st}_{seed}_{m}.csv")

    if workers <= 1:
        _init_worker(s, env)
        save(map(_run, todo))
    else:
        with mp.get_context("spawn").Pool(workers, _init_worker, (s,)) as pool:
            save(pool.imap_unordered(_run, todo))
    frames = [pd.read_csv(runs / f"{st}_{seed}_{m}.csv").assign(start=st, seed=seed, method=m) for st, seed, m in jobs]
    return pd.concat(frames, ignore_index=True)


def critic_records(out: Path, starts: list[str], seeds: int, kind: str) -> pd.DataFrame:
    """The PPO runs' `kind` records ("critic": per iteration; "probes": per probed batch and method), every start and
    seed, from OUT/runs/ (empty where no PPO run was made)."""
    frames = [
        pd.read_csv(path).assign(start=st, seed=seed)
        for st in starts
        for seed in range(seeds)
        if (path := out / "runs" / f"{st}_{seed}_ppo.{kind}").exists()
    ]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def fidelity_runs(s: dict, env: dict, batches: int, starts: list[str]) -> pd.DataFrame:
    """Per start (seed 0's policy): every estimator's cosines over `batches` batches."""
    from scpo.credit import available_methods
    from scpo.testbeds.tabular_learning import fidelity, room_gradient_cosines

    methods = [m for m in available_methods() if m not in NO_FIDELITY]
    frames = []
    for start in starts:
        model = start_model(env, s, start, 0)
        per_batch = fidelity(
            env["world"],
            model,
            methods,
            env["credit"],
            n_batches=batches,
            n_tasks=env["cfg"].learning.n_tasks,
            group_size=env["cfg"].rollout.group_size,
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


def comparisons(curves: pd.DataFrame, reference: str = "grpo") -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Per (start, method): AULC and final success (mean and 95% t-interval over seeds); per (start, method !=
    reference): the paired difference of AULC from the reference (paired t CI and p, exact sign-flip p, both
    Holm-adjusted within the start's family, MDE from the comparison's own sd), and each of EXTRA_COMPARISONS as a
    family of its own; per run: AULC and final success."""
    from scpo.analysis.learning_stats import aulc, holm, paired_difference, t_band

    per_run = (
        curves.groupby(["start", "method", "seed"])
        .apply(
            lambda c: pd.Series(
                {
                    "aulc": aulc(c["iteration"], c["success"]),
                    "final": float(c.sort_values("iteration")["success"].iloc[-1]),
                }
            ),
            include_groups=False,
        )
        .reset_index()
    )
    rows, diffs = [], []
    for (start, method), part in per_run.groupby(["start", "method"], sort=False):
        row = {"start": start, "method": method, "seeds": len(part)}
        for col in ("aulc", "final"):
            mean, lo, hi = t_band(part.sort_values("seed")[col].to_numpy()[:, None])
            row.update({col: float(mean[0]), f"{col}_lo": float(lo[0]), f"{col}_hi": float(hi[0])})
        rows.append(row)
    for start, part in per_run.groupby("start", sort=False):
        wide = part.pivot(index="seed", columns="method", values="aulc")
        family = []
        for method in [m for m in wide.columns if m != reference]:
            d = (wide[method] - wide[reference]).to_numpy()
            family.append({"start": start, "method": method, "reference": reference, **paired_difference(d)})
        for row, p, p_t in zip(family, holm([r["p_signflip"] for r in family]), holm([r["p_t"] for r in family])):
            row["p_signflip_holm"], row["p_t_holm"] = float(p), float(p_t)
        diffs.extend(family)
        for method, other in EXTRA_COMPARISONS:  # a family of one each
            if {method, other} <= set(wide.columns):
                d = paired_difference((wide[method] - wide[other]).to_numpy())
                diffs.append(
                    {"start": start, "method": method, "reference": other, **d}
                    | {"p_signflip_holm": d["p_signflip"], "p_t_holm": d["p_t"]}
                )
    return pd.DataFrame(rows), pd.DataFrame(diffs), per_run


def critic_summary(critic: pd.DataFrame, probes: pd.DataFrame, curves: pd.DataFrame, every: int) -> pd.DataFrame:
    """Per (start, iteration bin of `every` iterations): the PPO critic's value loss, explained variance on the
    batches whose returns vary, and its exact `value_fit` and `value_error` at the bin's first iteration; the probes
    of the batch at that iteration: each probed method's cos_panel and cos_tasks (a zero update counts 0), PPO's
    corr_exact, and the paired difference PPO - GRPO of cos_tasks. Mean and 95% t-interval over seeds, and the
    median (where the policy rarely wins, R V^pi barely varies and `value_fit` of a critic a little off is far below 0
    on some seeds); a last row per start ("all") averages each seed over the bins first."""
    from scpo.analysis.learning_stats import paired_difference, t_band

    c = critic.assign(bin=critic["iteration"] // every * every)
    c["ev"] = c["explained_variance"].where(c["returns_vary"])
    per_seed = c.groupby(["start", "seed", "bin"])[["value_loss", "ev"]].mean()
    ppo = curves[curves["method"] == "ppo"].set_index(["start", "seed", "iteration"])
    at = per_seed.index.set_names(["start", "seed", "iteration"])
    for col in ("value_fit", "value_error"):
        per_seed[col] = ppo[col].reindex(at).to_numpy()
    p = probes.copy()
    p.loc[p["norm"] == 0, ["cos_panel", "cos_tasks"]] = 0.0
    wide = p.pivot_table(index=["start", "seed", "iteration"], columns="method", values=["cos_panel", "cos_tasks"])
    wide.columns = [f"{col}_{m}" for col, m in wide.columns]
    corr = p[p["method"] == "ppo"].set_index(["start", "seed", "iteration"])["corr_exact"]
    wide["corr_exact_ppo"] = corr
    wide["d_tasks"] = wide["cos_tasks_ppo"] - wide["cos_tasks_grpo"]
    wide = wide.rename_axis(["start", "seed", "bin"])
    joined = per_seed.join(wide[wide.index.get_level_values("bin") % every == 0], how="left").reset_index()
    rows = []
    for start, part in joined.groupby("start", sort=False):
        overall = part.drop(columns=["start", "bin"]).groupby("seed").mean().reset_index().assign(bin="all")
        for b, q in [*part.groupby("bin"), ("all", overall)]:
            row = {"start": start, "iteration": b, "seeds": q["seed"].nunique()}
            for col in [x for x in q.columns if x not in ("start", "seed", "bin")]:
                x = q[col].dropna().to_numpy(float)
                row[f"{col}_n"], row[f"{col}_median"] = len(x), float(np.median(x)) if len(x) else np.nan
                if col == "d_tasks" and len(x) > 1:
                    d = paired_difference(x)
                    row.update({col: d["mean"], f"{col}_lo": d["lo"], f"{col}_hi": d["hi"], f"{col}_p": d["p_t"]})
                    continue
                mean, lo, hi = t_band(x[:, None]) if len(x) > 1 else ([np.nan], [np.nan], [np.nan])
                row.update({col: float(mean[0]), f"{col}_lo": float(lo[0]), f"{col}_hi": float(hi[0])})
            rows.append(row)
    return pd.DataFrame(rows)


def critic_markdown(summary: pd.DataFrame) -> str:
    def cell(r, col, fmt="+.3f"):
        return f"{r[col]:{fmt}} [{r[col + '_lo']:{fmt}}, {r[col + '_hi']:{fmt}}]" if np.isfinite(r[col]) else "n/a"

    lines = []
    for start, part in summary.groupby("start", sort=False):
        lines += [
            f"#### PPO's critic and its update as it learns: {start} start",
            "",
            "| iterations | value loss | explained var. (batches whose returns vary) | V vs R V^pi: explained var. "
            "(exact, on-policy) | rms error | "
            "corr(A_PPO, A^pi) | cos tasks PPO | GRPO | exact_advantage | PPO - GRPO [p] | cos panel PPO | GRPO | "
            "exact_advantage |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for _, r in part.iterrows():
            ev = f"{cell(r, 'ev')} (n {int(r['ev_n'])})" if np.isfinite(r["ev"]) else "n/a"
            diff = f"{cell(r, 'd_tasks')} [{r['d_tasks_p']:.2g}]" if np.isfinite(r.get("d_tasks_p", np.nan)) else ""
            lines.append(
                f"| {r['iteration']} | {cell(r, 'value_loss', '.3f')} | {ev} | {cell(r, 'value_fit')}, median "
                f"{r['value_fit_median']:+.2f} | {cell(r, 'value_error', '.2f')} | "
                f"{cell(r, 'corr_exact_ppo')} | {cell(r, 'cos_tasks_ppo')} | {cell(r, 'cos_tasks_grpo')} | "
                f"{cell(r, 'cos_tasks_exact_advantage')} | {diff} | {cell(r, 'cos_panel_ppo')} | "
                f"{cell(r, 'cos_panel_grpo')} | {cell(r, 'cos_panel_exact_advantage')} |"
            )
        lines.append("")
    return "\n".join(lines)


def critic_figure(summary: pd.DataFrame, path: Path) -> None:
    """Per start: the critic's fit (exact value_fit: the median over seeds; batch explained variance) and the cosines
    of PPO, GRPO and the exact advantage with the batch tasks' gradient, over iterations (mean and 95% t-band over
    seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    starts = summary["start"].unique()
    fig, axes = plt.subplots(2, len(starts), figsize=(6 * len(starts), 7), squeeze=False)
    for k, start in enumerate(starts):
        part = summary[(summary["start"] == start) & (summary["iteration"].astype(str) != "all")]
        x = part["iteration"].astype(int)
        panels = [
            (axes[0, k], [("value_fit", "V vs R V^pi (exact)"), ("ev", "explained var. (batches whose returns vary)")]),
            (axes[1, k], [(f"cos_tasks_{m}", m) for m in ("ppo", "grpo", "exact_advantage")]),
        ]
        for ax, series in panels:
            for col, label in series:
                if col == "value_fit":  # a few seeds' values are far below 0 where R V^pi barely varies: the median
                    ax.plot(x, part[f"{col}_median"], marker="o", ms=3, label=f"{label}, median over seeds")
                    continue
                ax.plot(x, part[col], marker="o", ms=3, label=label)
                ax.fill_between(x, part[f"{col}_lo"], part[f"{col}_hi"], alpha=0.15)
            ax.axhline(0, color="grey", lw=0.8)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        axes[0, k].set(title=f"{start} start: PPO's critic", ylabel="explained variance", ylim=(-1.5, 1))
        axes[1, k].set(xlabel="iteration", ylabel="cos(update, grad J of the batch's rooms)")
    fig.suptitle("Sokoban: PPO's critic and its update along its runs (mean, 95% t-band over seeds)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(table: pd.DataFrame, diffs: pd.DataFrame, fid: pd.DataFrame, corr: list[dict]) -> str:
    lines = []
    for start in table["start"].unique():
        t = table[table["start"] == start].sort_values("aulc", ascending=False)
        d = diffs[(diffs["start"] == start) & (diffs["reference"] == "grpo")].set_index("method")
        f = fid[fid["start"] == start].set_index("method")
        lines += [
            f"### {start}",
            "",
            "| estimator | cos panel | cos tasks | AULC | final success | AULC - GRPO's [95% paired t] | p_t | "
            "p sign-flip | p sign-flip Holm | MDE |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for _, r in t.iterrows():
            m = r["method"]
            cos = f"{f.loc[m, 'cos_panel_mean']:+.3f} | {f.loc[m, 'cos_tasks_mean']:+.3f}" if m in f.index else " | "
            diff = ""
            if m in d.index:
                x = d.loc[m]
                diff = (
                    f"{x['mean']:+.3f} [{x['lo']:+.3f}, {x['hi']:+.3f}] | {x['p_t']:.2g} | {x['p_signflip']:.2g} | "
                    f"{x['p_signflip_holm']:.2g} | {x['mde']:.3f}"
                )
            else:
                diff = " | | | | "
            lines.append(
                f"| {m} | {cos} | {r['aulc']:.3f} [{r['aulc_lo']:.3f}, {r['aulc_hi']:.3f}] | "
                f"{r['final']:.3f} [{r['final_lo']:.3f}, {r['final_hi']:.3f}] | {diff} |"
            )
        lines.append("")
        for _, x in diffs[(diffs["start"] == start) & (diffs["reference"] != "grpo")].iterrows():
            lines.append(
                f"AULC {x['method']} - {x['reference']}: {x['mean']:+.3f} [{x['lo']:+.3f}, {x['hi']:+.3f}] "
                f"(95% paired t), p_t {x['p_t']:.2g}, sign-flip p {x['p_signflip']:.2g}, MDE {x['mde']:.3f}."
            )
        for c in (c for c in corr if c["start"] == start):
            lines.append(
                f"Rank correlation over the {c['n_methods']} estimators between fidelity ({c['fidelity']}) and mean "
                f"AULC: Spearman rho {c['rho']:+.3f}, permutation p {c['p']:.3g} "
                f"({'exact' if c['exact'] else 'pairings drawn'}; floor {c['p_floor']:.2g})."
            )
        lines.append("")
    return "\n".join(lines)


def figure(curves: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scpo.analysis.learning_stats import t_band

    starts = curves["start"].unique()
    fig, axes = plt.subplots(1, len(starts), figsize=(6 * len(starts), 4.5), squeeze=False)
    axes = axes[0]
    for ax, start in zip(axes, starts):
        part = curves[curves["start"] == start]
        for method, c in part.groupby("method", sort=False):
            wide = c.pivot(index="seed", columns="iteration", values="success")
            mean, lo, hi = t_band(wide.to_numpy())
            ax.plot(wide.columns, mean, label=method)
            ax.fill_between(wide.columns, lo, hi, alpha=0.15)
        n = part["seed"].nunique()
        ax.set(title=f"{start} start ({n} seeds)", xlabel="iteration", ylabel="exact panel success (sampled, T=1)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Sokoban 6x6, 16 rooms with V* >= 4: mean and 95% t-band over seeds", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    from scpo.analysis.learning_stats import rank_correlation
    from scpo.errors import ExpectedError
    from scpo.testbeds.gradient_fidelity import summarize_cosines

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--methods", nargs="+", default=LEARNING_METHODS)
    ap.add_argument("--starts", nargs="+", choices=STARTS, default=list(STARTS))
    ap.add_argument("--cold-iterations", type=int, default=200)
    ap.add_argument("--warm-iterations", type=int, default=120)
    ap.add_argument("--cold-lr", type=float, default=3e-3)
    ap.add_argument("--warm-lr", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--fidelity-batches", type=int, default=64)
    ap.add_argument("--panel-size", type=int, default=16)
    ap.add_argument("--min-v-star", type=float, default=4)
    ap.add_argument("--demo-rooms", type=int, default=300)
    ap.add_argument("--imitation-epochs", type=int, default=110)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument(
        "--critic-lr-ratio",
        type=float,
        default=10.0,
        help="PPO critic's Adam lr / the policy's (verl-agent: 1e-5 / 1e-6)",
    )
    ap.add_argument("--critic-epochs", type=int, default=1, help="PPO critic's Adam steps per iteration (the policy's)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="2 seeds, 4 methods, 6 / 4 iterations, 2 fidelity batches")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.methods, args.cold_iterations, args.warm_iterations = (
            2,
            ["exact_advantage", "grpo", "shuffled", "ppo"],
            6,
            4,
        )
        args.eval_every, args.fidelity_batches, args.panel_size, args.demo_rooms, args.imitation_epochs = 2, 2, 4, 10, 5
        args.workers = 1
    if "grpo" not in args.methods:
        raise ExpectedError(f"--methods {' '.join(args.methods)}: the comparisons are made against grpo, include it")
    s = settings(args)
    args.out.mkdir(parents=True, exist_ok=True)
    check_settings(args.out, s)

    t0 = time.perf_counter()
    env = setup(s)
    fid_path = args.out / "fidelity_per_batch.csv"
    if fid_path.exists():
        per_batch = pd.read_csv(fid_path)
    else:
        per_batch = fidelity_runs(s, env, args.fidelity_batches, list(STARTS))
        per_batch.to_csv(fid_path, index=False)
    fid = pd.concat(
        [
            summarize_cosines(p.drop(columns="start")).assign(start=st, panel_success=p["success"].iloc[0])
            for st, p in per_batch.groupby("start", sort=False)
        ]
    )
    fid.to_csv(args.out / "fidelity_summary.csv", index=False)
    fidelity_script = _sibling_script("gradient_fidelity")  # its table and figure, for the same summary columns
    (args.out / "fidelity.md").write_text(fidelity_script.table(fid) + "\n")
    fidelity_script.figure(fid, args.out / "gradient_fidelity.png", "Sokoban 6x6 (1 box), the MLP policy")
    t_fid = time.perf_counter() - t0

    curves = learning_runs(s, env, args.starts, args.seeds, args.methods, args.out, args.workers)
    curves.to_csv(args.out / "curves.csv", index=False)
    table, diffs, per_run = comparisons(curves)
    table.to_csv(args.out / "learning.csv", index=False)
    diffs.to_csv(args.out / "differences.csv", index=False)
    per_run.to_csv(args.out / "aulc_per_seed.csv", index=False)
    corr = []
    for start in args.starts:
        runs = per_run[per_run["start"] == start]
        per_seed = {m: p.sort_values("seed")["aulc"].tolist() for m, p in runs.groupby("method")}
        for col in ("cos_panel", "cos_tasks"):
            cos = fid[fid["start"] == start].set_index("method")[f"{col}_mean"].to_dict()
            if len(set(cos) & set(per_seed)) >= 3:
                fixed = {m: cos[m] for m in per_seed if m in cos}
                corr.append({"start": start, "fidelity": col, **rank_correlation(fixed, per_seed)})
    pd.DataFrame(corr).to_csv(args.out / "rank_correlation.csv", index=False)
    success = per_batch.groupby("start")["success"].first().to_dict()
    room_cos = per_batch.groupby("start")[["room_cos_mean", "room_cos_median"]].first().to_dict("index")
    info = {
        "settings": s,
        "seeds": args.seeds,
        "methods": args.methods,
        "panel": env["panel"],
        "nodes": env["world"].graph.n_nodes,
        "states": int(env["world"].features.shape[0]),
        "demonstration_steps": len(env["demos"]),
        "fidelity_policy_success": success,
        "fidelity_policy_room_gradient_cosines": room_cos,
        "seconds": {"fidelity": round(t_fid, 1), "total": round(time.perf_counter() - t0, 1)},
        "run_seconds_mean": float(curves.groupby(["start", "seed", "method"])["seconds"].first().mean()),
        "cpu": _cpu(),
    }
    (args.out / "runs.json").write_text(json.dumps(info, indent=2) + "\n")
    text = markdown(table, diffs, fid, corr)
    critic = critic_records(args.out, args.starts, args.seeds, "critic")
    if len(critic):
        probes = critic_records(args.out, args.starts, args.seeds, "probes")
        critic.to_csv(args.out / "ppo_critic.csv", index=False)
        probes.to_csv(args.out / "ppo_probes.csv", index=False)
        summary = critic_summary(critic, probes, curves, every=2 * args.eval_every)
        summary.to_csv(args.out / "ppo_summary.csv", index=False)
        critic_figure(summary, args.out / "ppo_critic.png")
        text += "\n" + critic_markdown(summary)
    (args.out / "summary.md").write_text(text + "\n")
    figure(curves, args.out / "learning_curves.png")
    print(text)
    print(f"fidelity policies' exact success: {success}; {info['seconds']}")


def _sibling_script(name: str):
    """experiments/<name>/<name>.py as a module."""
    import importlib.util
    import sys

    if name not in sys.modules:  # registered before it runs: its dataclasses look their module up
        spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / name / f"{name}.py")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()

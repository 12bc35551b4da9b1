"""Does PPO's critic learn inside the trainer? `ppo` runs of `scpo train` (the cpu profile's tiny policy on the
corridor, params.yaml's `train.critic`), one per seed, and the critic's curve from their history.csv: per iteration the
value loss on the iteration's fresh batch before the critic trains on it (`critic/value_loss_before`), its explained
variance there (`critic/explained_variance`) and the batch's success, as mean and 95 % t-interval over seeds; then the
paired change (last iterations minus the first, paired t over seeds). experiments/critic/README.md, "In the trainer".

    python experiments/critic/trainer_curve.py --seeds 5 --iterations 20 --out experiments/critic/results/trainer
    python experiments/critic/trainer_curve.py --quick        # 2 seeds x 3 iterations of the smoke profile
    python experiments/critic/trainer_curve.py --set env.corridor.max_steps=6 ...   # any dotted override
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import pandas as pd
from scipy import stats
from tqdm.auto import tqdm

from scpo.config import load_config, parse_overrides
from scpo.train.run import run_training

COLUMNS = {
    "critic/value_loss_before": "value_loss",
    "critic/explained_variance": "explained_variance",
    "charts/success_rate": "success",
    "critic/value_mean": "value_mean",
}


def run_config(seed: int, args: argparse.Namespace):
    """(overrides, config) of seed `seed`'s PPO run on the corridor under `args` (--profile, --iterations, --set);
    record_batches.py replays the same runs."""
    overrides = {
        "env.name": "corridor",
        "credit.method": "ppo",
        "train.seed": seed,
        "train.iterations": args.iterations,
        **parse_overrides(args.set),
    }
    return overrides, load_config("params.yaml", profile=args.profile, overrides=overrides)


def one_seed(seed: int, args: argparse.Namespace, root: Path) -> pd.DataFrame:
    _, cfg = run_config(seed, args)
    run_training(cfg, stage="rl", out_dir=root / f"seed{seed}")
    hist = pd.read_csv(root / f"seed{seed}" / "history.csv")
    return hist[["iteration", *COLUMNS]].rename(columns=COLUMNS).assign(seed=seed)


def summarize(per_iter: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per iteration: mean over seeds and its t-interval, for every measured column."""
    rows = []
    for it, part in per_iter.groupby("iteration"):
        row = {"iteration": int(it), "seeds": len(part)}
        for col in COLUMNS.values():
            x = part[col].to_numpy(dtype=float)
            mean = float(x.mean())
            half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1) * stats.sem(x)) if len(x) > 1 else float("nan")
            row.update({col: mean, f"{col}_lo": mean - half, f"{col}_hi": mean + half})
        rows.append(row)
    return pd.DataFrame(rows)


def paired_change(per_iter: pd.DataFrame, last: int) -> dict:
    """Per seed, the mean over the last `last` iterations minus iteration 0; paired t over seeds, 95 % interval."""
    first = per_iter[per_iter["iteration"] == 0].set_index("seed")
    tail = per_iter[per_iter["iteration"] > per_iter["iteration"].max() - last].groupby("seed").mean()
    out = {}
    for col in ("value_loss", "explained_variance"):
        d = (tail[col] - first[col]).to_numpy()
        if len(d) < 2:
            continue
        lo, hi = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
        out[col] = {
            "diff": float(d.mean()),
            "ci": [float(lo), float(hi)],
            "p_paired_t": float(stats.ttest_1samp(d, 0).pvalue),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="2 seeds x 3 iterations of the smoke profile")
    ap.add_argument("--profile", default="cpu")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--last", type=int, default=3, help="iterations averaged at the end of the paired change")
    ap.add_argument(
        "--set", action="append", default=[], help="a dotted override (repeatable), e.g. train.critic.lr=1e-2"
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.quick:
        args.profile, args.seeds, args.iterations, args.last = "smoke", 2, 3, 1
    with tempfile.TemporaryDirectory() as tmp:
        per_iter = pd.concat(
            [one_seed(s, args, Path(tmp)) for s in tqdm(range(args.seeds), desc="ppo runs", unit="seed")],
            ignore_index=True,
        )
    summary = summarize(per_iter)
    change = paired_change(per_iter, args.last)
    shown = ["iteration", "seeds", *[c for col in ("value_loss", "explained_variance", "success")
                                     for c in (col, f"{col}_lo", f"{col}_hi")]]  # fmt: skip
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(summary[shown].round(3).to_string(index=False))
    print(json.dumps(change, indent=1))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        per_iter.to_csv(args.out / "per_iteration.csv", index=False)
        summary.to_csv(args.out / "summary.csv", index=False)
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        (args.out / "run.json").write_text(json.dumps({"settings": settings, "paired_change": change}, indent=1))


if __name__ == "__main__":
    main()

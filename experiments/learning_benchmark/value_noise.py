"""How noisy is `mc_advantage`'s credit with K = 2 continuations per state? On the first iteration's rollouts of the
`policy_advantage` runs (collected by the warm start, labelled with K = 2 values during training), the warm-start
policy plays K = 8 fresh continuations per state; their advantages (independent of both) stand in for the policy's
true advantage A^pi, and each credit of the same rows is compared with them: the K = 2 Monte-Carlo advantage and
GRPO's (outcome only). Both are in their own units, so the comparison is by rank (Spearman) and by sign.

    env $(python -m scpo.numerics env) python experiments/learning_benchmark/value_noise.py \
        --runs /work/lb_runs/alfworld --seeds 0 1 \
        --out experiments/learning_benchmark/results/policy_advantage/value_noise.md
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from scpo.batch import RolloutBatch
from scpo.config import Config
from scpo.credit import CreditConfig, compute_advantages


def seed_table(run: Path, rollouts: int, seed: int) -> dict:
    import torch

    from scpo.envs.registry import env_settings
    from scpo.rollout import make_engine
    from scpo.rollout.branches import policy_values
    from scpo.train.collect import play_settings
    from scpo.train.models import trained_policy

    torch.set_num_threads(1)
    cfg = Config(**json.loads((run / "provenance.json").read_text())["config"])
    batch = RolloutBatch.read(run / "rollouts" / "iter_0000.parquet")
    env = env_settings(cfg)
    policy = trained_policy(cfg, Path(cfg.train.init_from), "cpu")
    torch.manual_seed(10_000 + seed)
    values, timing = policy_values(
        batch, env.package, make_engine(cfg, policy), rollouts=rollouts, progress=False, **play_settings(cfg, env)
    )
    credit = CreditConfig.model_validate(cfg.credit.model_dump())
    truth = compute_advantages(
        "mc_advantage", batch.with_column("policy_value", values), credit, whiten=False
    ).advantages
    k2 = compute_advantages("mc_advantage", batch, credit, whiten=False).advantages
    grpo = compute_advantages("grpo", batch, credit).advantages
    informative = truth != 0
    row = {
        "seed": seed,
        "rows": batch.n_rows,
        "rows with A8 != 0": int(informative.sum()),
        "branch steps": timing.n_generations,
    }
    for name, a in (("mc_advantage K=2", k2), ("GRPO", grpo)):
        row[f"{name}: Spearman with A8"] = float(spearmanr(a, truth).statistic)
        row[f"{name}: sign agrees (A8 != 0)"] = float(np.mean(np.sign(a[informative]) == np.sign(truth[informative])))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, required=True, help="the benchmark's <out_dir>/alfworld folder")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--rollouts", type=int, default=8, help="K of the reference values")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    runs = [args.runs / "mc_advantage" / f"seed{s}" / "train" for s in args.seeds]
    with ProcessPoolExecutor(max_workers=2) as pool:
        rows = list(pool.map(seed_table, runs, [args.rollouts] * len(runs), args.seeds))
    table = pd.DataFrame(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = (
        f"## Credit against K = {args.rollouts} Monte-Carlo advantages (first iteration, warm-start policy)\n\n"
        + table.round(3).to_markdown(index=False)
        + "\n"
    )
    args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()

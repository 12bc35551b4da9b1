"""Credit-estimator timings on a synthetic batch: 16 groups x 8 trajectories x 50 steps (6,400 rows) with repeated
observations. Prints the median time per estimator and, for SCPO, the pairs scored and the cache hit rate per scorer
(first call = cold cache, second call = warm cache, as in consecutive training iterations over similar rollouts).

    .venv/bin/python benchmarks/credit_bench.py [--repeats 15] [--no-models] [--cross-encoder PATH] [--quick]

Every registered estimator runs with the columns its registry entry declares it needs (HCAPO's hindsight scores, the
oracle's progress, the Monte-Carlo advantage's policy values: random stand-ins of the right shape). GiGPO's similarity
option is timed per scorer (difflib, verl-agent's and the default, against rapidfuzz's lexical ratio) on the batch's
observations. `--quick`: 2 groups x 4 trajectories x 10 steps, one repeat, no model scorers (what the test suite runs).

Measured with `--no-models` (median wall time per call, 2-core machine): grpo 0.42 ms, gigpo 1.65, scpo (lexical) 8.3,
progpo_c 4.3, progpo_r 10.5, g2po 1.6, hgpo 2.3, hcapo 0.65. Model scorers: a cold bi-encoder / cross-encoder pass over
the 4,335 SCPO pairs costs about 20 s on the CPU; the next call hits the cache.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from scpo.batch import RolloutBatch
from scpo.credit import available_methods, compute_advantages
from scpo.credit.registry import method_spec
from scpo.credit.synthetic import synthetic_batch
from scpo.scorers import make_scorer
from scpo.scorers.tiny import build_tiny_cross_encoder


def timed(fn, repeats: int) -> tuple[float, float, float]:
    """(min wall, median wall, median CPU) in ms over `repeats` calls after one warm-up call. On a shared machine the
    minimum and the CPU time are the stable figures; the median wall time includes waiting for a core."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return min(wall), statistics.median(wall), statistics.median(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--no-models", action="store_true", help="skip the bi-encoder / cross-encoder SCPO rows")
    ap.add_argument(
        "--cross-encoder",
        default=None,
        help="local CrossEncoder folder for the SCPO cross-encoder row (default: a tiny random-init one, "
        "built in a temp folder: it measures batching and caching, not a real model's speed)",
    )
    ap.add_argument("--quick", action="store_true", help="smallest sizes, one repeat, no model scorers (seconds)")
    args = ap.parse_args()
    groups, size, steps = (2, 4, 10) if args.quick else (16, 8, 50)
    repeats = 1 if args.quick else args.repeats

    batch = synthetic_batch(n_groups=groups, group_size=size, max_steps=steps, n_states=30, fixed_length=True, seed=0)
    won_groups = np.bincount(batch.group_id, weights=batch.won.astype(float))
    print(
        f"batch: {batch.n_rows} rows, {batch.n_groups} groups x {size} trajectories x {steps} steps, "
        f"{len(np.unique(batch.observation))} distinct observations, success rate {batch.won.mean():.2f}, "
        f"all-failed groups {np.mean(won_groups == 0):.2f}"
    )
    rng = np.random.default_rng(0)
    lp = -rng.random(batch.n_rows)  # what a method declaring `policy_scores` (HCAPO) gets from the policy
    cols = batch.columns()
    cols["oracle_progress"] = rng.choice([1.0, 0.0, -1.0], size=batch.n_rows)  # what an `oracle` method reads
    cols["policy_value"] = rng.random(batch.n_rows)  # what a `policy_values` method (mc_advantage) reads
    cols["exact_value"] = rng.random(batch.n_rows)  # what an `exact_values` method (exact_advantage) reads
    cols["critic_value"] = 10 * rng.random(batch.n_rows)  # what a `critic` method (ppo) reads: a learned critic's V
    batch = RolloutBatch(**cols)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(
        f"\n{'estimator':<28}{'min ms':>8}{'median ms':>11}{'CPU ms':>8}   (limit 20 ms; judged on the process CPU "
        "time, which waiting for a busy core does not inflate)"
    )
    for method in available_methods():
        extra = {"hindsight_logprob": lp} if method_spec(method).policy_scores else {}
        if method_spec(method).critic:  # the synthetic batch has no answer tokens to weight the whitening by
            extra["whiten"] = "steps"
        best, med, cpu = timed(lambda method=method, extra=extra: compute_advantages(method, batch, **extra), repeats)
        label = method + (" (lexical scorer)" if method in ("scpo", "progpo_r") else "")
        print(f"{label:<28}{best:>8.2f}{med:>11.2f}{cpu:>8.2f}   {'ok' if cpu < 20 else 'OVER'}")

    print("\nGiGPO's similarity option (similarity_thresh 0.95), per scorer, the scorer's pair cache cleared each call")
    print(f"{'scorer':<28}{'min ms':>8}{'median ms':>11}{'CPU ms':>8}{'anchor groups':>15}")
    cpu_of = {}
    for name in ("difflib", "lexical"):
        scorer = make_scorer(name)

        def call(scorer=scorer):
            scorer.clear_cache()
            return compute_advantages("gigpo", batch, scorer=scorer, enable_similarity=True)

        best, med, cpu_of[name] = timed(call, repeats)
        n_anchors = round(float(np.sum(1.0 / call().diagnostics["anchor_group_size"])))  # each group's rows sum to 1
        print(f"{name:<28}{best:>8.2f}{med:>11.2f}{cpu_of[name]:>8.2f}{n_anchors:>15d}")
    print(f"difflib / lexical CPU time: {cpu_of['difflib'] / cpu_of['lexical']:.1f}x")

    scorers = [("lexical", None)]
    if not (args.no_models or args.quick):
        scorers.append(("bi_encoder", None))
        ce = args.cross_encoder
        if ce is None:
            ce = build_tiny_cross_encoder(
                Path(tempfile.mkdtemp()) / "tiny-ce", batch.action.tolist() + batch.next_observation.tolist()
            )
        scorers.append(("cross_encoder", str(ce)))
    print(
        "\nSCPO per scorer (lexical and bi-encoder score_matrix compute every pair directly, from rapidfuzz / cached"
        " embeddings; the cross-encoder goes through the pair cache)"
    )
    print(
        f"{'scorer':<16}{'call':<7}{'ms':>10}{'pairs requested':>17}{'pairs scored':>14}{'hit rate':>10}"
        f"{'texts encoded':>15}{'text hits':>11}"
    )
    for name, model in scorers:
        scorer = make_scorer(name, model=model)
        for call in ("cold", "warm"):
            scorer.reset_stats()
            t0 = time.perf_counter()
            compute_advantages("scpo", batch, scorer=scorer)
            ms = (time.perf_counter() - t0) * 1e3
            s = scorer.stats
            print(
                f"{name:<16}{call:<7}{ms:>10.1f}{s['pairs_requested']:>17.0f}{s['pairs_scored']:>14.0f}"
                f"{s['cache_hit_rate']:>10.2f}{s.get('texts_encoded', float('nan')):>15.0f}"
                f"{s.get('text_cache_hits', float('nan')):>11.0f}"
            )


if __name__ == "__main__":
    main()

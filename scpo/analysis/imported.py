"""Analyses of an imported run (`scpo import`, docs/import.md) that use what only such a run has: the advantages its
trainer updated each step with, beside every estimator recomputed on the same rollouts.

    per_iteration = inconsistency_of_run("runs/imported/alfworld", cfg)   # one row per iteration x estimator x ...
    table = run_inconsistency_table(per_iteration)                       # pooled over the iterations

The explorer (`explore(folder)`) and `scpo credit-map` read an imported run as a run of ours and draw the
trained-with panel themselves; `scpo.credit.estimate(batch, methods, cfg)` takes its batches as they are.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from scpo.analysis.credit_maps import TRAINED_WITH, trained_with
from scpo.analysis.inconsistency import COUNT_COLUMNS, inconsistency_counts, rates, semantic_pairs
from scpo.analysis.inconsistency_tables import control_target
from scpo.analysis.rollout_files import iteration_files, iteration_of
from scpo.batch import RolloutBatch
from scpo.config import Config

__all__ = ["inconsistency_of_batch_and_trained", "inconsistency_of_run", "run_inconsistency_table"]


def inconsistency_of_batch_and_trained(batch: RolloutBatch, cfg: Config, semantic_scorer=None) -> pd.DataFrame:
    """Inconsistency counts (`scpo.analysis.inconsistency.inconsistency_counts`) of every rollout-only estimator of
    report.methods recomputed on `batch`, and of the advantages it was trained with (estimator "trained with") when
    the batch carries them."""
    from scpo.credit import estimate

    results = estimate(batch, cfg.report.methods, cfg, unmet="skip")
    trained = trained_with(batch)
    advantages = {
        **({TRAINED_WITH: trained} if trained is not None else {}),
        **{m: r.advantages for m, r in results.items()},
    }
    semantic = (
        semantic_pairs(batch, semantic_scorer, cfg.report.similarity_thresh) if semantic_scorer is not None else None
    )
    target, _ = control_target(batch, cfg.credit.gigpo.gamma)
    return inconsistency_counts(advantages, batch, target=target, semantic=semantic)


def inconsistency_of_run(
    run: str | Path, cfg: Config, *, every_k: int = 1, semantic_scorer=None, progress: bool = True
) -> pd.DataFrame:
    """One row per (iteration, estimator, pair_set, kind) with the counts, for every `every_k`-th saved iteration of
    the run folder `run` (its rollouts/iter_XXXX.parquet), one file in memory at a time."""
    if every_k < 1:
        raise ValueError(f"every_k = {every_k} must be >= 1")
    files = iteration_files(run)[::every_k]
    frames = []
    for f in tqdm(files, desc=f"inconsistency of {Path(run).name}", unit="iteration", disable=not progress):
        counts = inconsistency_of_batch_and_trained(RolloutBatch.read(f), cfg, semantic_scorer)
        frames.append(counts.assign(iteration=iteration_of(f)))
    return pd.concat(frames, ignore_index=True)[["iteration", *frames[0].columns.drop("iteration")]]


def run_inconsistency_table(per_iteration: pd.DataFrame) -> pd.DataFrame:
    """Counts pooled over the iterations per (estimator, pair_set, kind), with their rates (`rates`): the trained-with
    advantages beside each recomputed estimator."""
    counts = [c for c in (*COUNT_COLUMNS, "n_control", "n_ordered") if c in per_iteration]
    pooled = per_iteration.groupby(["estimator", "pair_set", "kind"], sort=False, as_index=False)[counts].sum(
        min_count=1
    )
    return rates(pooled)

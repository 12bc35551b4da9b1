"""The credit testbeds: runs that play environments and load policies to measure estimators against ground truth.

- `fidelity`: noisy-optimal and trained rollouts labelled with the planner's oracle progress q_t, every estimator's
  credit on them; `fidelity_tables`: its tables and figures (notebook 07, `scpo fidelity`). The metrics themselves are
  pure functions in `scpo.analysis.fidelity_metrics`.
This layer sits above `train` and `analysis`.
"""

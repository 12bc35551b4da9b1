"""The credit-fidelity benchmark (notebook 07, `scpo fidelity`): noisy-optimal and trained rollouts labelled with the
planner's oracle progress q_t, every estimator's credit on them (`run`), HCAPO's hindsight scores replayed on saved
rollouts (`hindsight_replay`), and the tables and figures (`report`). The metrics themselves are pure functions in
`scpo.analysis.fidelity`. This layer sits above `train` and `analysis`: it plays environments and loads policies."""

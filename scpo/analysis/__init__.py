"""Analyses of credit on saved rollouts: credit maps (`credit_maps`), the interactive explorer (`explorer`,
`explorer_data`, `explorer_figure`), the semantic-inconsistency metric (`inconsistency`, its tables in
`inconsistency_tables`), the credit-fidelity metrics (`fidelity_metrics`) and reading saved rollouts (`rollout_files`).
Estimators run through `scpo.credit.estimate`. Pure numpy/pandas; figures via matplotlib/seaborn and plotly."""

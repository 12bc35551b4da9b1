"""Analyses of credit on saved rollouts: credit maps (`credit_maps`), the interactive explorer (`explorer`,
`explorer_data`, `explorer_figure`), the semantic-inconsistency metric (`inconsistency`, its tables in
`inconsistency_tables`), the credit-fidelity metrics (`fidelity_metrics`), reading saved rollouts (`rollout_files`)
and what only an imported run has, the advantages it was trained with (`imported`). Estimators run through
`scpo.credit.estimate`. Pure numpy/pandas; figures via matplotlib/seaborn and plotly."""

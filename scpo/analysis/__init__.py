"""Analyses of credit on saved rollouts: credit maps (`credit_maps`), the semantic-inconsistency metric
(`inconsistency`), and the bridge that runs every estimator on one batch (`estimators`). Pure numpy/pandas; figures via
matplotlib/seaborn."""

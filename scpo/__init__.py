"""scpo: credit assignment for group-based RL post-training of LLM agents: SCPO and the estimators it is compared with,
side by side (`scpo.credit.available_methods()`, `scpo methods`)."""

__version__ = "0.1.0"

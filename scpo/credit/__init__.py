"""Credit assignment for group-based RL on multi-turn agents: pure numpy estimators over one `RolloutBatch`.

    from scpo.credit import compute_advantages, CreditResult, available_methods
    res = compute_advantages("scpo", batch, cfg.credit, tau=0.8)

Methods: grpo, gigpo, scpo, progpo_c, progpo_r, g2po, hgpo, hcapo, oracle, graphgpo, rloo (formulas: each module's
docstring). Defaults live in `scpo.credit.options` only.
"""

from scpo.credit.options import CreditConfig
from scpo.credit.registry import available_methods, compute_advantages, resolve_config
from scpo.credit.result import CreditResult

__all__ = ["compute_advantages", "CreditResult", "available_methods", "resolve_config", "CreditConfig"]

"""Credit assignment for group-based RL on multi-turn agents: pure numpy estimators over one `RolloutBatch`.

    from scpo.credit import estimate, compute_advantages, available_methods
    results = estimate(batch, ["gigpo", "scpo"], cfg.credit)          # {method: CreditResult}
    res = compute_advantages("scpo", batch, cfg.credit, tau=0.8)

The methods are the registry's (`available_methods()`, `scpo methods`): each module of this package defines one with
its options model and `@credit_method` (`scpo.credit.spec`); its docstring is its formula and points to its section of
docs/algorithms.md. The options every method shares: `scpo.credit.options`.
"""

from scpo.credit.dispatch import compute_advantages, estimate, resolve_config, unmet_need
from scpo.credit.registry import CreditConfig, MethodSpec, available_methods, method_spec
from scpo.credit.result import CreditResult

__all__ = [
    "estimate",
    "compute_advantages",
    "unmet_need",
    "CreditResult",
    "CreditConfig",
    "MethodSpec",
    "available_methods",
    "method_spec",
    "resolve_config",
]

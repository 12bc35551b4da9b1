"""What a credit method declares where it is defined: `MethodSpec`, made by the `credit_method` decorator on its
function, beside its options model.

    class GRPOOptions(StrictModel): ...

    @credit_method("grpo", GRPOOptions)
    def compute_grpo(batch, cfg, **_): ...

A spec names the method's option section (`credit.<name>`, its options model) and the sections it builds on
(`reads`; `norm` is read by every method), and what it needs besides the batch, so callers ask the spec, never the
name:
- `scorer`: the frozen scorer it needs under a config, `(name, model)` or None;
- `policy_scores`: per-row scores of the policy, passed as `hindsight_logprob` (HCAPO's hindsight log-probs,
  `scpo.policy.hindsight`);
- `columns`: batch columns beyond the rollouts (`COLUMNS`: the planner's oracle progress, the policy's Monte-Carlo
  state values, its exact success values, a learned critic's values), which the trainer adds before credit
  (`scpo.train.trainer`) and analyses of saved rollouts may lack;
- `state_description`: it reads the environment's state_description columns when the batch has them (GraphGPO's
  graph nodes; without them it uses the raw observations);
- `bound`: it is a bound or a reference of the benchmarks rather than an estimator compared with the others (the
  oracle's ground-truth credit, shuffled credit, the policy's own advantage from Monte-Carlo or exact values), in a
  few words.

`scpo.credit.registry` imports every module of this package, so each method registers itself on import; the
registry's table, the config's `credit:` section and every list of methods are made from the specs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from scpo.strict_model import StrictModel

__all__ = ["MethodSpec", "credit_method", "registered", "COLUMNS", "POLICY_COLUMNS"]

# batch columns a method may read beyond the rollouts -> what the column holds (an unmet need names it)
COLUMNS = {
    "oracle_progress": "the planner's oracle progress per step (the batch's oracle_progress column)",
    "policy_value": "the policy's Monte-Carlo state values per step (the batch's policy_value column, played in "
    "training)",
    "exact_value": "the policy's exact success values per step (the batch's exact_value column: "
    "scpo.rollout.exact_values)",
    "critic_value": "the critic's values V(s_t) per step (the batch's critic_value column: the trainer's learned "
    "critic, scpo.train.critic, fills it before credit)",
}
# the columns computed with the policy or a model trained beside it (only a caller that has it can add them: the
# trainer, the gradient testbed)
POLICY_COLUMNS = ("policy_value", "exact_value", "critic_value")


def _no_scorer(cfg: Any) -> None:
    return None


@dataclass(frozen=True)
class MethodSpec:
    """One registered credit method (module docstring)."""

    name: str
    fn: Callable[..., Any]
    options: type[StrictModel]
    sections: tuple[str, ...]  # option sections it reads: its own, the ones it builds on, then norm
    scorer: Callable[[Any], tuple[str, str | None] | None] = field(default=_no_scorer)
    policy_scores: bool = False
    columns: tuple[str, ...] = ()
    state_description: bool = False
    bound: str | None = None

    @property
    def oracle(self) -> bool:
        """Whether it reads the planner's oracle progress."""
        return "oracle_progress" in self.columns

    @property
    def policy_values(self) -> bool:
        """Whether it reads the policy's Monte-Carlo state values (only training can play them)."""
        return "policy_value" in self.columns

    @property
    def exact_values(self) -> bool:
        """Whether it reads the policy's exact success values (environments whose states can be enumerated)."""
        return "exact_value" in self.columns

    @property
    def critic(self) -> bool:
        """Whether it reads a learned critic's values (the trainer trains one beside the policy: PPO)."""
        return "critic_value" in self.columns

    @property
    def needs_policy(self) -> bool:
        """Whether it reads anything computed with the policy (its scores or values), which saved rollouts lack."""
        return self.policy_scores or any(c in POLICY_COLUMNS for c in self.columns)

    @property
    def rollouts_suffice(self) -> bool:
        """Whether saved rollouts (and a scorer) are all it needs, so analyses can run it on them."""
        return not (self.policy_scores or self.columns)

    @property
    def summary(self) -> str:
        """The first line of its module's docstring."""
        doc = sys.modules[self.fn.__module__].__doc__ or ""
        return doc.strip().splitlines()[0] if doc.strip() else self.name


_REGISTERED: dict[str, MethodSpec] = {}


def credit_method(
    name: str,
    options: type[StrictModel],
    *,
    reads: tuple[str, ...] = (),
    scorer: Callable[[Any], tuple[str, str | None] | None] | None = None,
    policy_scores: bool = False,
    columns: tuple[str, ...] = (),
    state_description: bool = False,
    bound: str | None = None,
):
    """Register the decorated function as credit method `name` with its options model (module docstring)."""
    unknown = sorted(set(columns) - set(COLUMNS))
    if unknown:
        raise ValueError(f"credit method {name!r}: unknown columns {unknown}; known: {', '.join(COLUMNS)}")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        spec = MethodSpec(
            name,
            fn,
            options,
            (name, *reads, "norm"),
            scorer or _no_scorer,
            policy_scores,
            tuple(columns),
            state_description,
            bound,
        )
        old = _REGISTERED.get(name)
        if old is not None and (old.fn.__module__, old.fn.__qualname__) != (fn.__module__, fn.__qualname__):
            raise ValueError(f"credit method {name!r} is registered twice: {old.fn.__module__} and {fn.__module__}")
        _REGISTERED[name] = spec
        return fn

    return register


def registered() -> dict[str, MethodSpec]:
    """Every method registered so far, by name (the registry imports them all first)."""
    return dict(_REGISTERED)

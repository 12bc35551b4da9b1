"""The credit options every method shares: `NormOptions` (`credit.norm`) and `CreditOptions`, the base of the
`credit:` section (`method`, `success_reward`, `norm`). Each method's own options model lives beside its function
(`scpo.credit.spec.credit_method`); `scpo.credit.registry` builds `CreditConfig`, this base with one section per
registered method, which params.yaml's `credit:` section validates into. Defaults and their sources:
docs/algorithms.md (verl-agent / the papers' code unless marked [ours]).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from scpo.strict_model import StrictModel

__all__ = ["StrictModel", "NormOptions", "CreditOptions", "Scale", "ScorerName"]

Scale = Literal["std", "none"]
ScorerName = Literal["difflib", "lexical", "bi_encoder", "cross_encoder"]


class NormOptions(StrictModel):
    """norm(x, S) and the invalid-action penalty (docs/algorithms.md, "Notation")."""

    scale: Scale = Field(
        "std",
        description="norm(x,S) = (x-mean)/(std+eps) for 'std', x-mean for 'none'; the scale of "
        "environments not listed in scale_by_env",
    )
    scale_by_env: dict[str, Scale] = Field(
        default_factory=lambda: {"alfworld": "std", "webshop": "none"},
        description="the scale per environment, as verl-agent's reference scripts set it (GiGPO: 'std' on ALFWorld, "
        "'none' on WebShop); `CreditOptions.for_env(name)` applies it",
    )
    epsilon: float = Field(1e-6, gt=0, description="eps in the std normalisation")
    lambda_invalid: float = Field(
        0.1, ge=0, description="penalty subtracted from an invalid step's score, after discounting"
    )

    def for_env(self, env: str | None) -> NormOptions:
        """These options with `scale` from `scale_by_env[env]` (an unlisted environment keeps `scale`)."""
        scale = self.scale_by_env.get(env, self.scale) if env else self.scale
        return self if scale == self.scale else self.model_copy(update={"scale": scale})


class CreditOptions(StrictModel):
    """The `credit:` fields every method shares; `scpo.credit.registry.CreditConfig` adds each method's section."""

    method: str = Field("gigpo", description="a credit method of the registry (scpo.credit.registry.METHODS)")
    success_reward: float = Field(10.0, gt=0, description="R_success: the reward of a won episode")
    norm: NormOptions = NormOptions()

    def for_env(self, env: str | None) -> CreditOptions:
        """This config with each section's per-environment settings for `env` (a section's own `for_env`:
        `norm.scale` from `norm.scale_by_env`, GraphGPO's gamma from its `gamma_by_env`)."""
        update = {}
        for name in type(self).model_fields:
            section = getattr(self, name)
            resolved = section.for_env(env) if hasattr(section, "for_env") else section
            if resolved is not section:
                update[name] = resolved
        return self.model_copy(update=update) if update else self

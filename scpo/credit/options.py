"""Every credit-assignment option, with its one default (source: ../shared/algorithms.md; verl-agent / the papers' code
unless marked [ours]). The estimators take these models; params.yaml's `credit:` section validates into `CreditConfig`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "StrictModel", "NormOptions", "GRPOOptions", "GiGPOOptions", "SCPOOptions", "ProGPOCOptions", "ProGPOROptions",
    "G2POOptions", "HGPOOptions", "HCAPOOptions", "OracleOptions", "CreditConfig",
]

Scale = Literal["std", "none"]
ScorerName = Literal["lexical", "bi_encoder", "cross_encoder"]


class StrictModel(BaseModel):
    """Base for every config model: unknown keys are errors, assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=False)


class NormOptions(StrictModel):
    scale: Scale = Field("std", description="norm(x,S) = (x-mean)/(std+eps) for 'std', x-mean for 'none'")
    epsilon: float = Field(1e-6, gt=0, description="eps in the std normalisation")
    lambda_invalid: float = Field(0.1, ge=0, description="penalty subtracted from an invalid step's score, after discounting")


class GRPOOptions(StrictModel):
    stats_over: Literal["steps", "trajectories"] = Field(
        "steps", description="episode statistics over all step rows of the group (reference) or one value per trajectory")


class GiGPOOptions(StrictModel):
    gamma: float = Field(0.95, gt=0, le=1, description="discount of the step return G_t (GiGPO Eq. 5); the one "
                         "discount of every method (G2PO, HGPO, ProGPO, HCAPO read it here)")
    step_advantage_w: float = Field(1.0, ge=0, description="omega in A = A^E + omega A^S (GiGPO Eq. 8)")
    enable_similarity: bool = Field(False, description="merge anchor observations whose similarity >= similarity_thresh")
    similarity_thresh: float = Field(0.95, gt=0, le=1)
    similarity_scorer: ScorerName = "lexical"


class SCPOOptions(StrictModel):
    """[ours] SCPO's shaping in front of GiGPO (algorithms.md, SCPO steps 1-5)."""

    reference: Literal["shortest", "random", "all"] = "shortest"
    step_text: Literal["action_next_obs", "action", "obs_action"] = "action_next_obs"
    scorer: ScorerName = "lexical"
    scorer_model: str | None = Field(None, description="local path or Hub name for model scorers (None: the default)")
    tau: float = Field(0.7, ge=0, le=1, description="minimum match score that counts as progress")
    kappa: float = Field(0.5, ge=0, lt=1, description="total bonus of a failed trajectory <= kappa * R_success")
    shape_episode: bool = Field(False, description="also shape the episode advantage's returns")
    seed: int = Field(0, description="seed for reference='random'")


class ProGPOCOptions(StrictModel):
    """[ours] first-visit coverage in all-failed groups."""

    kappa_c: float = Field(0.5, ge=0)
    coverage_scope: Literal["group", "trajectory"] = "group"


class ProGPOROptions(StrictModel):
    """[ours] exact-prefix groups + fused multi-depth state potentials."""

    depths: tuple[int, ...] = Field((1, 2, 4), min_length=1, description="history depths d of the potentials Phi_d")
    min_members: int = Field(2, ge=1, description="m: keys with fewer members pool similar keys (semantic expansion)")
    similarity_thresh: float = Field(0.9, gt=0, le=1)
    similarity_scorer: Literal["lexical", "bi_encoder", "cross_encoder", "none"] = Field(
        "lexical", description="scorer of the semantic expansion ('none': exact keys only)")
    prior_variance: float = Field(25.0, gt=0, description="variance given to single-member keys")
    variance_floor: float = Field(1e-6, gt=0, description="lower bound of var_d(s) (keys whose returns all agree)")
    omega_p: float = Field(1.0, ge=0)
    omega_d: float = Field(1.0, ge=0)
    success_value: float = Field(10.0, description="terminal Phi on success (0 on failure)")

    @field_validator("depths")
    @classmethod
    def _positive_depths(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if any(d < 1 for d in v):
            raise ValueError(f"every depth must be >= 1, got {list(v)}")
        return v


class G2POOptions(StrictModel):
    w: float = Field(1.0, ge=0, description="A = A^E + w (A^NC + A^EC)")
    success_value: float = 10.0


class HGPOOptions(StrictModel):
    history_length: int = Field(2, ge=0, description="K: context keys for k = 1..K+1")
    alpha: float = Field(1.0, description="w_k proportional to (k+1)^alpha")


class HCAPOOptions(StrictModel):
    """HCAPO; `temperature` is read by the trainer's hindsight re-scoring, the rest by the pure formula."""

    temperature: float = Field(5.0, gt=0)
    clip_low: float = Field(0.8, gt=0)
    clip_high: float = Field(1.2, gt=0)
    omega: float = Field(1.0, ge=0)


class OracleOptions(StrictModel):
    """[ours] credit from the planner's oracle progress q_t (ALFWorld): A = episode_weight A^E + omega (q_t - pen_t)."""

    omega: float = Field(1.0, gt=0, description="weight of the oracle progress q_t")
    episode_weight: float = Field(0.0, ge=0, description="w_E: weight of GRPO's episode advantage (0: progress only)")
    dead_end: float = Field(10.0, gt=0, description="a step into a state the goal cannot be reached from (q = -inf) "
                            "gets q = -dead_end")


class CreditConfig(StrictModel):
    method: Literal["grpo", "gigpo", "scpo", "progpo_c", "progpo_r", "g2po", "hgpo", "hcapo", "oracle"] = "gigpo"
    success_reward: float = Field(10.0, gt=0, description="R_success: the reward of a won episode")
    norm: NormOptions = NormOptions()
    grpo: GRPOOptions = GRPOOptions()
    gigpo: GiGPOOptions = GiGPOOptions()
    scpo: SCPOOptions = SCPOOptions()
    progpo_c: ProGPOCOptions = ProGPOCOptions()
    progpo_r: ProGPOROptions = ProGPOROptions()
    g2po: G2POOptions = G2POOptions()
    hgpo: HGPOOptions = HGPOOptions()
    hcapo: HCAPOOptions = HCAPOOptions()
    oracle: OracleOptions = OracleOptions()

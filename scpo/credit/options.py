"""Every credit-assignment option, with its one default (source: docs/algorithms.md; verl-agent / the papers' code
unless marked [ours]). The estimators take these models; params.yaml's `credit:` section validates into `CreditConfig`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from scpo.strict_model import StrictModel

__all__ = [
    "StrictModel",
    "NormOptions",
    "GRPOOptions",
    "GiGPOOptions",
    "SCPOOptions",
    "ProGPOCOptions",
    "ProGPOROptions",
    "G2POOptions",
    "HGPOOptions",
    "GraphGPOOptions",
    "RLOOOptions",
    "HCAPOOptions",
    "OracleOptions",
    "ShuffledOptions",
    "ExactAdvantageOptions",
    "CreditConfig",
]

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
        "'none' on WebShop); `CreditConfig.for_env(name)` applies it",
    )
    epsilon: float = Field(1e-6, gt=0, description="eps in the std normalisation")
    lambda_invalid: float = Field(
        0.1, ge=0, description="penalty subtracted from an invalid step's score, after discounting"
    )


class GRPOOptions(StrictModel):
    stats_over: Literal["steps", "trajectories"] = Field(
        "steps",
        description="episode statistics over all step rows of the group (reference) or one value per trajectory",
    )


class GiGPOOptions(StrictModel):
    gamma: float = Field(
        0.95,
        gt=0,
        le=1,
        description="discount of the step return G_t (GiGPO Eq. 5); the one "
        "discount of every method (G2PO, HGPO, ProGPO, HCAPO read it here)",
    )
    step_advantage_w: float = Field(1.0, ge=0, description="omega in A = A^E + omega A^S (GiGPO Eq. 8)")
    enable_similarity: bool = Field(
        False, description="merge anchor observations whose similarity >= similarity_thresh"
    )
    similarity_thresh: float = Field(0.95, gt=0, le=1)
    similarity_scorer: ScorerName = Field(
        "difflib",
        description="scorer of the similarity option: difflib (SequenceMatcher(None, a, b).ratio(), verl-agent's "
        "are_similar), lexical (rapidfuzz's Indel ratio, no autojunk) or a model scorer; read by every method built "
        "on GiGPO's anchors (gigpo, scpo, progpo_c)",
    )


SCPO_REVISION_OF_MODE = {"advantage": 2, "returns": 1}


class SCPOOptions(StrictModel):
    """[ours] SCPO revision 2 (docs/algorithms.md, "SCPO"): credit in advantage space for failed steps that make new,
    monotone progress along a successful sibling."""

    mode: Literal["advantage", "returns"] = Field(
        "advantage",
        description="advantage: A' = A + kappa s_t (A^E_ref - A^E_i) on credited failed steps (revision 2); "
        "returns: revision 1's bonus in GiGPO's step returns (an ablation: it cannot make credit consistent)",
    )
    match: Literal["argmax", "first"] = Field(
        "argmax",
        description="candidate j* after the frontier f: the best-scoring j > f, or the first j > f scoring >= tau",
    )
    reference: Literal["shortest", "random", "all"] = Field(
        "shortest",
        description="the successful sibling matched against: the shortest (ties by content), one drawn by "
        "content-seeded rng, or per failure the one giving it most credit",
    )
    step_text: Literal["action_next_obs", "action", "obs_action"] = "action_next_obs"
    scorer: ScorerName = Field(
        "lexical",
        description="frozen scorer of S[t, j] (cross_encoder is the method's intent; "
        "bi_encoder and lexical are fallbacks, named in every output)",
    )
    scorer_model: str | None = Field(None, description="local path or Hub name for model scorers (None: the default)")
    tau: float = Field(
        0.9,
        ge=0,
        le=1,
        description="minimum match score that credits a step (0.9: chosen on credit "
        "fidelity, notebook 07's SCPO options sweep; 0.7 before)",
    )
    kappa: float = Field(
        1.0,
        ge=0,
        le=1,
        description="mode advantage: share of the episode-credit gap moved to a "
        "credited step (1: fully like the reference's step at s_t = 1)",
    )
    kappa_r: float = Field(
        0.5, ge=0, lt=1, description="mode returns: total bonus of a failed trajectory <= kappa_r R_success"
    )
    shape_episode: bool = Field(False, description="mode returns: also shape the episode advantage's returns")
    seed: int = Field(0, description="seed for reference='random' (combined with the group's uid)")

    @model_validator(mode="after")
    def _returns_only_options(self) -> SCPOOptions:
        if self.shape_episode and self.mode != "returns":
            raise ValueError(
                "shape_episode=True belongs to mode='returns' (revision 1); mode='advantage' never "
                "touches the episode term's statistics"
            )
        return self

    @property
    def revision(self) -> int:
        """The estimator revision this mode is (docs/algorithms.md, "SCPO"): 2 for "advantage", 1 for "returns"."""
        return SCPO_REVISION_OF_MODE[self.mode]


class ProGPOCOptions(StrictModel):
    """[ours] first-visit coverage in all-failed groups (order-free: simultaneous first visits all count)."""

    kappa_c: float = Field(0.5, ge=0)
    coverage_scope: Literal["group", "trajectory"] = "group"


class ProGPOROptions(StrictModel):
    """[ours] exact-prefix groups + fused multi-depth state potentials, TD transition credit with terminal Phi = 0."""

    depths: tuple[int, ...] = Field((1, 2, 4), min_length=1, description="history depths d of the potentials Phi_d")
    min_members: int = Field(2, ge=1, description="m: keys with fewer members pool similar keys (semantic expansion)")
    similarity_thresh: float = Field(0.9, gt=0, le=1)
    similarity_scorer: Literal["difflib", "lexical", "bi_encoder", "cross_encoder", "none"] = Field(
        "lexical",
        description="scorer of the semantic expansion ('none': exact keys only); [ours], so lexical (rapidfuzz's "
        "Indel ratio) rather than verl-agent's difflib",
    )
    prior_variance: float = Field(25.0, gt=0, description="variance given to single-member keys")
    variance_floor: float = Field(1e-6, gt=0, description="lower bound of var_d(s) (keys whose returns all agree)")
    omega_p: float = Field(1.0, ge=0, description="weight of the exact-prefix step term A^P")
    omega_d: float = Field(1.0, ge=0, description="weight of the TD transition term norm(delta)")

    @field_validator("depths")
    @classmethod
    def _positive_depths(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        if any(d < 1 for d in v):
            raise ValueError(f"every depth must be >= 1, got {list(v)}")
        return v


class G2POOptions(StrictModel):
    """G2PO as its public code (docs/algorithms.md, "G2PO")."""

    w: float = Field(1.0, ge=0, description="A = A^E + w (A^NC + A^EC)")
    success_value: float = Field(10.0, description="value of the success sentinel node (failure: 0)")


class HGPOOptions(StrictModel):
    """HGPO as its two public versions compute it (docs/algorithms.md, "HGPO"): the authors' code (default) and
    verl-agent's recipe."""

    history_length: int = Field(2, ge=0, description="K: context depths l = 0..K (l earlier observations in the key)")
    alpha: float = Field(
        1.0, description="w_l proportional to (l+1)^alpha (version authors) or (l+2)^alpha (version verl_agent)"
    )
    version: Literal["authors", "verl_agent"] = Field(
        "authors",
        description="authors: the HGPO authors' code, w_l = (l+1)^alpha / sum; verl_agent: verl-agent's recipe/hgpo, "
        "w_l = (l+2)^alpha / (sum + eps), with the optional base group",
    )
    base_group: bool = Field(
        False,
        description="version verl_agent: also pool the episode term (verl's, over the group's rows) as a depth with "
        "weight 1^alpha",
    )

    @model_validator(mode="after")
    def _base_group_is_the_recipes(self) -> HGPOOptions:
        if self.base_group and self.version != "verl_agent":
            raise ValueError("base_group=True belongs to version='verl_agent' (the recipe); the authors' code has none")
        return self


class GraphGPOOptions(StrictModel):
    """GraphGPO as verl-agent's recipe/GraphGPO computes it (docs/algorithms.md, "GraphGPO")."""

    gamma: float = Field(
        0.1,
        gt=0,
        le=1,
        description="discount of R_t = goal_value gamma^d for environments not in gamma_by_env (the recipe's "
        "config default)",
    )
    gamma_by_env: dict[str, float] = Field(
        default_factory=lambda: {"alfworld": 0.1, "webshop": 0.2},
        description="gamma per environment, as the recipe's run scripts set it (`CreditConfig.for_env(name)`)",
    )
    scale: Scale = Field(
        "std",
        description="norm of both terms: the recipe's scripts use mean_std_norm on every environment (GiGPO's use "
        "mean_norm on WebShop), so GraphGPO reads this, not norm.scale",
    )
    goal_value: float = Field(10.0, gt=0, description="the constant of R_t = goal_value gamma^d(s_{t+1})")
    normalize_distance: bool = Field(
        False, description="R_t = goal_value gamma^(d(s_{t+1}) - d(s_t) + 1) instead of goal_value gamma^d(s_{t+1})"
    )
    step_advantage_w: float = Field(1.0, ge=0, description="w_s in A = w_s A^S + w_e A^E")
    episode_advantage_w: float = Field(1.0, ge=0, description="w_e in A = w_s A^S + w_e A^E")
    enable_similarity: bool = Field(
        False,
        description="merge graph nodes whose difflib ratio to a node's first text is >= similarity_thresh (greedy, "
        "in order of appearance; step groups stay exact)",
    )
    similarity_thresh: float = Field(0.95, gt=0, lt=1)

    @field_validator("gamma_by_env")
    @classmethod
    def _gammas_in_range(cls, v: dict[str, float]) -> dict[str, float]:
        bad = {k: g for k, g in v.items() if not 0 < g <= 1}
        if bad:
            raise ValueError(f"every gamma must be in (0, 1], got {bad}")
        return v


class RLOOOptions(StrictModel):
    """RLOO as verl's `compute_rloo_outcome_advantage` (docs/algorithms.md, "RLOO")."""

    baseline_over: Literal["steps", "trajectories"] = Field(
        "steps",
        description="the leave-one-out unit: every step row of the group (verl's default) or one score per "
        "trajectory (its first row's, as verl's compute_mean_std_cross_steps=False)",
    )


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
    dead_end: float = Field(
        10.0, gt=0, description="a step into a state the goal cannot be reached from (q = -inf) gets q = -dead_end"
    )
    baseline: Literal["none", "group_mean", "optimal"] = Field(
        "none",
        description="none: the step term uncentred (its sign is q's); group_mean: minus its mean over the group's "
        "rows (mean-zero advantages, as GRPO's); optimal: minus omega, the optimal advantage "
        "A*(s, a) = Q*(s, a) - V*(s) = q - 1 (0 on an optimal step, below 0 on every other)",
    )
    level: Literal["step", "trajectory"] = Field(
        "step",
        description="step: each step credited with its own q_t; trajectory: GRPO on the shaped return, "
        "A = norm(R_i + omega sum_t q_t - pen_t, group's rows): the progress the whole trajectory made (potential-"
        "based shaping summed over the episode), every step of it alike",
    )

    @model_validator(mode="after")
    def _trajectory_level_has_its_own_baseline(self):
        if self.level == "trajectory" and (self.baseline != "none" or self.episode_weight):
            raise ValueError(
                f"credit.oracle.level=trajectory normalises the shaped return within the group itself: it takes "
                f"baseline=none and episode_weight=0 (got baseline={self.baseline!r}, "
                f"episode_weight={self.episode_weight})"
            )
        return self


class MCAdvantageOptions(StrictModel):
    """[ours, after VinePPO] the policy's own advantage from Monte-Carlo continuations (scpo.credit.mc_advantage)."""

    rollouts: int = Field(
        2, ge=1, description="K: continuations of the current policy per visited state (its value V is their mean)"
    )
    whiten: bool = Field(
        True,
        description="true: the advantages divided by their standard deviation over the batch (not centred); false: "
        "in units of the success probability",
    )


class ExactAdvantageOptions(StrictModel):
    """[ours] the policy's exact advantage A^pi = Q^pi - V^pi of the success objective (scpo.credit.exact_advantage)."""

    whiten: bool = Field(
        True,
        description="true: divided by the standard deviation over the batch's rows (not centred: the direction of "
        "the batch's update is unchanged); false: in units of the success probability",
    )


class ShuffledOptions(StrictModel):
    """[ours] the learning benchmark's lower bound: GRPO's advantages permuted among each group's rows."""

    seed: int = Field(0, description="seeds each group's permutation (with the group's content id)")


class CreditConfig(StrictModel):
    method: str = Field("gigpo", description="a credit method of the registry (scpo.credit.registry.METHODS)")
    success_reward: float = Field(10.0, gt=0, description="R_success: the reward of a won episode")
    norm: NormOptions = NormOptions()
    grpo: GRPOOptions = GRPOOptions()
    gigpo: GiGPOOptions = GiGPOOptions()
    scpo: SCPOOptions = SCPOOptions()
    progpo_c: ProGPOCOptions = ProGPOCOptions()
    progpo_r: ProGPOROptions = ProGPOROptions()
    g2po: G2POOptions = G2POOptions()
    hgpo: HGPOOptions = HGPOOptions()
    graphgpo: GraphGPOOptions = GraphGPOOptions()
    rloo: RLOOOptions = RLOOOptions()
    hcapo: HCAPOOptions = HCAPOOptions()
    oracle: OracleOptions = OracleOptions()
    mc_advantage: MCAdvantageOptions = MCAdvantageOptions()
    shuffled: ShuffledOptions = ShuffledOptions()
    exact_advantage: ExactAdvantageOptions = ExactAdvantageOptions()

    def for_env(self, env: str | None) -> CreditConfig:
        """This config with the environment's reference settings: `norm.scale` from `norm.scale_by_env` and
        `graphgpo.gamma` from `graphgpo.gamma_by_env` (unlisted environments keep `norm.scale` / `graphgpo.gamma`)."""
        scale = self.norm.scale_by_env.get(env, self.norm.scale) if env else self.norm.scale
        gamma = self.graphgpo.gamma_by_env.get(env, self.graphgpo.gamma) if env else self.graphgpo.gamma
        update = {}
        if scale != self.norm.scale:
            update["norm"] = self.norm.model_copy(update={"scale": scale})
        if gamma != self.graphgpo.gamma:
            update["graphgpo"] = self.graphgpo.model_copy(update={"gamma": gamma})
        return self.model_copy(update=update) if update else self

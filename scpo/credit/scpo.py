"""SCPO (Semantic Consistency Policy Optimization), revision 2: credit in advantage space [our definition of the
details].

Spec: docs/algorithms.md, "SCPO". In a group with at least one success and one failure, each failed trajectory i is
matched, in order, against a successful sibling (the reference, T_ref steps) by a frozen scorer S[t, j] in [0, 1] over
step texts (default: action + " -> " + next observation). Monotone matching, frontier f = -1, for t = 0, 1, ...:

    j* = argmax_{j > f} S[t, j]          (match="argmax", ties: smallest j)
    j* = min {j > f : S[t, j] >= tau}    (match="first")
    S[t, j*] >= tau  ->  step t is credited: s_t = S[t, j*], f = j*;   otherwise s_t = 0

mode="advantage" (default, revision 2), A and A^E being GiGPO's advantage and its episode term, unchanged:

    A'_{i,t} = A_{i,t} + kappa s_t (A^E_ref - A^E_i),   A^E_ref - A^E_i = (R_ref - R_i) / (sigma_g + eps)  (scale "std")
                                                                          R_ref - R_i                    (scale "none")

R are the trajectories' returns without invalid penalties and sigma_g the std GiGPO's episode term used for group g, so
the gap is per trajectory. No discounting, no re-normalisation: uncredited failed steps, successes, groups without both
outcomes and the step term A^S keep GiGPO's values exactly. With kappa = 1 and s_t = 1 a credited step's episode part
equals the reference's.

mode="returns", the ablation (revision 1 in docs/algorithms.md): a bonus b_t = kappa_r R_success (j* - f) / T_ref s_t
is added to the failed trajectory's step rewards before GiGPO's discounted, anchor-normalised step returns. It cannot
make credit consistent: normalisation inside an anchor group erases the bonus's scale (an anchor {success, failure}
gives +-0.707 whatever b is), a bonus below R never lifts the failure's negative episode term, discounting leaks it to
earlier steps that made no progress, and a raised anchor mean lowers the other failed rows of that anchor.

Reference, chosen by content so that permuting the trajectories of a group changes nothing:
    "shortest": the shortest success; ties -> the one giving the group's failures the largest total credit, then the
                lexicographically smallest sequence of step texts;
    "random":   one success drawn by an rng seeded with (seed, group uid) from the successes sorted by (length, texts);
    "all":      per failure, the success giving it the most credit (ties: shortest, then smallest texts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from scpo.batch import RolloutBatch, stable_uid
from scpo.credit.gigpo import compute_gigpo
from scpo.credit.grouping import invalid_penalty, trajectory_first_rows
from scpo.credit.grpo import episode_statistics
from scpo.credit.options import CreditOptions, ScorerName, StrictModel
from scpo.credit.result import CreditResult
from scpo.credit.spec import credit_method

__all__ = [
    "SCPOOptions",
    "SCPO_REVISION_OF_MODE",
    "step_texts",
    "monotone_match",
    "returns_bonus",
    "episode_gap",
    "match_failures",
    "scpo_credit",
    "anchor_scorer",
    "compute_scpo",
]

SCPO_REVISION_OF_MODE = {"advantage": 2, "returns": 1}


class SCPOOptions(StrictModel):
    """[ours] SCPO revision 2 (docs/algorithms.md, "SCPO"): credit in advantage space for failed steps that make new,
    monotone progress along a successful sibling."""

    mode: Literal["advantage", "returns"] = Field(
        "advantage",
        description="advantage: A' = A + kappa s_t (A^E_ref - A^E_i) on credited failed steps (revision 2); "
        "returns: a bonus in GiGPO's step returns (the ablation, revision 1: it cannot make credit consistent)",
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
        "fidelity, notebook 07's SCPO options sweep)",
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


def step_texts(batch: RolloutBatch, mode: str, rows: np.ndarray | None = None) -> np.ndarray:
    """text(step): "action -> next_observation" (default), "action", or "observation -> action"; only for `rows`
    (a boolean mask; other rows get "")."""
    if mode not in ("action_next_obs", "action", "obs_action"):
        raise ValueError(f"step_text={mode!r} is not one of 'action_next_obs', 'action', 'obs_action'")
    idx = np.arange(batch.n_rows) if rows is None else np.flatnonzero(rows)
    act = batch.action[idx]
    if mode == "action_next_obs":
        made = [f"{a} -> {o}" for a, o in zip(act, batch.next_observation[idx])]
    elif mode == "obs_action":
        made = [f"{o} -> {a}" for o, a in zip(batch.observation[idx], act)]
    else:
        made = list(act)
    out = np.full(batch.n_rows, "", dtype=object)
    out[idx] = made
    return out


def monotone_match(
    scores: np.ndarray, fail_len: np.ndarray, ref_len: np.ndarray, *, tau: float, match: str = "argmax"
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Monotone matching of a batch of (failed, reference) instances, vectorised over instances.

    scores: (n, T_f, T_r) S[t, j], padding anywhere (ignored through the lengths). Returns (j_star, credited, best,
    advance), each (n, T_f): j_star = j* where step t was credited else -1; credited = s_t (0 when not credited);
    best = max_{j > f} S[t, j], the best candidate after the frontier (0 when none is left); advance = j* - f on
    credited steps (the reference positions this step covers), else 0.
    """
    if match not in ("argmax", "first"):
        raise ValueError(f"match={match!r} is not one of 'argmax', 'first'")
    n, t_f, t_r = scores.shape
    fail_len, ref_len = np.asarray(fail_len), np.asarray(ref_len)
    s = np.where(np.arange(t_r)[None, None, :] < ref_len[:, None, None], scores, -np.inf)
    k = np.arange(t_r)
    rev = s[..., ::-1]
    cummax = np.maximum.accumulate(rev, axis=-1)
    # suffix argmax: arg[:, t, j0] = argmax_{j >= j0} s[:, t, j], ties to the smallest j
    last_new_max = np.maximum.accumulate(np.where(rev >= cummax, k, 0), axis=-1)
    suffix_arg = (t_r - 1 - last_new_max)[..., ::-1]
    suffix_max = cummax[..., ::-1]
    # first position j >= j0 with s >= tau (t_r when there is none)
    first_ok = np.minimum.accumulate(np.where(s >= tau, k, t_r)[..., ::-1], axis=-1)[..., ::-1]
    frontier = np.full(n, -1, dtype=np.int64)
    j_star = np.full((n, t_f), -1, dtype=np.int64)
    credited, best, advance = np.zeros((n, t_f)), np.zeros((n, t_f)), np.zeros((n, t_f), dtype=np.int64)
    for t in range(t_f):
        idx = np.flatnonzero((t < fail_len) & (frontier + 1 < ref_len))
        if len(idx) == 0:
            continue
        j0 = frontier[idx] + 1
        best[idx, t] = suffix_max[idx, t, j0]
        if match == "argmax":
            j = suffix_arg[idx, t, j0]
            ok = s[idx, t, j] >= tau
        else:
            j = np.minimum(first_ok[idx, t, j0], t_r - 1)
            ok = first_ok[idx, t, j0] < t_r
        hit, j = idx[ok], j[ok]
        j_star[hit, t] = j
        credited[hit, t] = s[hit, t, j]
        advance[hit, t] = j - frontier[hit]
        frontier[hit] = j
    return j_star, credited, best, advance


def returns_bonus(
    credited: np.ndarray, advance: np.ndarray, ref_len: np.ndarray, *, kappa_r: float, r_success: float
) -> np.ndarray:
    """Revision 1's bonus per instance and step: b_t = kappa_r R_success (j* - f) / T_ref s_t
    (sum <= kappa_r R_success)."""
    return kappa_r * r_success * advance / np.asarray(ref_len, dtype=np.float64)[:, None] * credited


def episode_gap(batch: RolloutBatch, cfg: CreditOptions) -> tuple[np.ndarray, np.ndarray]:
    """(R per row without penalties, 1 / (sigma_g + eps) per row, or 1 for scale "none"): A^E_ref - A^E_i =
    (R_ref - R_i) * that factor, sigma_g being the std GiGPO's episode term used for the row's group."""
    pen = invalid_penalty(batch.valid, cfg.norm.lambda_invalid)
    _, std, _ = episode_statistics(
        batch.episode_return, pen, batch.group_id, batch.traj_id, stats_over=cfg.grpo.stats_over
    )
    factor = 1.0 / (std[batch.group_id] + cfg.norm.epsilon) if cfg.norm.scale == "std" else np.ones(batch.n_rows)
    return batch.episode_return.astype(np.float64), factor


@dataclass
class _Instance:
    """One (failed trajectory, candidate reference) pair of a mixed group."""

    group: int
    fail: int  # first row of the failed trajectory
    ref: int  # first row of the reference
    scores: np.ndarray  # S[t, j], (T_f, T_ref)


def _content_key(texts: np.ndarray, first: int, length: int) -> tuple[int, tuple[str, ...]]:
    """(length, step texts) of the trajectory starting at row `first`: its order-free identity for tie-breaks."""
    return length, tuple(str(t) for t in texts[first : first + length])


def match_failures(
    batch: RolloutBatch, texts: np.ndarray, scorer, opts: SCPOOptions, *, credit_weight
) -> dict[str, np.ndarray]:
    """Match every failed trajectory of every mixed group against its reference (see the module docstring).

    `credit_weight(instance_fail_rows, instance_ref_rows, credited, advance, ref_len) -> (n_instances,)` gives the total
    credit an instance would add (it depends on the mode); the references are chosen with it. Scores come from one
    `scorer.score_matrix` call per mixed group over its distinct failed and candidate texts.

    Returns per-row arrays: "match" (j* or -1), "ref_row" (row of the matched reference step or -1), "credited" (s_t),
    "best" (best candidate score after the frontier), "advance" (j* - f), "ref_first" (first row of the failure's
    reference, -1 elsewhere), "shaped" (row of a failed trajectory in a mixed group).
    """
    n = batch.n_rows
    first = trajectory_first_rows(batch.traj_id)
    t_group, t_won, _ = batch.group_id[first], batch.won[first], batch.traj_len[first]
    out = {
        "match": np.full(n, -1, dtype=np.int64),
        "ref_row": np.full(n, -1, dtype=np.int64),
        "credited": np.zeros(n),
        "best": np.zeros(n),
        "advance": np.zeros(n, dtype=np.int64),
        "ref_first": np.full(n, -1, dtype=np.int64),
        "shaped": np.zeros(n, dtype=bool),
    }
    instances: list[_Instance] = []
    for g in np.unique(t_group):
        wins, fails = first[(t_group == g) & t_won], first[(t_group == g) & ~t_won]
        if len(wins) == 0 or len(fails) == 0:
            continue
        key = {int(w): _content_key(texts, int(w), int(batch.traj_len[w])) for w in wins}
        if opts.reference == "shortest":
            shortest = min(k[0] for k in key.values())
            candidates = [w for w in wins if key[int(w)][0] == shortest]
        elif opts.reference == "random":
            ordered = sorted(wins.tolist(), key=lambda w: key[w])
            rng = np.random.default_rng(
                [opts.seed, int(stable_uid("scpo-ref", batch.group_uid[wins[0]], length=8), 16)]
            )
            candidates = [ordered[int(rng.integers(len(ordered)))]]
        else:
            candidates = list(wins)
        fail_rows = np.concatenate([np.arange(r, r + batch.traj_len[r]) for r in fails])
        ref_rows = np.concatenate([np.arange(r, r + batch.traj_len[r]) for r in candidates])
        f_uniq, f_code = np.unique(texts[fail_rows].astype(str), return_inverse=True)
        r_uniq, r_code = np.unique(texts[ref_rows].astype(str), return_inverse=True)
        mat = scorer.score_matrix(list(f_uniq), list(r_uniq))
        f_code, r_code = f_code.reshape(-1), r_code.reshape(-1)
        f_off = np.r_[0, np.cumsum(batch.traj_len[fails])[:-1]]
        r_off = np.r_[0, np.cumsum(batch.traj_len[np.asarray(candidates)])[:-1]]
        out["shaped"][fail_rows] = True
        for fr, fo in zip(fails, f_off):
            fc = f_code[fo : fo + batch.traj_len[fr]]
            for rr, ro in zip(candidates, r_off):
                rc = r_code[ro : ro + batch.traj_len[rr]]
                instances.append(_Instance(int(g), int(fr), int(rr), mat[np.ix_(fc, rc)]))
    if not instances:
        return out
    t_f = max(i.scores.shape[0] for i in instances)
    t_r = max(i.scores.shape[1] for i in instances)
    s = np.zeros((len(instances), t_f, t_r))
    for k, inst in enumerate(instances):
        s[k, : inst.scores.shape[0], : inst.scores.shape[1]] = inst.scores
    f_len = np.array([i.scores.shape[0] for i in instances])
    r_len = np.array([i.scores.shape[1] for i in instances])
    j_star, credited, best, advance = monotone_match(s, f_len, r_len, tau=opts.tau, match=opts.match)
    weight = credit_weight(
        np.array([i.fail for i in instances]), np.array([i.ref for i in instances]), credited, advance, r_len
    )
    for k in _choose(instances, weight, texts, batch.traj_len, opts.reference):
        inst, m = instances[k], j_star[k, : f_len[k]]
        rows = np.arange(inst.fail, inst.fail + f_len[k])
        out["match"][rows], out["credited"][rows] = m, credited[k, : f_len[k]]
        out["best"][rows], out["advance"][rows] = best[k, : f_len[k]], advance[k, : f_len[k]]
        out["ref_row"][rows] = np.where(m >= 0, inst.ref + m, -1)
        out["ref_first"][rows] = inst.ref
    return out


def _choose(
    instances: list[_Instance], weight: np.ndarray, texts: np.ndarray, traj_len: np.ndarray, reference: str
) -> list[int]:
    """Indices of the instances kept: one per failed trajectory (see the module docstring for the rules)."""
    key = {i.ref: _content_key(texts, i.ref, int(traj_len[i.ref])) for i in instances}
    keep: list[int] = []
    if reference == "all":  # per failure: most credit, then shortest, then smallest texts
        by_fail: dict[int, list[int]] = {}
        for k, inst in enumerate(instances):
            by_fail.setdefault(inst.fail, []).append(k)
        for ks in by_fail.values():
            keep.append(min(ks, key=lambda k: (-weight[k], key[instances[k].ref])))
        return keep
    by_group: dict[int, dict[int, list[int]]] = {}  # group -> reference -> its instances
    for k, inst in enumerate(instances):
        by_group.setdefault(inst.group, {}).setdefault(inst.ref, []).append(k)
    for refs in by_group.values():  # one reference per group: most total credit, then smallest texts
        total = {r: math.fsum(weight[k] for k in ks) for r, ks in refs.items()}
        chosen = min(refs, key=lambda r: (-total[r], key[r]))
        keep.extend(refs[chosen])
    return keep


def scpo_credit(
    batch: RolloutBatch, cfg: CreditOptions, scorer, texts: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """SCPO's matching and per-row credit on `batch` (`texts`: the step texts, default from `credit.scpo.step_text`).

    Adds to `match_failures`'s arrays "gap" (A^E_ref - A^E_i on matched rows, else 0), "credit" (kappa s_t gap: the
    value mode "advantage" adds to A) and "bonus" (revision 1's b_t: what mode "returns" adds to the step rewards).
    """
    opts = cfg.scpo
    won_any = np.bincount(batch.group_id, weights=batch.won.astype(float)) > 0
    fail_any = np.bincount(batch.group_id, weights=(~batch.won).astype(float)) > 0
    mixed = (won_any & fail_any)[batch.group_id]
    if texts is None:
        texts = step_texts(batch, opts.step_text, mixed)
    ret, factor = episode_gap(batch, cfg)

    def weight(fails, refs, credited, advance, ref_len):
        if opts.mode == "returns":
            bonus = returns_bonus(credited, advance, ref_len, kappa_r=opts.kappa_r, r_success=cfg.success_reward)
            return np.array([math.fsum(row) for row in bonus])
        gap = (ret[refs] - ret[fails]) * factor[fails]
        return opts.kappa * gap * np.array([math.fsum(row) for row in credited])

    m = match_failures(batch, texts, scorer, opts, credit_weight=weight)
    has_ref = m["ref_first"] >= 0
    gap = np.where(has_ref, (ret[np.maximum(m["ref_first"], 0)] - ret) * factor, 0.0)
    credit = opts.kappa * m["credited"] * gap
    r_len = np.where(has_ref, batch.traj_len[np.maximum(m["ref_first"], 0)], 1)
    bonus = opts.kappa_r * cfg.success_reward * m["advance"] / r_len * m["credited"]
    return {**m, "gap": gap, "credit": credit, "bonus": bonus}


@lru_cache(maxsize=4)
def _named_scorer(name: str):
    """One scorer per name per process (its pair cache survives across iterations)."""
    from scpo.scorers import make_scorer

    return make_scorer(name)


def anchor_scorer(cfg: CreditOptions, scorer):
    """The scorer of GiGPO's similarity anchors inside SCPO: `credit.gigpo.similarity_scorer`, as in GiGPO itself
    (SCPO's matching `scorer` when that is the same scorer without a model of its own); None when the anchors are
    exact (`enable_similarity` false)."""
    opts = cfg.gigpo
    if not opts.enable_similarity:
        return None
    if opts.similarity_scorer == cfg.scpo.scorer and cfg.scpo.scorer_model is None:
        return scorer
    return _named_scorer(opts.similarity_scorer)


@credit_method("scpo", SCPOOptions, reads=("gigpo", "grpo"), scorer=lambda c: (c.scpo.scorer, c.scpo.scorer_model))
def compute_scpo(batch: RolloutBatch, cfg: CreditOptions, *, scorer=None, **_: object) -> CreditResult:
    """SCPO on `batch` (mode per `credit.scpo.mode`). Diagnostics add scpo_match (j*), scpo_ref_row, scpo_score (s_t),
    scpo_best_score, scpo_gap, scpo_credit (what SCPO added to GiGPO's advantage) and scpo_bonus (mode "returns")."""
    opts = cfg.scpo
    if scorer is None:
        raise ValueError("scpo needs a scorer (compute_advantages builds the configured one: credit.scpo.scorer)")
    stats_before = dict(scorer.stats)
    sc = scpo_credit(batch, cfg, scorer)
    anchors = anchor_scorer(cfg, scorer)
    base = compute_gigpo(batch, cfg, scorer=anchors, method="scpo")
    shaped_row = sc["shaped"]
    if opts.mode == "advantage":
        adv, returns, diag = base.advantages + sc["credit"], base.returns, dict(base.diagnostics)
    else:
        ep_ret = None
        if opts.shape_episode:
            ep_ret = batch.episode_return + np.bincount(batch.traj_id, weights=sc["bonus"])[batch.traj_id]
        shaped = compute_gigpo(
            batch, cfg, scorer=anchors, rewards=batch.reward + sc["bonus"], episode_return=ep_ret, method="scpo"
        )
        pick = lambda a, b: np.where(shaped_row, b, a)  # noqa: E731 - shaped rows take the shaped value
        adv, returns = pick(base.advantages, shaped.advantages), pick(base.returns, shaped.returns)
        diag = {k: pick(base.diagnostics[k], shaped.diagnostics[k]) for k in base.diagnostics}
    diag.update(
        scpo_match=sc["match"],
        scpo_ref_row=sc["ref_row"],
        scpo_score=sc["credited"],
        scpo_best_score=sc["best"],
        scpo_gap=sc["gap"],
        scpo_credit=adv - base.advantages,
        scpo_bonus=sc["bonus"] if opts.mode == "returns" else np.zeros(batch.n_rows),
    )
    after = scorer.stats
    n_shaped = int(shaped_row.sum())
    credited = sc["match"] >= 0
    stats = {
        **base.stats,
        "scpo_frac_steps_credited": float(np.mean(credited[shaped_row])) if n_shaped else 0.0,
        "scpo_credit_mean": float(diag["scpo_credit"][shaped_row].mean()) if n_shaped else 0.0,
        "scpo_frac_rows_shaped": n_shaped / batch.n_rows,
        "scpo_pairs_scored": float(after["pairs_scored"] - stats_before["pairs_scored"]),
        "scpo_cache_hits": float(after["cache_hits"] - stats_before["cache_hits"]),
    }
    return CreditResult("scpo", adv, returns, diag, stats)

"""The group-RL objective on tokens (verl / GiGPO reference settings):

    ratio_k = exp(logp_k - logp_old_k)
    L_pg    = -min(ratio_k A_k, clip(ratio_k, 1 - eps, 1 + eps) A_k)                 (PPO clipped surrogate, eps = 0.2)
    L_pg    = min(L_pg, -c A_k)  where A_k < 0                                        (dual clip, c = 3; optional)
    KL_k    = exp(ref_k - logp_k) - (ref_k - logp_k) - 1, clamped to [-10, 10]       ("low_var_kl", Schulman's k3)
    L       = mean_k(L_pg) + beta KL_mean - c_H H_mean                               (beta = 0.01, c_H = 0.001)

Means are over all response tokens of the minibatch ("token-mean"). A_k is the step's advantage broadcast to its tokens.
With `train.rollout_correction: tis` each token's L_pg is multiplied by the truncated importance weight
w_k = min(exp(logp_old_k - logp_sampler_k), C) (no gradient; docs/algorithms.md, "Sampler / trainer mismatch").
Dual clip (Ye et al. 2020, arXiv:1912.09729; verl's `clip_ratio_c`, 3.0 in verl-agent's GiGPO runs) bounds the loss of a
negative-advantage token whose ratio has grown large: without it, -ratio_k A_k grows without limit in ratio_k.
"""

from __future__ import annotations

import torch

__all__ = ["masked_mean", "clipped_surrogate", "low_var_kl", "policy_loss"]


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def clipped_surrogate(
    logp, old_logp, advantages, mask, clip_ratio: float, dual_clip_c: float | None = None, with_lower: bool = False
):
    """-> (per-token loss, clipped indicator[, dual-clipped indicator]). `advantages` is [B] (per step) or [B, R].

    `dual_clip_c` (> 1, None = off): where A_k < 0 the loss is min(L_pg, -c A_k); the third output (with_lower) marks
    the tokens where that bound was the one taken (verl's pg_clipfrac_lower)."""
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1).expand_as(logp)
    ratio = torch.exp(logp - old_logp)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip_ratio, 1.0 + clip_ratio) * advantages
    loss = -torch.minimum(unclipped, clipped)
    was_clipped = (clipped < unclipped).float()
    lower = torch.zeros_like(loss)
    if dual_clip_c is not None:
        if dual_clip_c <= 1.0:
            raise ValueError(f"dual_clip_c={dual_clip_c} must be > 1 (the ratio bound of dual-clip PPO)")
        bound = -dual_clip_c * advantages
        negative = advantages < 0
        lower = (negative & (loss > bound)).float()
        loss = torch.where(negative, torch.minimum(loss, bound), loss)
    if with_lower:
        return loss * mask, was_clipped * mask, lower * mask
    return loss * mask, was_clipped * mask


def low_var_kl(logp, ref_logp):
    """k3 estimator of KL(pi || pi_ref) per token, clamped to [-10, 10] as in verl."""
    log_ratio = ref_logp - logp
    return torch.clamp(torch.exp(log_ratio) - log_ratio - 1.0, -10.0, 10.0)


def policy_loss(
    logp,
    old_logp,
    ref_logp,
    advantages,
    mask,
    entropy,
    *,
    clip_ratio: float,
    kl_coef: float,
    entropy_coef: float,
    dual_clip_c: float | None = None,
    is_weight: torch.Tensor | None = None,
):
    """-> (loss, stats) with stats pg, kl, entropy, clipfrac, approx_kl (floats), and clipfrac_lower with dual clip.
    `is_weight` [B, R] (optional, detached): multiplies each token's policy-gradient loss (module docstring)."""
    pg, clipped, lower = clipped_surrogate(logp, old_logp, advantages, mask, clip_ratio, dual_clip_c, with_lower=True)
    if is_weight is not None:
        pg = pg * is_weight.detach()
    loss = masked_mean(pg, mask)
    stats = {"pg": float(loss.detach()), "clipfrac": float(masked_mean(clipped, mask))}
    if dual_clip_c is not None:
        stats["clipfrac_lower"] = float(masked_mean(lower, mask))
    if ref_logp is not None:
        kl = masked_mean(low_var_kl(logp, ref_logp), mask)
        loss = loss + kl_coef * kl
        stats["kl"] = float(kl.detach())
    if entropy is not None:
        ent = masked_mean(entropy, mask)
        loss = loss - entropy_coef * ent
        stats["entropy"] = float(ent.detach())
    stats["approx_kl"] = float(masked_mean(0.5 * (logp - old_logp) ** 2, mask).detach())
    return loss, stats

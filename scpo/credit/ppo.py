"""PPO with a learned critic: turn-level GAE over each trajectory from the critic's values V(s_t) (Schulman et al.
2016, "High-Dimensional Continuous Control Using Generalized Advantage Estimation", arXiv 1506.02438, Eq. 16), whitened
over the batch as verl's `masked_whiten`. Spec: docs/algorithms.md, "PPO (learned critic)".

    r'_t    = r_t - pen_t                                                (the invalid-action penalty is a reward)
    delta_t = r'_t + gamma V(s_{t+1}) (1 - done_t) - V(s_t)              (TD error; V(s_{T}) := bootstrap or 0)
    A_t     = sum_{l >= 0} (gamma lambda)^l delta_{t+l}                    (within the trajectory)
    G_t     = A_t + V(s_t)                                                 (the critic's regression target)
    A'_t    = (A_t - mean_w(A)) / sqrt(var_w(A) + 1e-8)                    (whitened over the batch, weights w)

One row per turn: s_t is the state the policy acted on at turn t (its prompt), V(s_t) the critic's value of it: the
batch's `critic_value` column, the need `ppo` declares (the trainer's critic fills it before credit, with its values
before it trains on the batch: `scpo.train.critic`). The
last row of a trajectory has no next row: if its `done` is True its next state is terminal (value 0); otherwise the
episode was cut (truncated) and it bootstraps from `final_value`, the critic's value of the state it ended in, where
the caller gives one, else 0. The suite's collector marks an episode cut by the step limit as done, so on the suite's
rollouts nothing bootstraps, which is verl-agent's behaviour as well: its PPO recipe trains every turn as its own
sample whose last token carries the episode's return, so no turn ever bootstraps from a later one.

Whitening (verl `masked_whiten`): the mean and the unbiased variance over the batch's response tokens, each turn's
advantage counted once per token of its answer (`whiten="tokens"`, verl's), once per turn (`"steps"`) or not at all
(`"none"`). Defaults (`PPOOptions`): gamma = lambda = 1, verl's `algorithm.gamma` / `algorithm.lam` that verl-agent's
PPO recipe (examples/ppo_trainer/run_alfworld.sh) leaves unchanged. All functions are vectorised over trajectories:
one pass per step position, never per row.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field

from scpo.batch import RolloutBatch
from scpo.credit.grouping import discounted_returns, invalid_penalty, next_row_in_trajectory, segment_sizes
from scpo.credit.grpo import group_stats
from scpo.credit.result import CreditResult
from scpo.credit.spec import credit_method
from scpo.strict_model import StrictModel

__all__ = [
    "PPOOptions",
    "td_errors",
    "gae_advantages",
    "whiten",
    "explained_variance",
    "answer_token_counts",
    "compute_ppo",
]

WHITEN_EPSILON = 1e-8  # verl's masked_whiten: (x - mean) * rsqrt(var + 1e-8)
EXPLAINED_VARIANCE_EPSILON = 1e-5  # verl's metric_utils: 1 - var(G - V) / (var(G) + 1e-5)


class PPOOptions(StrictModel):
    """PPO's advantage options (verl's `algorithm` section as verl-agent's PPO recipe runs it)."""

    gamma: float = Field(1.0, ge=0, le=1, description="discount of the TD error (verl algorithm.gamma)")
    lam: float = Field(1.0, ge=0, le=1, description="lambda of GAE (verl algorithm.lam)")
    whiten: Literal["tokens", "steps", "none"] = Field(
        "tokens",
        description="advantages whitened over the batch, each turn weighted by its answer's token count (verl's "
        "masked_whiten over response tokens), by 1, or not whitened",
    )


def td_errors(
    reward: np.ndarray,
    values: np.ndarray,
    traj_id: np.ndarray,
    done: np.ndarray,
    gamma: float,
    final_value: np.ndarray | None = None,
) -> np.ndarray:
    """delta_t = r_t + gamma V(s_{t+1}) (1 - done_t) - V(s_t), per row.

    V(s_{t+1}) is the next row's value within the trajectory; at a trajectory's last row it is `final_value[traj_id]`
    (the value of the state the episode was cut in) or 0 without one. Shapes: reward, values, traj_id, done (n,);
    final_value (n_trajectories,) indexed by the dense `traj_id`, read only where the last row is not done (NaN or
    None elsewhere is fine). -> float64 (n,).
    """
    values = np.asarray(values, dtype=np.float64)
    traj_id = np.asarray(traj_id)
    not_done = ~np.asarray(done, dtype=bool)
    nxt = next_row_in_trajectory(traj_id)
    last = nxt == -1
    next_value = np.zeros_like(values)
    next_value[~last] = values[nxt[~last]]
    if final_value is not None:
        final_value = np.ravel(np.asarray(final_value, dtype=np.float64))
        if len(final_value) != int(traj_id.max()) + 1:
            raise ValueError(
                f"final_value has {len(final_value)} entries, expected one per trajectory ({int(traj_id.max()) + 1})"
            )
        cut = last & not_done
        if not np.all(np.isfinite(final_value[traj_id[cut]])):
            raise ValueError("final_value is not finite for a truncated trajectory (last row not done)")
        next_value[cut] = final_value[traj_id[cut]]
    return np.add(reward, gamma * np.where(not_done, next_value, 0.0)) - values


def gae_advantages(
    reward: np.ndarray,
    values: np.ndarray,
    traj_id: np.ndarray,
    step: np.ndarray,
    done: np.ndarray,
    *,
    gamma: float,
    lam: float,
    final_value: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """-> (A, G, delta): A_t = sum_l (gamma lam)^l delta_{t+l} within each trajectory, G_t = A_t + V(s_t), and the TD
    errors (`td_errors`). Rows grouped by trajectory and ordered by step (`grouping.check_rows`). Unwhitened."""
    if not (0 <= gamma <= 1 and 0 <= lam <= 1):
        raise ValueError(f"gamma={gamma} and lam={lam} must lie in [0, 1]")
    delta = td_errors(reward, values, traj_id, done, gamma, final_value)
    adv = discounted_returns(delta, traj_id, step, gamma * lam)
    return adv, adv + values, delta


def whiten(x: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """verl's `masked_whiten` (verl/utils/torch_functional.py) of one value per row, each row counted `weights` times
    (its answer's token count; None: once): (x - m) / sqrt(v + 1e-8), m = sum w x / (n + 1e-8),
    v = sum w (x - m)^2 / (n + 1e-8) * n / (n - 1), n = sum w (verl's masked_mean keeps its 1e-8 in the
    denominators). verl needs n >= 2 (its unbiased variance divides by n - 1): so does this. x, weights (n,) -> (n,)."""
    x = np.asarray(x)
    w = np.ones(len(x)) if weights is None else np.asarray(weights)
    n = float(w.sum())
    if n < 2:
        raise ValueError(f"whitening needs at least 2 weighted entries (tokens or steps), got {n:g}")
    mean = float(np.dot(w, x)) / (n + WHITEN_EPSILON)
    var = float(np.dot(w, (x - mean) ** 2)) / (n + WHITEN_EPSILON) * (n / (n - 1))
    return (x - mean) / np.sqrt(var + WHITEN_EPSILON)


def explained_variance(values: np.ndarray, returns: np.ndarray) -> float:
    """1 - var(G - V) / (var(G) + 1e-5), unbiased variances, as verl's `critic/vf_explained_var`: 1 when the critic
    predicts every return, 0 when it predicts no better than their mean, below 0 when worse."""
    values, returns = np.asarray(values), np.asarray(returns)
    if len(values) != len(returns) or len(values) < 2:
        raise ValueError(
            f"explained_variance needs two arrays of the same length >= 2, got {len(values)}, {len(returns)}"
        )
    return float(1.0 - np.var(returns - values, ddof=1) / (np.var(returns, ddof=1) + EXPLAINED_VARIANCE_EPSILON))


def answer_token_counts(batch: RolloutBatch) -> np.ndarray:
    """Each row's answer length in tokens (the weight of its advantage in verl's token-level whitening)."""
    if batch.response_ids is None:
        raise ValueError(
            "ppo whiten='tokens' weights each step by its answer's token count, and the batch has no response_ids "
            "(rollouts without the policy's tokens): set the ppo option whiten='steps'"
        )
    return np.array([len(r) for r in batch.response_ids])


@credit_method("ppo", PPOOptions, columns=("critic_value",))
def compute_ppo(
    batch: RolloutBatch,
    cfg: Any,
    *,
    values: np.ndarray | None = None,
    final_value: np.ndarray | None = None,
    options: PPOOptions | None = None,
    **_: object,
) -> CreditResult:
    """PPO's advantages on `batch` from the critic's values V(s_t) (n_rows,): `values`, else the batch's
    `critic_value` column; `final_value` (n_trajectories,) for truncated trajectories (module docstring). `cfg` is
    the credit config (its `norm` section; `options` default to its `ppo` section). Returns G_t = A_t + V(s_t), the
    critic's targets; diagnostics "value" (V(s_t)) and "td_error" (delta_t)."""
    values = batch.critic_value if values is None else values
    if values is None:
        raise ValueError(
            "ppo needs the critic's values V(s_t) per step: the batch's critic_value column (the trainer's critic "
            "fills it, scpo.train.critic) or values=..."
        )
    v = np.ravel(np.asarray(values, dtype=np.float64))
    if len(v) != batch.n_rows or not np.all(np.isfinite(v)):
        raise ValueError(
            f"values must be {batch.n_rows} finite values (one per row), got shape {np.shape(values)} with "
            f"{int(np.sum(~np.isfinite(v)))} non-finite"
        )
    opts = options if options is not None else cfg.ppo
    pen = invalid_penalty(batch.valid, cfg.norm.lambda_invalid)
    adv, returns, delta = gae_advantages(
        batch.reward - pen,
        v,
        batch.traj_id,
        batch.step,
        batch.done,
        gamma=opts.gamma,
        lam=opts.lam,
        final_value=final_value,
    )
    if opts.whiten != "none":
        adv = whiten(adv, answer_token_counts(batch) if opts.whiten == "tokens" else None)
    diag = {
        "episode_adv": np.zeros_like(adv),
        "step_adv": adv,
        "anchor_group_size": segment_sizes(batch.group_id),
        "value": v,
        "td_error": delta,
    }
    ev = explained_variance(v, returns) if batch.n_rows >= 2 else np.nan
    stats = {**group_stats(batch), "value_explained_variance": ev}
    return CreditResult("ppo", adv, returns, diag, stats)

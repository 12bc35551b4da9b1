"""HCAPO's hindsight re-scoring (needs the model, so it lives beside the trainer, not in the pure credit module).

For step t of trajectory i, the step's prompt is extended by the trajectory's final observation o_{T_i} and the step's
own answer y_t is re-scored:

    log pi_H(a_t) = (1/|y_t|) sum_k log softmax(z_k / T_H)[y_{t,k}],   T_H = 5     (per-token mean, temperature 5)

The array (one value per row of `RolloutBatch.from_trajectories`) is passed as `hindsight_logprob` to
`compute_advantages("hcapo", ...)` (its registry spec declares `policy_scores`), which forms
rho_t = clip(pi_H(a_t) / mean_k pi_H(a_k), 0.8, 1.2).
"""

from __future__ import annotations

import numpy as np
import torch

from scpo.policy import PolicyLike
from scpo.train.logprobs import response_logprobs

__all__ = ["HINDSIGHT_TEMPLATE", "hindsight_prompt", "hindsight_logprob"]

HINDSIGHT_TEMPLATE = "{prompt}\n[Hindsight] This episode ended with the observation: {final_observation}"


def hindsight_prompt(prompt: str, final_observation: str) -> str:
    return HINDSIGHT_TEMPLATE.format(prompt=prompt, final_observation=final_observation)


def hindsight_logprob(
    policy: PolicyLike, trajectories, *, temperature: float = 5.0, max_prompt_tokens: int = 768, batch_size: int = 64
) -> np.ndarray:
    """Mean answer-token log-prob at `temperature` under the hindsight prompt, one float per step row (0 for an empty
    answer)."""
    rows = [
        (hindsight_prompt(s.prompt, traj.steps[-1].next_observation), list(s.extras.get("response_ids", [])))
        for traj in trajectories
        for s in traj.steps
    ]
    out = np.zeros(len(rows), dtype=np.float64)
    keep = [i for i, (_, r) in enumerate(rows) if r]
    if not keep:
        return out
    prompt_ids = policy.encode_prompts([rows[i][0] for i in keep], max_prompt_tokens)
    pad = policy.tokenizer.pad_token_id
    model = policy.model
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, len(keep), batch_size):
            sel = list(range(start, min(start + batch_size, len(keep))))
            logp, mask, _ = response_logprobs(
                model, [prompt_ids[j] for j in sel], [rows[keep[j]][1] for j in sel], pad, temperature=temperature
            )
            means = (logp.sum(-1) / mask.sum(-1).clamp(min=1.0)).cpu().numpy()
            out[[keep[j] for j in sel]] = means
    model.train(was_training)
    return out

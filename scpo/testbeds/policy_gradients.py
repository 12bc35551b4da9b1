"""The policy-gradient vectors that gradient fidelity compares (docs/algorithms.md, "Gradient fidelity"), flat over
the policy's trainable parameters in float64:

- `success_gradient` / `task_gradients`: the exact gradient of success, grad J = (1/K) sum_k sum_t sum_n d_t(n) sum_a
  grad pi(a | n) Q_t(n, a) (the policy-gradient theorem for a finite horizon, Sutton et al. 2000), as the gradient of
  the surrogate S(theta) = (1/K) sum_n d(n) sum_a pi_theta(a | n) Q(n, a) with d and Q from the dynamic programme
  (`scpo.rollout.exact_dp`) held fixed; every distinct input once, in chunks, each chunk's backward accumulated;
- `update_gradients`: an estimator's update, the ascent direction of the trainer's policy-gradient loss
  (`scpo.train.loss.policy_loss`: its clipped surrogate at ratio 1, no KL or entropy term) over a whole batch as one
  minibatch, one unit per admissible choice (`scpo.train.update.step_logprobs`, the trainer's log pi(k | x) at the
  rollout temperature): g = (1/N) sum_i A_i grad log pi(a_i | x_i).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from scpo.batch import RolloutBatch
from scpo.rollout.exact_values import SCORE_CHUNK, ExactTable, choice_inputs, choice_log_probs
from scpo.train.loss import policy_loss
from scpo.train.update import samples_from_batch, step_logprobs

__all__ = ["trainable", "success_gradient", "task_gradients", "update_gradients", "cosine"]


def trainable(model) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def _flat(params: Sequence[torch.Tensor], grads: Sequence[torch.Tensor | None]) -> np.ndarray:
    return (
        torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in zip(params, grads)])
        .double()
        .cpu()
        .numpy()
    )


def success_gradient(
    table: ExactTable,
    log_probs_of: Callable[[Sequence[int]], torch.Tensor],
    params: Sequence[torch.Tensor],
    node_row: np.ndarray | None = None,
    tasks: Sequence[int] | None = None,
    chunk: int = SCORE_CHUNK,
) -> np.ndarray:
    """grad J (flat over `params`, float64) with J the mean of V_0(root) over `tasks` (task indices of the table's
    graph, repeats counted; default every task), by the surrogate of the module docstring. `log_probs_of(rows)` gives
    log pi [len(rows), K] with gradients for distinct inputs `rows`; `node_row` maps each node to its row (default:
    a row per node)."""
    graph = table.graph
    node_row = np.arange(graph.n_nodes) if node_row is None else np.asarray(node_row)
    tasks = list(range(len(graph.tasks))) if tasks is None else list(tasks)
    weight = np.bincount(tasks, minlength=len(graph.tasks))[graph.task] / len(tasks) * table.d  # per node
    used = weight[graph.source] * table.q
    rows = np.unique(node_row[graph.source[used != 0]])  # the inputs whose probabilities J depends on
    width = table.log_probs.shape[1]
    w = np.zeros((int(node_row.max()) + 1, width))
    np.add.at(w, (node_row[graph.source], graph.action), used)
    for p in params:
        p.grad = None
    for start in range(0, len(rows), chunk):
        part = rows[start : start + chunk]
        log_pi = log_probs_of(part)
        target = torch.as_tensor(w[part], dtype=log_pi.dtype, device=log_pi.device)
        (log_pi.exp() * target).sum().backward()
    grad = _flat(params, [p.grad for p in params])
    for p in params:
        p.grad = None
    return grad


def task_gradients(
    policy, table: ExactTable, max_prompt_tokens: int = 1024, prompt_overflow: str = "truncate_left", progress=True
) -> np.ndarray:
    """[n_tasks, n_params]: grad V_0(root_k) of each task k of the table (the policy's trainable parameters)."""
    inputs = choice_inputs(policy, table.graph, max_prompt_tokens, prompt_overflow)
    model, params = policy.model, trainable(policy.model)
    was_training = model.training
    model.eval()
    try:
        return np.stack(
            [
                success_gradient(
                    table,
                    lambda rows: choice_log_probs(model, inputs, rows, table.temperature),
                    params,
                    inputs.node_row,
                    tasks=[k],
                )
                for k in tqdm(range(len(table.graph.tasks)), desc="exact gradients", disable=not progress, leave=False)
            ]
        )
    finally:
        model.train(was_training)


def update_gradients(
    model, batch: RolloutBatch, advantages: dict[str, np.ndarray], pad_id: int, temperature: float = 1.0
) -> dict[str, np.ndarray]:
    """{method: g} with g the ascent direction of the trainer's policy-gradient loss at ratio 1 on the whole batch for
    that method's advantages (module docstring), flat over the model's trainable parameters (float64)."""
    params = trainable(model)
    order = list(advantages)
    samples = samples_from_batch(batch, np.zeros(batch.n_rows))
    keep = [i for i, r in enumerate(batch.response_ids) if r]  # samples_from_batch skips rows without an answer
    was_training = model.training
    model.eval()
    try:
        logp, mask, _ = step_logprobs(model, samples, pad_id, temperature)
        out = {}
        for k, m in enumerate(order):
            adv = torch.as_tensor(np.asarray(advantages[m])[keep], dtype=logp.dtype, device=logp.device)
            loss, _ = policy_loss(
                logp, logp.detach(), None, adv, mask, None, clip_ratio=0.2, kl_coef=0.0, entropy_coef=0.0
            )
            grads = torch.autograd.grad(loss, params, retain_graph=k < len(order) - 1, allow_unused=True)
            out[m] = -_flat(params, grads)
        return out
    finally:
        model.train(was_training)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """cos(a, b); NaN when either is the zero vector (an update of all-zero advantages has no direction)."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(a @ b / (na * nb)) if na > 0 and nb > 0 else float("nan")

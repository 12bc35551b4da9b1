"""One policy update from a collected batch: old / reference log-probs (no grad), then `ppo_epochs` passes over shuffled
minibatches of steps, each an optimizer step on `scpo.train.loss.policy_loss`.

What the ratio, KL and entropy are computed over follows how the answer was sampled:
- free generation: every answer token, log pi(y_k | x, y_<k); a step's advantage covers all of its tokens;
- admissible choice (`rollout.action_choice: admissible`, with `train.ratio_over: admissible`): the choice itself,
  log pi(k | x) = log softmax_k(s / T)[k] over the step's candidate answers (`scpo.policy.scoring`), one unit per step.
  This is the distribution the sampler drew from, so the importance ratio and its clipping bound the change in
  behaviour; token log-probs would also move mass among tokens no candidate differs in (`<action>`, EOS), which costs KL
  without changing any choice. `train.ratio_over: tokens` keeps the token-level objective for such steps.
Token-mean over the minibatch: a choice counts as one unit, a generated answer as its number of tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from tqdm.auto import tqdm

from scpo.batch import RolloutBatch
from scpo.policy.logprobs import bucketed_batches, response_logprobs
from scpo.policy.packed import packed_response_logprobs
from scpo.policy.padding import pad_rows
from scpo.policy.scoring import candidate_scores, choice_log_distribution
from scpo.train.loss import policy_loss

__all__ = [
    "StepSample",
    "samples_from_batch",
    "update_samples",
    "make_optimizer",
    "step_logprobs",
    "batched_logprobs",
    "old_logprobs",
    "minibatches",
    "reference_logprobs",
    "ppo_update",
]


@dataclass
class StepSample:
    """One step as the trainer sees it: token ids of the prompt it saw and of its answer, and its advantage.

    `candidates` (admissible choice only) are the ids of every answer the sampler chose among; `response_ids` is one.
    `sampler_logprobs` (vLLM only) are the sampler's log-probs of the answer tokens (`train.rollout_correction`).
    """

    prompt_ids: list[int]
    response_ids: list[int]
    advantage: float
    candidates: list[list[int]] | None = None
    old_logprob: float | None = None  # the sampler's log pi(k | x) of this choice, when it recorded one
    sampler_logprobs: list[float] | None = None

    @property
    def choice(self) -> int:
        return self.candidates.index(self.response_ids) if self.candidates is not None else -1


def samples_from_batch(batch: RolloutBatch, advantages: np.ndarray) -> list[StepSample]:
    """Each row's token ids (the batch's policy columns) with its advantage, in row order; rows without an answer are
    skipped."""
    if not batch.has_tokens:
        raise ValueError("the batch carries no token ids (prompt_ids / response_ids): rollouts of a policy are needed")
    if len(advantages) != batch.n_rows:
        raise ValueError(f"{batch.n_rows} rows but {len(advantages)} advantages")
    none = [None] * batch.n_rows
    cands = batch.candidate_ids if batch.candidate_ids is not None else none
    sampled = batch.choice_logprob if batch.choice_logprob is not None else none
    tokens = batch.sampler_logprobs if batch.sampler_logprobs is not None else none
    return [
        StepSample(
            list(p),
            list(r),
            float(a),
            [list(x) for x in c] if c is not None else None,
            float(lp) if lp is not None and c is not None else None,
            [float(x) for x in tl] if tl is not None else None,
        )
        for p, r, c, lp, tl, a in zip(batch.prompt_ids, batch.response_ids, cands, sampled, tokens, advantages)
        if r
    ]


def update_samples(
    batch: RolloutBatch, advantages: np.ndarray, skip_zero_advantage: bool
) -> tuple[list[StepSample], int]:
    """-> (the steps the update trains on, the number of steps with an answer). `skip_zero_advantage` leaves out steps
    whose advantage is exactly 0 (every step of a group whose rollouts all got the same reward); kept (verl-agent's
    setting), they carry no policy-gradient signal but count in the token-mean and carry KL and entropy terms."""
    samples = samples_from_batch(batch, advantages)
    n_steps = len(samples)
    if skip_zero_advantage:
        samples = [s for s in samples if s.advantage != 0.0]
    return samples, n_steps


def make_optimizer(model, train_cfg) -> torch.optim.AdamW:
    """AdamW over the trainable parameters with `train.lr` and decoupled `train.weight_decay` (verl: 0.01)."""
    return torch.optim.AdamW(
        [p for p in model.parameters() if p.requires_grad], lr=train_cfg.lr, weight_decay=train_cfg.weight_decay
    )


def step_logprobs(
    model,
    samples: Sequence[StepSample],
    pad_id: int,
    temperature: float = 1.0,
    with_entropy: bool = False,
    packed: bool = False,
):
    """-> (logp [B, W], mask [B, W], entropy [B, W] or None): a choice step fills column 0 with log pi(k | x) (and the
    entropy of the choice distribution), a generated step its answer tokens, computed over padded rows or, with
    `packed`, over one row holding every generated step with no padding (`scpo.policy.packed`; the same values).
    Gradients flow unless under no_grad."""
    device = next(model.parameters()).device
    chosen = [i for i, s in enumerate(samples) if s.candidates is not None]
    generated = [i for i, s in enumerate(samples) if s.candidates is None]
    parts = []
    if generated:
        prompts = [samples[i].prompt_ids for i in generated]
        answers = [samples[i].response_ids for i in generated]
        if packed:
            values = packed_response_logprobs(model, prompts, answers, temperature, with_entropy=with_entropy)
        else:
            values = response_logprobs(model, prompts, answers, pad_id, temperature, with_entropy=with_entropy)
        parts.append((generated, *values))
    if chosen:
        log_pi = choice_log_distribution(
            candidate_scores(
                model, [samples[i].prompt_ids for i in chosen], [samples[i].candidates for i in chosen], pad_id
            ),
            temperature,
        )
        picks = torch.tensor([samples[i].choice for i in chosen], device=device)
        logp = log_pi.gather(1, picks[:, None])
        entropy = None
        if with_entropy:
            probs = log_pi.exp()
            entropy = -(probs * log_pi.masked_fill(probs == 0, 0.0)).sum(-1, keepdim=True)
        parts.append((chosen, logp, torch.ones_like(logp), entropy))
    width = max(p[1].shape[1] for p in parts)
    inverse = torch.argsort(torch.tensor([r for p in parts for r in p[0]], device=device))  # back to sample order

    def rows_in_order(col: int) -> torch.Tensor:  # the parts' column `col`, right-padded to `width`, rows reordered
        return torch.cat([torch.nn.functional.pad(p[col], (0, width - p[col].shape[1])) for p in parts])[inverse]

    return rows_in_order(1), rows_in_order(2), rows_in_order(3) if with_entropy else None


def batched_logprobs(
    model,
    samples: Sequence[StepSample],
    pad_id: int,
    batch_size: int,
    temperature: float = 1.0,
    packed: bool = False,
) -> list[torch.Tensor]:
    """Per-sample 1-D tensors of `step_logprobs` under `model` (no grad: a choice step gives one value, a generated one
    a value per answer token), returned in the order of `samples`: the choice steps in one call (the scorer chunks
    them by length itself), the generated ones in length-sorted minibatches of `batch_size` (each one packed row with
    `packed`)."""
    out: list[torch.Tensor | None] = [None] * len(samples)
    chosen = [i for i, s in enumerate(samples) if s.candidates is not None]
    generated = sorted(
        (i for i, s in enumerate(samples) if s.candidates is None),
        key=lambda i: len(samples[i].prompt_ids) + len(samples[i].response_ids),
    )
    calls = ([chosen] if chosen else []) + [generated[k : k + batch_size] for k in range(0, len(generated), batch_size)]
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for idx in calls:
            logp, mask, _ = step_logprobs(model, [samples[i] for i in idx], pad_id, temperature, packed=packed)
            for row, i in enumerate(idx):
                out[i] = logp[row, : int(mask[row].sum())].cpu()
    model.train(was_training)
    return out  # type: ignore[return-value]


def old_logprobs(
    model,
    samples: Sequence[StepSample],
    pad_id: int,
    batch_size: int,
    temperature: float,
    source: str = "sampler",
    packed: bool = False,
) -> list[torch.Tensor]:
    """The PPO ratio's old log-probs, per sample as `batched_logprobs` gives them: with `source="sampler"` a choice step
    that carries the sampler's log pi(k | x) (`StepSample.old_logprob`) reads it, every other sample is recomputed
    under `model` before any update."""
    if source not in ("sampler", "recompute"):
        raise ValueError(f"train.old_logprobs={source!r} is not one of 'sampler', 'recompute'")
    reuse = [source == "sampler" and s.candidates is not None and s.old_logprob is not None for s in samples]
    todo = [i for i, r in enumerate(reuse) if not r]
    todo_samples = [samples[i] for i in todo]
    computed = batched_logprobs(model, todo_samples, pad_id, batch_size, temperature, packed) if todo else []
    out: list[torch.Tensor | None] = [
        torch.tensor([s.old_logprob], dtype=torch.float32) if r else None for s, r in zip(samples, reuse)
    ]
    for i, value in zip(todo, computed):
        out[i] = value
    return out  # type: ignore[return-value]


def reference_logprobs(
    model,
    ref_model,
    samples: Sequence[StepSample],
    pad_id: int,
    batch_size: int,
    temperature: float = 1.0,
    packed: bool = False,
) -> list[torch.Tensor]:
    """`batched_logprobs` under the KL reference: `ref_model`, or, when it is the trained peft model itself (LoRA),
    that model with its adapters disabled (peft's `disable_adapter()`): the frozen base, with no second model."""
    if ref_model is model:
        if not hasattr(model, "disable_adapter"):
            raise ValueError("the KL reference is the trained model itself, which has no adapters to disable")
        with model.disable_adapter():
            return batched_logprobs(model, samples, pad_id, batch_size, temperature, packed)
    return batched_logprobs(ref_model, samples, pad_id, batch_size, temperature, packed)


def _padded(rows: Sequence[torch.Tensor], width: int) -> torch.Tensor:
    """Per-sample 1-D values -> float32 [B, width], zeros after each row."""
    return pad_rows([r.float() for r in rows], 0.0, width)


def _loss_units(sample: StepSample) -> int:
    """A step's weight in the token-mean: 1 for an admissible choice, its answer's tokens for a generated answer."""
    return 1 if sample.candidates is not None else len(sample.response_ids)


def minibatches(
    lengths: Sequence[int], batch_size: int, order: str = "length_buckets", generator: torch.Generator | None = None
) -> list[list[int]]:
    """Index minibatches of one epoch: `length_buckets` (shuffled, similar lengths together: `bucketed_batches`) or
    `collected` (consecutive indices in collection order, the last one shorter: verl's `batch.split` on one GPU)."""
    if order == "length_buckets":
        return bucketed_batches(lengths, batch_size, generator)
    if order == "collected":
        return [list(range(s, min(s + batch_size, len(lengths)))) for s in range(0, len(lengths), batch_size)]
    raise ValueError(f"minibatch order {order!r} is not one of 'length_buckets', 'collected'")


def ppo_update(
    model,
    ref_model,
    optimizer,
    samples: Sequence[StepSample],
    *,
    pad_id: int,
    train_cfg,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    progress: bool = True,
) -> dict[str, float]:
    """Clipped-ratio updates (dual clip with `train.dual_clip_c`) with low-variance KL to `ref_model` (skipped when None
    or kl_coef = 0; `model` itself: its LoRA adapters disabled, `reference_logprobs`) and an entropy bonus.

    Each minibatch (`train.minibatch_size` steps, grouped as `train.minibatch_order` says) is one optimizer step; its
    forward / backward passes take `train.micro_batch_size` steps at a time and accumulate the gradient, which equals
    the whole minibatch's. `train.sequence_layout` says how a pass lays out its generated steps: `padded` rows or one
    `packed` row with no padding (`scpo.policy.packed`; the old and reference log-probs too).
    Returns the token-weighted means over minibatches of pg, kl, entropy, clipfrac, approx_kl, plus grad_norm and
    the number of optimizer steps (a progress bar counts them).
    """
    if not samples:
        return {"n_updates": 0.0}
    if train_cfg.ratio_over == "tokens":
        samples = [replace(s, candidates=None, old_logprob=None) for s in samples]
    bs = train_cfg.minibatch_size
    micro = train_cfg.micro_batch_size or bs  # steps per forward / backward pass
    correction = train_cfg.rollout_correction
    if correction == "tis":
        missing = sum(s.sampler_logprobs is None or s.candidates is not None for s in samples)
        if missing:
            raise ValueError(
                f"train.rollout_correction=tis needs the sampler's token log-probs, which {missing} of "
                f"{len(samples)} steps lack (rollout.engine=vllm gives them; admissible choices have none)"
            )
    packed = train_cfg.sequence_layout == "packed"
    old = old_logprobs(model, samples, pad_id, micro, temperature, train_cfg.old_logprobs, packed)
    use_ref = ref_model is not None and train_cfg.kl_coef > 0
    ref = reference_logprobs(model, ref_model, samples, pad_id, micro, temperature, packed) if use_ref else None
    device = next(model.parameters()).device
    totals: dict[str, float] = {}
    weight = 0.0
    n_updates = 0
    grad_norms = []
    model.train()
    # either minibatch order cuts an epoch into ceil(n / bs) minibatches (length buckets: pools of 8 full minibatches)
    bar = tqdm(
        total=train_cfg.ppo_epochs * -(-len(samples) // bs),
        desc="update",
        unit="step",
        leave=False,
        disable=not progress,
    )
    for _ in range(train_cfg.ppo_epochs):
        lengths = [len(s.prompt_ids) + len(s.response_ids) for s in samples]
        for idx in minibatches(lengths, bs, train_cfg.minibatch_order, generator):
            units = sum(_loss_units(samples[i]) for i in idx)
            optimizer.zero_grad(set_to_none=True)
            for m in range(0, len(idx), micro):  # gradient accumulation: each micro-batch's token-mean, weighted by
                part = idx[m : m + micro]  # its share of the minibatch's units, sums to the minibatch's mean
                chunk = [samples[i] for i in part]
                logp, mask, entropy = step_logprobs(
                    model, chunk, pad_id, temperature, with_entropy=train_cfg.entropy_coef > 0, packed=packed
                )
                width = logp.shape[1]
                old_b = _padded([old[i] for i in part], width).to(device)
                ref_b = _padded([ref[i] for i in part], width).to(device) if ref is not None else None
                adv = torch.tensor([s.advantage for s in chunk], dtype=torch.float32, device=device)
                is_weight = None
                if correction == "tis":  # w_k = min(exp(logp_old - logp_sampler), C): scpo.train.loss
                    sampler_b = _padded([torch.tensor(s.sampler_logprobs) for s in chunk], width).to(device)
                    is_weight = torch.exp(old_b - sampler_b).clamp(max=train_cfg.rollout_correction_cap) * mask
                loss, stats = policy_loss(
                    logp,
                    old_b,
                    ref_b,
                    adv,
                    mask,
                    entropy,
                    clip_ratio=train_cfg.clip_ratio,
                    kl_coef=train_cfg.kl_coef,
                    entropy_coef=train_cfg.entropy_coef,
                    dual_clip_c=train_cfg.dual_clip_c,
                    is_weight=is_weight,
                )
                if is_weight is not None:
                    stats["rollout_is_weight"] = float((is_weight * mask).sum() / mask.sum().clamp(min=1.0))
                w = float(mask.sum())
                (loss * (w / units)).backward()
                weight += w
                for k, v in stats.items():
                    totals[k] = totals.get(k, 0.0) + v * w
            grad_norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), train_cfg.max_grad_norm)))
            optimizer.step()
            n_updates += 1
            bar.update(1)
    bar.refresh()  # draw the final count (updates within tqdm's refresh interval are not drawn)
    bar.close()
    out = {k: v / max(weight, 1.0) for k, v in totals.items()}
    out["grad_norm"] = float(np.mean(grad_norms))
    out["n_updates"] = float(n_updates)
    return out

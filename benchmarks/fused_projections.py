"""The tiny policy's decoder layers with fused projections against the model's own layers, side by side in one
process: the RL update's reference pass (no grad) and its forward and backward pass over the same steps.

    python benchmarks/fused_projections.py [--env alfworld] [--steps 192] [--rounds 5]
    env $(python -m scpo.numerics env) python benchmarks/fused_projections.py    # under the pipeline's pin
    python benchmarks/fused_projections.py --quick    # a corridor run's steps, one round

Fused, per layer (transformers' Llama modules, their forwards swapped while the fused side runs):
- one product for the queries, the keys, the values and the rotated-half queries and keys: rotate_half(W x) =
  (P W) x for the signed permutation P, so rope is q cos + (P W_q x) sin, with no slicing, negation or concatenation;
- one product for the MLP's gate and up projections;
- torch's `rms_norm` for the norms.
The last layer at the scored positions (`scpo.policy.last_layer`) keeps its own code on both sides. The steps are the
first `--steps` admissible-choice steps of the pipeline's GRPO run's second saved iteration
(`runs/<env>/grpo/seed0/rollouts/iter_0001.parquet`), scored by its warm start (`runs/<env>/sft/seed0`), in
minibatches of 64, one thread; with `--quick` or without those runs, a corridor run's (`_pipeline_run.py`). Printed:
ms per step of the reference pass, the forward and the backward pass (medians over rounds, the two sides alternating),
their ratio, whether the fused side's log-probs equal the model's bit for bit, and the relative difference of the
gradients.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F
import transformers.models.llama.modeling_llama as llama
from _pipeline_run import warm_start_and_rollouts

from scpo.train.update import batched_logprobs, samples_from_batch, step_logprobs


def rotated_half_rows(w: torch.Tensor, heads: int) -> torch.Tensor:
    """P W: the rows of W in the order and sign of rotate_half applied to W x, per head."""
    d = w.shape[0] // heads
    v = w.view(heads, d, -1)
    return torch.cat([-v[:, d // 2 :], v[:, : d // 2]], 1).reshape(w.shape)


def fused_attention(self, hidden_states, position_embeddings=None, attention_mask=None, cache=None, **kwargs):
    b, t, _ = hidden_states.shape
    heads, d = self.config.num_attention_heads, self.head_dim
    wq, wk = self.q_proj.weight, self.k_proj.weight
    w = torch.cat([wq, rotated_half_rows(wq, heads), wk, rotated_half_rows(wk, heads), self.v_proj.weight])
    y = F.linear(hidden_states, w).view(b, t, 5, heads, d).permute(2, 0, 3, 1, 4).contiguous()
    cos, sin = (x[:, None] for x in position_embeddings)
    q, k, v = y[0] * cos + y[1] * sin, y[2] * cos + y[3] * sin, y[4]
    if cache is not None:
        k, v = cache.update(k, v, self.layer_idx)
    causal = attention_mask is None and t > 1
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask, is_causal=causal, scale=self.scaling)
    return self.o_proj(out.transpose(1, 2).reshape(b, t, -1)), None


def fused_mlp(self, x):
    gate, up = F.linear(x, torch.cat([self.gate_proj.weight, self.up_proj.weight])).chunk(2, -1)
    return self.down_proj(F.silu(gate) * up)


def fused_norm(self, x):
    return F.rms_norm(x, (x.shape[-1],), self.weight, self.variance_epsilon)


@contextlib.contextmanager
def fused_forwards():
    swaps = {
        llama.LlamaAttention: fused_attention,
        llama.LlamaMLP: fused_mlp,
        llama.LlamaRMSNorm: fused_norm,
    }
    own = {cls: cls.forward for cls in swaps}
    try:
        for cls, fn in swaps.items():
            cls.forward = fn
        yield
    finally:
        for cls, fn in own.items():
            cls.forward = fn


def one_round(model, samples, pad_id) -> dict:
    """ms per step of the reference pass, forward and backward; the log-probs and the gradient."""
    n = len(samples)
    start = time.perf_counter()
    batched_logprobs(model, samples, pad_id, 64)
    ref_ms = (time.perf_counter() - start) * 1e3 / n
    fwd = bwd = 0.0
    logps = []
    model.zero_grad(set_to_none=True)
    for k in range(0, n, 64):
        t0 = time.perf_counter()
        logp, mask, _ = step_logprobs(model, samples[k : k + 64], pad_id, with_entropy=True)
        t1 = time.perf_counter()
        (logp * mask).sum().backward()
        fwd, bwd = fwd + t1 - t0, bwd + time.perf_counter() - t1
        logps.append(logp.detach())
    grad = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    return {"ref": ref_ms, "fwd": fwd * 1e3 / n, "bwd": bwd * 1e3 / n, "logp": torch.cat(logps), "grad": grad}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="alfworld", choices=("alfworld", "webshop"))
    parser.add_argument("--steps", type=int, default=192)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a corridor run's steps, one round")
    args = parser.parse_args()
    if args.quick:
        args.rounds = 1
    torch.set_num_threads(1)
    policy, batch = warm_start_and_rollouts(args.env, iteration=1, quick=args.quick)
    samples = [s for s in samples_from_batch(batch, np.zeros(batch.n_rows)) if s.candidates is not None]
    samples = samples[: args.steps]
    model, pad_id = policy.model, policy.tokenizer.pad_token_id
    sides = {"model's layers": contextlib.nullcontext, "fused": fused_forwards}
    rounds = {name: [] for name in sides}
    for r in range(args.rounds + 1):  # round 0 warms both sides up and is not timed
        for name in list(sides)[:: 1 if r % 2 else -1]:
            with sides[name]():
                out = one_round(model, samples, pad_id)
            if r:
                rounds[name].append(out)
    print(f"{batch.env or args.env}: {len(samples)} steps, minibatches of 64, {args.rounds} rounds, one thread")
    med = {}
    for name, outs in rounds.items():
        med[name] = {k: statistics.median(o[k] for o in outs) for k in ("ref", "fwd", "bwd")}
        total = sum(med[name].values())
        print(
            f"{name:15s} ms/step: reference {med[name]['ref']:.2f}, forward {med[name]['fwd']:.2f}, "
            f"backward {med[name]['bwd']:.2f}, in all {total:.2f}"
        )
    base, fused = rounds["model's layers"][0], rounds["fused"][0]
    ratio = sum(med["fused"].values()) / sum(med["model's layers"].values())
    same = torch.equal(base["logp"], fused["logp"])
    print(
        f"fused / model's layers: {ratio:.3f}; log-probs equal bit for bit: {same}; "
        f"gradient relative difference {((fused['grad'] - base['grad']).norm() / base['grad'].norm()).item():.1e}"
    )


if __name__ == "__main__":
    main()

"""The RL update's forward and backward pass (`scpo.train.update.step_logprobs`: the candidate scorer, with grad) with
the decoder layers' modules compiled by `torch.compile` (inductor, dynamic shapes) against the same model eager, side
by side in one process.

    env $(python -m scpo.numerics env) python benchmarks/torch_compile.py [--env alfworld] [--rows 64] [--rounds 5]
    python benchmarks/torch_compile.py --quick    # a corridor run, minibatches of 8 steps, one round, eager backend

`--quick` compiles with torch.compile's "eager" backend (Dynamo traces the modules, no kernels are generated: inductor
alone takes minutes on 2 cores), so it runs every step of the benchmark but its ratio says nothing about inductor.

The minibatches are the first `--rows`-step slices of a saved rollout file of the pipeline's GRPO run
(`runs/<env>/grpo/seed0/rollouts/iter_0000.parquet`), scored by that run's warm start (`runs/<env>/sft/seed0`); with
`--quick` or without those runs, a corridor run's (`_pipeline_run.py`). One thread. The compiled copy compiles each
decoder layer's attention, MLP and norms and the final norm (`nn.Module.compile`), so the scorer's own code (the prompt
pass, the last layer at the scored positions, the candidate prefix tree) calls compiled modules. Each round runs every
minibatch through both copies in turn (the order alternating); printed: the first compiled call's seconds
(compilation), the median ms per minibatch of each and their ratio (compiled / eager), and the largest difference of
the log-probs.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import numpy as np
import torch
from _pipeline_run import warm_start_and_rollouts

from scpo.train.update import samples_from_batch, step_logprobs


def compile_layers(model, backend: str = "inductor") -> None:
    """Compile every decoder layer's submodules and the final norm in place (their calls go through `backend`)."""
    decoder = model.get_decoder()
    for layer in decoder.layers:
        for module in (layer.self_attn, layer.mlp, layer.input_layernorm, layer.post_attention_layernorm):
            module.compile(dynamic=True, backend=backend)
    decoder.norm.compile(dynamic=True, backend=backend)


def pass_ms(model, samples, pad_id) -> tuple[float, torch.Tensor]:
    """One forward and backward pass over `samples`: (ms, the log-probs)."""
    model.zero_grad(set_to_none=True)
    start = time.perf_counter()
    logp, mask, _ = step_logprobs(model, samples, pad_id)
    (logp * mask).sum().backward()
    return (time.perf_counter() - start) * 1e3, logp.detach()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="alfworld", choices=("alfworld", "webshop"))
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--quick", action="store_true", help="a corridor run, minibatches of 8 steps, one round, the eager backend"
    )
    args = parser.parse_args()
    if args.quick:
        args.rows, args.rounds = 8, 1
    torch.set_num_threads(1)
    policy, batch = warm_start_and_rollouts(args.env, iteration=0, quick=args.quick)
    samples = samples_from_batch(batch, np.zeros(batch.n_rows))
    if len(samples) < args.rows:  # the corridor run that stands in for missing pipeline runs is small
        print(f"{len(samples)} steps in the batch, fewer than --rows {args.rows}: one minibatch of {len(samples)}")
        args.rows = len(samples)
    minibatches = [samples[k : k + args.rows] for k in range(0, len(samples) - args.rows + 1, args.rows)]
    pad_id = policy.tokenizer.pad_token_id
    eager = policy.model
    eager.train()
    compiled = copy.deepcopy(eager)
    backend = "eager" if args.quick else "inductor"
    compile_layers(compiled, backend)
    models = {"eager": eager, "compiled": compiled}
    start = time.perf_counter()
    pass_ms(compiled, minibatches[0], pad_id)
    print(
        f"{batch.env or args.env}: {len(minibatches)} minibatches of {args.rows} steps; torch.compile backend "
        f"{backend}; first compiled call (compilation) {time.perf_counter() - start:.1f} s"
    )
    for mb in minibatches:  # every shape once, before timing
        pass_ms(compiled, mb, pad_id)
        pass_ms(eager, mb, pad_id)
    times = {"eager": [], "compiled": []}
    max_diff = 0.0
    for r in range(args.rounds):
        order = ("eager", "compiled") if r % 2 == 0 else ("compiled", "eager")
        round_ms = {"eager": 0.0, "compiled": 0.0}
        for mb in minibatches:
            logp = {}
            for name in order:
                ms, logp[name] = pass_ms(models[name], mb, pad_id)
                round_ms[name] += ms
            max_diff = max(max_diff, (logp["eager"] - logp["compiled"]).abs().max().item())
        for name in times:
            times[name].append(round_ms[name] / len(minibatches))
    eager_ms, compiled_ms = statistics.median(times["eager"]), statistics.median(times["compiled"])
    print(
        f"eager {eager_ms:.1f} ms, compiled {compiled_ms:.1f} ms per minibatch (median of {args.rounds} rounds); "
        f"ratio {compiled_ms / eager_ms:.3f}; largest log-prob difference {max_diff:.1e}"
    )


if __name__ == "__main__":
    main()

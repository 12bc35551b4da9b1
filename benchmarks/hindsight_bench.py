"""HCAPO's hindsight scores (`scpo.policy.hindsight.score_answers`) against the full forward passes they replace, run
side by side in one process: seconds per pass over the same rows, the ratio, and the largest difference of the values.

    python benchmarks/hindsight_bench.py [--model DIR] [--rollouts DIR] [--repeats 3] [--batch-size 64]
    python benchmarks/hindsight_bench.py --quick    # 16 synthetic rows, one repeat (seconds)

The rows are HCAPO's: each step's prompt extended by its trajectory's final observation, and the step's answer ids
(`hindsight_logprob`). By default the model is the pipeline's ALFWorld warm start (`runs/alfworld/sft/seed0`) and
the rows are the saved rollouts of its HCAPO run (`runs/alfworld/hcapo/seed0/rollouts/*.parquet`); without them
(a fresh clone before `make repro`), a freshly initialised model of the cpu profile's size scores synthetic rows of
ALFWorld's lengths (prompts of 250-400 tokens, answers of 4-12), said in the first line printed.

- `full`: one forward pass over prompt + answer per row, `batch_size` rows at a time, left-padded
  (`scpo.policy.logprobs.response_logprobs`, temperature applied to the logits), the mean of the answer's token
  log-probs;
- `scorer`: `score_answers`, each answer its prompt's one candidate of `candidate_scores` (per-token temperature; the
  prompt pass computes the last layer only where a token is predicted).

One torch thread (the cpu profile's). Runs alternate full / scorer, `--repeats` times; the figures are medians.
Measured (idle AMD EPYC Zen 4, 2 cores, at 4de47bc; the pipeline's ALFWorld warm start and the 707 rows of its HCAPO
run's three iterations, 3 repeats): see benchmarks/results/README.md, "HCAPO's hindsight scores".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scpo.errors import ModelNotFoundError  # noqa: E402
from scpo.policy.hindsight import hindsight_prompt, score_answers  # noqa: E402
from scpo.policy.logprobs import response_logprobs  # noqa: E402
from scpo.policy.profiles import resolve_model_dir  # noqa: E402

TEMPERATURE = 5.0  # HCAPO's T_H (credit.hcapo.temperature)
MAX_PROMPT_TOKENS = 768  # hindsight_logprob's default
ALFWORLD_WORDS = "go to open close take put from in on cabinet drawer countertop fridge sink apple mug knife 1 2 3"


def full_forward_means(policy, rows, batch_size: int) -> np.ndarray:
    """The tempered mean answer-token log-prob of each row from one plain forward pass over prompt + answer."""
    prompt_ids = policy.encode_prompts([p for p, _ in rows], MAX_PROMPT_TOKENS)
    out = np.zeros(len(rows))
    with torch.no_grad():
        for start in range(0, len(rows), batch_size):
            sel = range(start, min(start + batch_size, len(rows)))
            logp, mask, _ = response_logprobs(
                policy.model,
                [prompt_ids[j] for j in sel],
                [list(rows[j][1]) for j in sel],
                policy.tokenizer.pad_token_id,
                temperature=TEMPERATURE,
            )
            out[list(sel)] = (logp.sum(-1) / mask.sum(-1).clamp(min=1.0)).numpy()
    return out


def pipeline_rows(model_dir: Path, rollouts: Path):
    from scpo.batch import RolloutBatch
    from scpo.policy.profiles import load_policy

    policy = load_policy(model_dir)
    rows = []
    for path in sorted(rollouts.glob("*.parquet")):
        batch = RolloutBatch.read(path)
        finals = batch.final_observation()
        rows += [(hindsight_prompt(p, f), list(r)) for p, f, r in zip(batch.prompt, finals, batch.response_ids)]
    return policy, rows, f"{model_dir} on the rows of {rollouts} ({len(rows)} rows)"


def synthetic_rows(n: int = 400, seed: int = 0):
    from scpo.config import load_config
    from scpo.policy.profiles import Policy
    from scpo.policy.tiny import build_tiny_model, train_tokenizer

    cfg = load_config(REPO / "params.yaml", profile="cpu").policy
    rng = np.random.default_rng(seed)
    words = np.array(ALFWORLD_WORDS.split())
    text = lambda k: " ".join(rng.choice(words, size=k))  # noqa: E731
    rows_text = [(text(int(rng.integers(250, 400))), text(int(rng.integers(3, 11)))) for _ in range(n)]
    tok = train_tokenizer([p + " " + a for p, a in rows_text[:50]], vocab_size=cfg.tiny_vocab_size)
    model = build_tiny_model(tok, cfg.tiny_hidden_size, cfg.tiny_layers, cfg.tiny_heads, seed=seed).eval()
    policy = Policy(model=model, tokenizer=tok, profile="tiny", chat=False)
    rows = [(p, tok(a, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]) for p, a in rows_text]
    return policy, rows, f"a fresh cpu-profile model on {n} synthetic rows"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=Path, default=REPO / "runs" / "alfworld" / "sft" / "seed0")
    ap.add_argument("--rollouts", type=Path, default=REPO / "runs" / "alfworld" / "hcapo" / "seed0" / "rollouts")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="16 synthetic rows, one repeat, batches of 8")
    args = ap.parse_args()
    if args.quick:
        args.repeats, args.batch_size = 1, 8
    if args.repeats < 1:
        ap.error(f"--repeats {args.repeats}: give at least 1")
    torch.set_num_threads(1)
    try:
        found = resolve_model_dir(args.model) is not None
    except ModelNotFoundError:
        found = False
    if args.quick:
        policy, rows, source = synthetic_rows(n=16)
        source += " (--quick)"
    elif found and any(args.rollouts.glob("*.parquet")):
        policy, rows, source = pipeline_rows(args.model, args.rollouts)
    else:
        policy, rows, source = synthetic_rows()
        source += " (no pipeline run found)"
    policy.model.eval()
    print(f"hindsight scores of {source}, T = {TEMPERATURE}, one thread")
    times: dict[str, list[float]] = {"full": [], "scorer": []}
    values = {}
    for _ in range(args.repeats):
        t = time.perf_counter()
        values["full"] = full_forward_means(policy, rows, args.batch_size)
        times["full"].append(time.perf_counter() - t)
        t = time.perf_counter()
        values["scorer"] = score_answers(
            policy, rows, temperature=TEMPERATURE, max_prompt_tokens=MAX_PROMPT_TOKENS, batch_size=args.batch_size
        )
        times["scorer"].append(time.perf_counter() - t)
    full, scorer = (statistics.median(times[k]) for k in ("full", "scorer"))
    diff = float(np.abs(values["full"] - values["scorer"]).max())
    print(
        f"full forward passes {full:.2f} s, scorer {scorer:.2f} s per pass over {len(rows)} rows: "
        f"{full / scorer:.1f}x; largest difference of the values {diff:.1e}"
    )


if __name__ == "__main__":
    main()

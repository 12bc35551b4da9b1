"""Which tensor operation makes two machines' CPU results differ? Every ATen operation of a small, fixed computation
is recorded with a digest of its inputs and of its outputs; two machines' records, compared in order, name the
operations that got the same inputs and gave different outputs (the culprits) apart from those that only received a
difference from earlier ones.

    python checks/numerics_ops.py trace [--out FILE]   record the computation below (run it under the numerics pin:
                                                       env $(.venv/bin/python -m scpo.numerics env) ...)
    python checks/numerics_ops.py compare A.json B.json

The computation is the project's own CPU path, at the cpu profile's policy size (params.yaml policy.tiny_*: a 2-layer
Llama, 64 wide, 4 heads, vocabulary 2048, tied embeddings): the model's initialisation from seed 0; two SFT steps as
`scpo.train.sft.behaviour_cloning` takes them (`response_logprobs` on a padded batch, the answer-token NLL, backward,
gradient norm clipped at 1, AdamW); and one scoring pass over admissible candidates (`scpo.policy.scoring
.candidate_scores`, the prompt pass and the candidate prefix-tree pass the rollout and the update run). The inputs are
random token ids from a fixed generator. A digest is sha256 over a tensor's dtype, shape and bytes (first 16 hex
digits); an operation's input digest covers every tensor argument in order, so an operation that receives the same
tensors on both machines has the same input digest.

Why: `make repro` under the pin gives the same bytes on two kernel families of one CPU, not on an Intel and an AMD
CPU (docs/reproducibility.md); the first operation whose output differs for the same inputs is the library to fix.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# params.yaml policy.tiny_* (cpu profile) and shapes of the same order as the pipeline's: ALFWorld prompts ~300
# tokens, answers ~6, ~30 admissible commands of ~7 tokens
SIZE = {"vocab": 2048, "hidden": 64, "layers": 2, "heads": 4}
BATCH = {"rows": 8, "prompt": (40, 300), "answer": (3, 9), "candidates": 30, "candidate": (3, 9)}


def digest(tensor) -> str:
    """sha256 of a tensor's dtype, shape and bytes, first 16 hex digits."""
    import torch

    t = tensor.detach().contiguous().cpu()
    raw = t.view(torch.uint8) if t.dtype in (torch.bfloat16, torch.float16) else t
    h = hashlib.sha256(f"{t.dtype}{tuple(t.shape)}".encode())
    if t.numel():
        h.update(raw.numpy().tobytes())
    return h.hexdigest()[:16]


def _tensors(tree) -> list:
    import torch
    from torch.utils._pytree import tree_flatten

    return [x for x in tree_flatten(tree)[0] if isinstance(x, torch.Tensor)]


def _recorder(records: list[dict]):
    """A TorchDispatchMode appending {op, shapes, in, out} for every ATen operation run under it."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            inputs = _tensors((args, kwargs))
            in_digest = hashlib.sha256("".join(digest(t) for t in inputs).encode()).hexdigest()[:16]
            out = func(*args, **kwargs)
            outputs = _tensors(out)
            records.append(
                {
                    "op": str(func),
                    "shapes": [list(t.shape) for t in inputs],
                    "in": in_digest,
                    "out": hashlib.sha256("".join(digest(t) for t in outputs).encode()).hexdigest()[:16],
                }
            )
            return out

    return Recorder()


class _Vocabulary:
    """What `build_tiny_model` reads of a tokenizer: its length and three special ids."""

    pad_token_id, bos_token_id, eos_token_id = 0, 1, 2

    def __len__(self) -> int:
        return SIZE["vocab"]


def _batch(gen):
    import torch

    def ids(lo_hi):
        n = int(torch.randint(lo_hi[0], lo_hi[1] + 1, (1,), generator=gen))
        return torch.randint(4, SIZE["vocab"], (n,), generator=gen).tolist()

    prompts = [ids(BATCH["prompt"]) for _ in range(BATCH["rows"])]
    answers = [ids(BATCH["answer"]) for _ in range(BATCH["rows"])]
    candidates = [[ids(BATCH["candidate"]) for _ in range(BATCH["candidates"])] for _ in range(BATCH["rows"])]
    return prompts, answers, candidates


def trace() -> dict:
    """Run the computation of the module docstring under the recorder; the records and where they were made."""
    import torch

    from scpo.numerics import cpu_info
    from scpo.numerics import state as numerics_state
    from scpo.policy.logprobs import response_logprobs
    from scpo.policy.scoring import candidate_scores
    from scpo.policy.tiny import build_tiny_model

    torch.use_deterministic_algorithms(True)
    prompts, answers, candidates = _batch(torch.Generator().manual_seed(0))
    records: list[dict] = []
    phases: dict[str, int] = {}
    with _recorder(records):
        model = build_tiny_model(
            _Vocabulary(), hidden_size=SIZE["hidden"], layers=SIZE["layers"], heads=SIZE["heads"], seed=0
        )
        phases["init"] = len(records)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
        model.train()
        for _ in range(2):
            logp, mask, _ = response_logprobs(model, prompts, answers, _Vocabulary.pad_token_id)
            loss = -(logp * mask).sum() / mask.sum().clamp(min=1.0)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        phases["sft"] = len(records)
        model.eval()
        with torch.no_grad():
            scores = candidate_scores(model, prompts, candidates, _Vocabulary.pad_token_id)
        phases["scoring"] = len(records)
    cpu = cpu_info()
    return {
        "machine": {
            "cpu": cpu["model"] or "unknown",
            "vendor": cpu["vendor"],
            "arch": cpu["machine"],
            "simd": [f for f in cpu["flags"] if f.startswith(("avx", "fma", "amx", "sse4"))],
            "torch": torch.__version__,
        },
        "numerics": {k: v for k, v in numerics_state().items() if k != "threadpools"},
        "phases": phases,
        "final": {
            "weights": digest(torch.cat([p.detach().flatten() for p in model.parameters()])),
            "scores": digest(scores),
        },
        "records": records,
    }


def compare(a: dict, b: dict) -> dict:
    """Walk both records in order. culprits: operations with equal inputs and different outputs; first: the index of
    the first operation whose output differs (None: none differ); misaligned: the first index where the two runs ran
    different operations (the comparison stops there)."""
    ra, rb = a["records"], b["records"]
    culprits, first, misaligned = [], None, None
    for i, (x, y) in enumerate(zip(ra, rb)):
        if x["op"] != y["op"] or x["shapes"] != y["shapes"]:
            misaligned = i
            break
        if x["out"] != y["out"]:
            first = i if first is None else first
            if x["in"] == y["in"]:
                culprits.append({"index": i, "op": x["op"], "shapes": x["shapes"]})
    if misaligned is None and len(ra) != len(rb):
        misaligned = min(len(ra), len(rb))
    return {"operations": [len(ra), len(rb)], "first_difference": first, "culprits": culprits, "misaligned": misaligned}


def _dumps(result: dict) -> str:
    """JSON with one operation a line (diffable, a third of indented JSON's size)."""
    head = json.dumps({k: v for k, v in result.items() if k != "records"}, indent=1)[:-2]
    rows = ",\n".join(json.dumps(r, separators=(",", ":")) for r in result["records"])
    return f'{head},\n "records": [\n{rows}\n ]\n}}\n'


def _phase(index: int, phases: dict[str, int]) -> str:
    return next((name for name, end in phases.items() if index < end), "after")


def sqrt_probe() -> dict:
    """Whether this process's float `torch.sqrt` (ATen hands large float tensors to MKL's vector math, VML) is IEEE
    correctly rounded (numpy's sqrt is), and the digests of five AdamW steps, unfused (its sqrt is `aten.sqrt`) and
    fused (ATen's own vectorised kernel), on fixed tensors."""
    import numpy as np
    import torch

    x = torch.rand(2048 * 64, generator=torch.Generator().manual_seed(0)) * 1e-3
    ulps = torch.sqrt(x).numpy().view(np.int32).astype(np.int64) - np.sqrt(x.numpy()).view(np.int32)
    steps = {}
    for fused in (False, True):
        torch.manual_seed(0)
        params = [torch.nn.Parameter(torch.randn(2048, 64)), torch.nn.Parameter(torch.randn(64, 64))]
        opt = torch.optim.AdamW(params, lr=2e-3, fused=fused)
        g = torch.Generator().manual_seed(1)
        for _ in range(5):
            for q in params:
                q.grad = torch.randn(q.shape, generator=g) * 1e-3
            opt.step()
        steps["fused" if fused else "unfused"] = digest(torch.cat([q.detach().flatten() for q in params]))
    return {"sqrt_not_ieee": int((ulps != 0).sum()), "elements": int(ulps.size), "adamw": steps}


def sqrt_paths() -> list[dict]:
    """`sqrt_probe` under the numerics pin and under the pin with MKL's default code path (MKL_CBWR=AUTO), each in a
    fresh process: an AdamW whose digest changes between them depends on MKL's dispatch, as it may across vendors."""
    import os
    import subprocess

    from scpo.numerics import pin

    rows = []
    for label, extra in (("pinned", {}), ("pinned, MKL_CBWR=AUTO", {"MKL_CBWR": "AUTO"})):
        env = {**os.environ, **pin(), **extra}
        code = "import json, numerics_ops as n; print(json.dumps(n.sqrt_probe()))"
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=Path(__file__).parent, capture_output=True, text=True, check=True
        )
        rows.append({"run": label, **json.loads(out.stdout.strip().splitlines()[-1])})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    t = sub.add_parser("trace", help="record the computation")
    t.add_argument("--out", type=Path, default=None, help="write the record as JSON")
    c = sub.add_parser("compare", help="the culprits between two records")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    sub.add_parser("sqrt", help="is torch.sqrt IEEE here, and does AdamW depend on MKL's code path (fused or not)")
    args = ap.parse_args()
    if args.mode == "sqrt":
        for row in sqrt_paths():
            print(
                f"{row['run']}: torch.sqrt differs from IEEE on {row['sqrt_not_ieee']:,} of {row['elements']:,} "
                f"elements; AdamW x5 unfused {row['adamw']['unfused']}, fused {row['adamw']['fused']}"
            )
        return
    if args.mode == "trace":
        result = trace()
        print(
            f"{len(result['records'])} operations on {result['machine']['cpu']}"
            f" (numerics {result['numerics']['status']}); "
            f"final weights {result['final']['weights']}, scores {result['final']['scores']}"
        )
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(_dumps(result))
        return
    a, b = (json.loads(p.read_text()) for p in (args.a, args.b))
    for name, rec in (("A", a), ("B", b)):
        print(
            f"{name}: {rec['machine']['cpu']}, numerics {rec['numerics']['status']}, {len(rec['records'])} operations"
        )
    result = compare(a, b)
    if result["misaligned"] is not None:
        print(f"the runs ran different operations from operation {result['misaligned']} on (compared up to there)")
    if result["first_difference"] is None:
        print("every compared operation gave the same output")
        return
    i = result["first_difference"]
    print(f"first different output: operation {i} ({a['records'][i]['op']}, phase {_phase(i, a['phases'])})")
    print(f"{len(result['culprits'])} operations gave different outputs for the same inputs:")
    for row in result["culprits"][:40]:
        print(f"  {row['index']:6d} {_phase(row['index'], a['phases']):8s} {row['op']:50s} {row['shapes']}")
    sys.exit(1)


if __name__ == "__main__":
    main()

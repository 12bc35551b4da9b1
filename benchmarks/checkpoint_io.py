"""Checkpoint optimizer-state I/O, side by side: the state files scpo writes (safetensors + JSON tree) against
`torch.save` / `torch.load(weights_only=True)` of the same AdamW `state_dict()`. Prints median write and read times
(the read includes touching every byte, since safetensors maps the file lazily) and their ratio.

    .venv/bin/python benchmarks/checkpoint_io.py [--params-millions 20] [--repeats 5] [--quick]

`--quick`: 1M parameters, one repeat (what the test suite runs).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from scpo.run.checkpoint import read_training_state, rng_state, write_training_state


def _touch(x) -> float:
    if isinstance(x, torch.Tensor):
        return float(x.float().sum())
    if isinstance(x, dict):
        return sum(_touch(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return sum(_touch(v) for v in x)
    return 0.0


def _adamw_state(millions: int) -> dict:
    torch.manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(1000, 1000)) for _ in range(millions)]
    opt = torch.optim.AdamW(params)
    sum((p**2).sum() for p in params).backward()
    opt.step()
    return opt.state_dict()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params-millions", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="1M parameters, one repeat: seconds")
    args = ap.parse_args()
    if args.quick:
        args.params_millions, args.repeats = 1, 1
    state = _adamw_state(args.params_millions)
    rng = rng_state()
    times: dict[str, list[tuple[float, float]]] = {
        "torch.save / torch.load(weights_only=True)": [],
        "state files (safetensors + JSON tree)": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "state.json").write_text('{"iterations_done": 1}')
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            torch.save(state, d / "optimizer.pt")
            t1 = time.perf_counter()
            _touch(torch.load(d / "optimizer.pt", weights_only=True))
            times["torch.save / torch.load(weights_only=True)"].append((t1 - t0, time.perf_counter() - t1))
            t0 = time.perf_counter()
            write_training_state(d, state, rng)
            t1 = time.perf_counter()
            _touch(read_training_state(d).optimizer)
            times["state files (safetensors + JSON tree)"].append((t1 - t0, time.perf_counter() - t1))
    mb = sum(t.numel() * t.element_size() for s in state["state"].values() for t in s.values()) / 2**20
    print(f"AdamW state of {args.params_millions}M parameters ({mb:.0f} MiB), median of {args.repeats}:")
    medians = {k: (statistics.median(w for w, _ in v), statistics.median(r for _, r in v)) for k, v in times.items()}
    for k, (w, r) in medians.items():
        print(f"  {k:45s} write {w:.3f} s   read {r:.3f} s")
    (w_old, r_old), (w_new, r_new) = medians.values()
    print(f"  ratio state files / torch: write {w_new / w_old:.2f}x, read {r_new / r_old:.2f}x")


if __name__ == "__main__":
    main()

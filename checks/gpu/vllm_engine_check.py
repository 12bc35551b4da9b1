"""The vLLM engine on a GPU, checked against the transformers engine on the same weights (SmolLM2-135M-Instruct).

Needs a CUDA machine with vllm installed (it was run on one H200 with vLLM 0.24.0; the engine mode also starts on the
CPU with vLLM's CPU build, but ran out of this machine's 24 GiB: `vllm_sync_cpu.py` is the small CPU check). Two modes,
each its own process (vLLM keeps GPU memory until its process ends):

    python checks/gpu/vllm_engine_check.py engine --out runs/bench/vllm_check
        1. greedy agreement: first answers of vLLM (temperature 0) and of `TransformersEngine` on P ALFWorld prompts
           (expert-demonstration steps, so with history), same weights: exact, first-token and common-prefix agreement;
        2. log-probs: the trainer's `response_logprobs` of vLLM's sampled answers vs vLLM's own sample log-probs;
        3. weight sync: a behaviour-cloning update of the trainer's weights; vLLM's greedy answers agree with the
           updated transformers model only after `sync_weights` (and the agreement before tells the update was seen);
           the engine's own probe check, and the largest difference of a few weight tensors, vLLM vs trainer;
        4. throughput: the same P prompts sampled at temperature 1 by both engines, generated tokens per second.
    python checks/gpu/vllm_engine_check.py rl --engine vllm --out runs/bench/vllm_check
        two RL iterations of `scpo train --stage rl --method gigpo` (gpu profile, SmolLM2, smaller sizes) with that
        engine; per-iteration wall time split env / generation / credit / update.

Results go to `<out>/engine.json` and `<out>/rl_<engine>.json`. `--data-root` is where ALFWorld's `json_2.1.1/` lies
(and where SmolLM2 is converted once, under `models/`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import types
from pathlib import Path

import numpy as np
import torch


def demo_prompts(cfg, n: int) -> tuple[list[str], list]:
    """Prompts of expert-demonstration steps of the first training games (first steps and steps with history)."""
    from scpo.envs.demos import expert_demonstrations
    from scpo.envs.registry import env_settings

    env = env_settings(cfg)
    tasks = env.package.list_tasks(env.train_split, data_root=env.data_root, limit=max(8, n // 4))
    demos, _ = expert_demonstrations(
        env.package,
        tasks,
        data_root=env.data_root,
        max_steps=env.max_steps,
        history_length=cfg.env.history_length,
        progress=False,
    )
    return [d.prompt for d in demos][:n], demos


def agreement(a: list, b: list) -> dict:
    """Token-exact, first-token and mean common-prefix (over the longer answer) agreement of two answer lists."""
    exact = [x.response_ids == y.response_ids for x, y in zip(a, b)]
    first = [x.response_ids[:1] == y.response_ids[:1] for x, y in zip(a, b)]
    prefix = []
    for x, y in zip(a, b):
        k = 0
        while k < min(len(x.response_ids), len(y.response_ids)) and x.response_ids[k] == y.response_ids[k]:
            k += 1
        prefix.append(k / max(len(x.response_ids), len(y.response_ids), 1))
    return {
        "exact": float(np.mean(exact)),
        "first_token": float(np.mean(first)),
        "common_prefix": float(np.mean(prefix)),
    }


def _param_diff(engine, policy) -> dict:
    """vLLM's weights against the trainer's, every tensor (`VLLMEngine.parameter_report`: fused q/k/v and gate/up
    compared stacked, in vLLM's dtype): max |diff|, NaN count and the largest differences."""
    report = engine.parameter_report(policy)
    return {k: report[k] for k in ("max_abs_diff", "nan", "tensors", "largest", "unmatched", "unused")}


def _timed(fn):
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def engine_check(args) -> dict:
    from scpo.policy import load_policy
    from scpo.policy.logprobs import response_logprobs
    from scpo.policy.placement import autocast_each_forward
    from scpo.policy.smollm2 import ensure_smollm2
    from scpo.rollout.engine import TransformersEngine
    from scpo.rollout.vllm_engine import VLLMEngine
    from scpo.train.sft import behaviour_cloning

    cfg = check_config(args, "transformers")
    model_dir = ensure_smollm2(Path(args.data_root) / "models")
    prompts, demos = demo_prompts(cfg, args.prompts)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    policy = load_policy(model_dir, dtype="float32", device=device)  # trained weights float32, compute in args.dtype
    autocast_each_forward(policy.model, device, args.dtype)  # every forward pass its own autocast block (training's)
    hf = TransformersEngine(policy, cfg.policy.max_prompt_tokens, args.max_new_tokens, batch_size=args.batch_size)
    (vllm, startup_s) = _timed(
        lambda: VLLMEngine(
            policy,
            model_dir,
            cfg.policy.max_prompt_tokens,
            args.max_new_tokens,
            dtype=args.dtype,
            gpu_memory_utilization=0.3,
            seed=0,
            enforce_eager=args.enforce_eager,
        )
    )
    report: dict = {
        "vllm_version": __import__("vllm").__version__,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "dtype": args.dtype,
        "model": str(model_dir),
        "prompts": len(prompts),
        "max_new_tokens": args.max_new_tokens,
        "enforce_eager": args.enforce_eager,
        "vllm_startup_s": startup_s,
    }

    # 1. greedy agreement on the same weights
    hf_greedy = hf.generate(prompts, temperature=0.0)
    v_greedy = vllm.generate(prompts, temperature=0.0)
    report["greedy_same_weights"] = agreement(v_greedy, hf_greedy)
    report["example"] = {"prompt_tail": prompts[0][-200:], "vllm": v_greedy[0].text, "transformers": hf_greedy[0].text}

    # 2. log-probs of vLLM's samples: vLLM's own vs the trainer's
    from vllm import SamplingParams

    ids = policy.encode_prompts(prompts, cfg.policy.max_prompt_tokens)
    outs = vllm.llm.generate(
        [{"prompt_token_ids": x} for x in ids],
        use_tqdm=False,
        sampling_params=SamplingParams(temperature=1.0, max_tokens=args.max_new_tokens, logprobs=0, seed=1),
    )
    resp = [list(o.outputs[0].token_ids) for o in outs]
    v_lp = [[d[t].logprob for t, d in zip(r, o.outputs[0].logprobs)] for r, o in zip(resp, outs)]
    with torch.no_grad():
        diffs = []
        for s in range(0, len(ids), 32):
            lp, mask, _ = response_logprobs(
                policy.model, ids[s : s + 32], resp[s : s + 32], policy.tokenizer.pad_token_id
            )
            for row, vl in enumerate(v_lp[s : s + 32]):
                n = int(mask[row].sum())
                diffs.append(np.abs(lp[row, :n].float().cpu().numpy() - np.asarray(vl[:n])))
    flat = np.concatenate(diffs)
    report["logprob_abs_diff"] = {
        "mean": float(flat.mean()),
        "p99": float(np.quantile(flat, 0.99)),
        "max": float(flat.max()),
        "tokens": int(flat.size),
        "mean_ratio_error": float(np.mean(np.abs(np.exp(flat) - 1))),
    }

    # 3. weight sync: update the trainer's weights, compare before / after sync_weights. No autocast block is held
    # around the update, so hf_after comes from the updated weights (a block held across optimizer steps can keep
    # serving weight casts made before them; the run of results/vllm_engine_check computed hf_after in such a block).
    bc = behaviour_cloning(
        policy,
        demos[: args.sync_demos],
        epochs=1,
        lr=args.sync_lr,
        batch_size=16,
        max_prompt_tokens=cfg.policy.max_prompt_tokens,
        progress=False,
    )
    hf_after = hf.generate(prompts, temperature=0.0)
    report["update"] = {
        "bc_loss": bc["loss_first_epoch"],
        "demos": args.sync_demos,
        "lr": args.sync_lr,
        "transformers_before_vs_after": agreement(hf_greedy, hf_after),
    }
    report["greedy_before_sync"] = agreement(vllm.generate(prompts, temperature=0.0), hf_after)
    try:
        _, sync_s = _timed(lambda: vllm.sync_weights(policy))
        report["sync_s"] = sync_s
    except RuntimeError as err:  # the engine's own sync check
        report["sync_error"] = str(err)
    report["sync_probe"] = vllm.last_sync.get("probe")
    report["param_max_abs_diff_after_sync"] = _param_diff(vllm, policy)
    report["greedy_after_sync"] = agreement(vllm.generate(prompts, temperature=0.0), hf_after)

    # 4. throughput at temperature 1
    def tokens(gens):
        return sum(len(g.response_ids) for g in gens)

    v_samples, v_s = _timed(lambda: vllm.generate(prompts, temperature=1.0))
    hf_samples, hf_s = _timed(lambda: hf.generate(prompts, temperature=1.0))
    report["throughput"] = {
        "vllm_s": v_s,
        "vllm_tokens": tokens(v_samples),
        "vllm_tok_per_s": tokens(v_samples) / v_s,
        "transformers_s": hf_s,
        "transformers_tokens": tokens(hf_samples),
        "transformers_tok_per_s": tokens(hf_samples) / hf_s,
        "speedup_tok_per_s": (tokens(v_samples) / v_s) / (tokens(hf_samples) / hf_s),
    }
    return report


def check_config(args, engine: str):
    from scpo.config import load_config

    return load_config(
        "params.yaml",
        profile="gpu",
        overrides={
            "env.name": "alfworld",
            "data.root": args.data_root,
            "policy.profile": "smollm2-135m",
            "policy.max_prompt_tokens": 2048,
            "policy.max_new_tokens": args.max_new_tokens,
            "rollout.engine": engine,
            "rollout.vllm_gpu_memory_utilization": 0.3,
            "rollout.vllm_enforce_eager": args.enforce_eager,
            "rollout.n_tasks": args.tasks,
            "rollout.group_size": args.group,
            "env.alfworld.max_steps": args.max_steps,
            "train.iterations": args.iterations,
            "train.out_dir": str(Path(args.out) / f"runs_{engine}"),
            "train.checkpoint_every": 1000,
            "credit.method": "gigpo",
        },
    )


def dvclive_standin() -> types.ModuleType:
    """A `dvclive` that drops metrics, for a GPU image without dvc (history.csv is still written)."""
    import importlib.machinery

    stub = types.ModuleType("dvclive")
    stub.__spec__ = importlib.machinery.ModuleSpec("dvclive", None)  # accelerate probes find_spec("dvclive")
    stub.Live = lambda **kw: types.SimpleNamespace(
        log_metric=lambda *a, **k: None, next_step=lambda: None, end=lambda: None
    )
    return stub


def rl_check(args) -> dict:
    try:
        import dvclive  # noqa: F401

        standin = False
    except ImportError:
        sys.modules["dvclive"] = dvclive_standin()
        standin = True
    from scpo.train.run import run_training

    cfg = check_config(args, args.engine)
    summary = run_training(cfg, stage="rl")
    import pandas as pd

    from scpo.config import load_config

    gpu = load_config("params.yaml", profile="gpu")
    full = gpu.rollout.n_tasks * gpu.rollout.group_size * gpu.env.alfworld.max_steps  # the profile's, not this check's
    per = summary["seconds_per_iteration"]
    samples = float(pd.read_csv(Path(summary["run_dir"]) / "history.csv")["perf/steps"].mean())
    return {
        "extrapolated_full_iteration_s_upper": (per["gen_s"] + per["update_s"]) / max(samples, 1.0) * full,
        "full_iteration_step_samples": full,
        "engine": args.engine,
        "iterations": summary["iterations"],
        "wall_s": summary["wall_s"],
        "seconds_per_iteration": summary["seconds_per_iteration"],
        "dvclive_standin": standin,
        "rollouts_per_iteration": args.tasks * args.group,
        "max_steps": args.max_steps,
        "max_new_tokens": args.max_new_tokens,
        "success_rate_mean": summary.get("success_rate_mean"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["engine", "rl"])
    ap.add_argument("--out", default="runs/bench/vllm_check")
    ap.add_argument("--data-root", default="data")
    ap.add_argument("--engine", choices=["vllm", "transformers"], default="vllm", help="rl mode: rollout engine")
    ap.add_argument("--prompts", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=64, help="prompts per transformers generate call")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--sync-demos", type=int, default=256, help="engine mode: demonstrations of the update")
    ap.add_argument("--sync-lr", type=float, default=1e-4)
    ap.add_argument("--enforce-eager", action="store_true", help="vLLM without CUDA graphs (faster start)")
    ap.add_argument(
        "--dtype", choices=["bfloat16", "float32"], default="bfloat16", help="vLLM's dtype and the forward passes'"
    )
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--max-steps", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=2)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        if args.mode == "rl":
            raise SystemExit("the rl mode needs a CUDA GPU (torch.cuda.is_available() is False)")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "4")  # GiB of KV cache for vLLM's CPU backend
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = engine_check(args) if args.mode == "engine" else rl_check(args)
    name = "engine.json" if args.mode == "engine" else f"rl_{args.engine}.json"
    (out / name).write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

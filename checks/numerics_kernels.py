"""Do this project's CPU results depend on the SIMD kernels a machine picks, and does the numerics pin
(scpo/numerics.env) remove that dependence? Runs started "as on another machine" (the environment asking the libraries
for that machine's kernel family and thread count) are compared byte for byte.

    python checks/numerics_kernels.py sweep     each kernel variable alone, against none: which outputs it changes
    python checks/numerics_kernels.py smoke     the two machines below, with and without the pin (the CI test runs it)
    python checks/numerics_kernels.py pipeline  `make repro` (profile smoke, or --profile cpu) in clones of HEAD:
                                                the two machines with the pin (tables, figures, run files must be
                                                identical), and without it (--unpinned too; they should differ)
    [--out checks/results/numerics_<mode>.json]

The smoke-sized computation is the project's own: the SFT warm start of the tiny policy (2 layers, 64 wide, profile
smoke) on the data-free corridor environment, 3 RL iterations of GiGPO from it, an evaluation of the result, and the
bi-encoder's similarity matrix over the rollouts' steps (action -> next observation; MiniLM, default threads, numpy
matrix product: what the semantic-inconsistency analysis runs). Compared: both models' weights, the saved rollouts,
the training history (less its perf/ timings), the evaluation's successes (less timings), the similarity matrix.
`--size test` is the CI test's smaller policy (1 layer, 32 wide, 2 iterations).

MACHINES are what another machine's libraries would pick unasked: this CPU's own (AVX-512 kernels; OpenBLAS's SkylakeX
kernels, as on an Intel AVX-512 CPU; 2 threads) and a one-core AVX2 machine's (AVX2 kernels; OpenBLAS Haswell;
numpy without its AVX-512 paths; 1 thread; PyTorch takes no more threads than the CPUs it may use, so more threads
than 2 cannot be shown here). What cannot be shown on one CPU: MKL picks its GEMM by CPU vendor and model and
ignores a requested AVX2 or AVX-512 branch on this AMD CPU (measured: `sweep` shows MKL_CBWR=AVX2 and AVX512 changing
nothing, COMPATIBLE changing the weights); the pin's MKL_CBWR=COMPATIBLE is the branch MKL runs alike on every vendor.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scpo.numerics import MARKER, pin  # noqa: E402

# every variable that changes a kernel choice or thread count, pinned or not (removed before a machine's are set)
KNOBS = (
    "ATEN_CPU_CAPABILITY",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "OPENBLAS_CORETYPE",
    "NPY_DISABLE_CPU_FEATURES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    MARKER,
)
NUMPY_AVX512 = "AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL"
MACHINES = {
    "avx512": {
        "ATEN_CPU_CAPABILITY": "avx512",
        "MKL_ENABLE_INSTRUCTIONS": "AVX512",
        "ONEDNN_MAX_CPU_ISA": "ALL",
        "OPENBLAS_CORETYPE": "SkylakeX",
        "OMP_NUM_THREADS": "2",
    },
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "OPENBLAS_CORETYPE": "Haswell",
        "NPY_DISABLE_CPU_FEATURES": NUMPY_AVX512,
        "OMP_NUM_THREADS": "1",
    },
}
# one variable at a time against none set (`sweep`)
SWEEP = [
    ("ATEN_CPU_CAPABILITY", "avx2"),
    ("ATEN_CPU_CAPABILITY", "avx512"),
    ("ATEN_CPU_CAPABILITY", "default"),
    ("MKL_CBWR", "AVX2"),
    ("MKL_CBWR", "AVX512"),
    ("MKL_CBWR", "COMPATIBLE"),
    ("MKL_ENABLE_INSTRUCTIONS", "AVX2"),
    ("ONEDNN_MAX_CPU_ISA", "AVX2"),
    ("OPENBLAS_CORETYPE", "Haswell"),
    ("OPENBLAS_CORETYPE", "SkylakeX"),
    ("NPY_DISABLE_CPU_FEATURES", NUMPY_AVX512),
    ("OMP_NUM_THREADS", "1"),
    ("OMP_NUM_THREADS", "2"),
]
SIZES = {
    # the tiny policy of the pipeline (params.yaml policy.*), smoke profile, on the corridor
    "policy": {
        "env.name": "corridor",
        "env.corridor.max_steps": 6,
        "train.iterations": 3,
        "train.checkpoint_every": 3,
        "credit.method": "gigpo",
        "eval.n_episodes": 4,
    },
    # the CI test's: a 1-layer, 32-wide policy, 2 iterations (seconds per run)
    "test": {
        "env.name": "corridor",
        "env.corridor.max_steps": 4,
        "policy.tiny_hidden_size": 32,
        "policy.tiny_layers": 1,
        "policy.tiny_heads": 2,
        "policy.tiny_vocab_size": 300,
        "policy.max_new_tokens": 8,
        "train.iterations": 2,
        "train.checkpoint_every": 2,
        "credit.method": "gigpo",
        "eval.n_episodes": 2,
    },
}


def environment(machine: str | None, pinned: bool, extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment less every knob, then `machine`'s variables, then the pin over them."""
    env = {k: v for k, v in os.environ.items() if k not in KNOBS}
    env.update(MACHINES[machine] if machine else {})
    env.update(extra or {})
    if pinned:
        env.update(pin())
    env["PYTHONPATH"] = str(ROOT)
    return env


def _work(out: Path, size: str) -> None:
    """The smoke-sized computation (module docstring), into `out`; runs in a process started with the environment
    under test."""
    import numpy as np

    from scpo.config import load_config
    from scpo.scorers import make_scorer
    from scpo.train.evaluate import run_evaluation
    from scpo.train.run import run_training

    sets = SIZES[size]
    cfg = load_config(ROOT / "params.yaml", profile="smoke", overrides=dict(sets))
    run_training(cfg, stage="sft", out_dir=out / "sft")
    rl = load_config(ROOT / "params.yaml", profile="smoke", overrides={**sets, "train.init_from": str(out / "sft")})
    run_training(rl, stage="rl", out_dir=out / "rl")
    run_evaluation(rl, checkpoint=out / "rl", out_dir=out / "eval")
    import pandas as pd

    frames = [pd.read_parquet(f) for f in sorted((out / "rl" / "rollouts").glob("*.parquet"))]
    texts = sorted({f"{a} -> {o}" for fr in frames for a, o in zip(fr["action"], fr["next_observation"])})
    sims = make_scorer("bi_encoder").score_matrix(texts, texts)
    np.save(out / "similarity.npy", sims)


def digests(out: Path) -> dict[str, str]:
    """sha256 of each compared output of `_work` (module docstring)."""
    found = {
        "sft weights": out / "sft" / "model" / "model.safetensors",
        "rl weights": out / "rl" / "model" / "model.safetensors",
        "similarity matrix": out / "similarity.npy",
    }
    result = {name: hashlib.sha256(p.read_bytes()).hexdigest() for name, p in found.items()}
    rollouts = b"".join(p.read_bytes() for p in sorted((out / "rl" / "rollouts").glob("*.parquet")))
    result["rollouts"] = hashlib.sha256(rollouts).hexdigest()
    rows = list(csv.reader(io.StringIO((out / "rl" / "history.csv").read_text())))
    keep = [i for i, name in enumerate(rows[0]) if not name.startswith("perf/")]
    history = "\n".join(",".join(r[i] for i in keep) for r in rows)
    result["history"] = hashlib.sha256(history.encode()).hexdigest()
    splits = _untimed(json.loads((out / "eval" / "eval.json").read_text())["splits"])
    result["evaluation"] = hashlib.sha256(json.dumps(splits, sort_keys=True).encode()).hexdigest()
    return result


def _untimed(tree):
    """`tree` less its timings (keys ending in _s)."""
    if isinstance(tree, dict):
        return {k: _untimed(v) for k, v in tree.items() if not k.endswith("_s")}
    return [_untimed(v) for v in tree] if isinstance(tree, list) else tree


def run_smoke(out: Path, env: dict[str, str], size: str = "policy", timeout: float = 600) -> dict:
    """`_work` in a new process with `env`; {"digests", "capability", "numerics", "seconds"}."""
    t0 = time.perf_counter()
    cmd = [sys.executable, __file__, "_work", str(out), "--size", size]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"the smoke computation failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    prov = json.loads((out / "rl" / "provenance.json").read_text())["environment"]["numerics"]
    return {
        "digests": digests(out),
        "capability": prov["torch_cpu_capability"],
        "numerics": prov["status"],
        "seconds": round(time.perf_counter() - t0, 1),
    }


def compare(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """The names of the outputs whose digests differ."""
    return [k for k in a if a[k] != b.get(k)]


def smoke(base: Path, size: str = "policy", workers: int = 2) -> dict:
    """Both machines with and without the pin, `workers` runs at a time; the verdicts the CI test asserts."""
    cases = {f"{m}{'+pin' if p else ''}": (m, p) for p in (True, False) for m in MACHINES}
    with ThreadPoolExecutor(workers) as pool:
        futures = {name: pool.submit(run_smoke, base / name, environment(m, p), size) for name, (m, p) in cases.items()}
        runs = {name: f.result() for name, f in futures.items()}
    pinned = compare(runs["avx512+pin"]["digests"], runs["avx2+pin"]["digests"])
    unpinned = compare(runs["avx512"]["digests"], runs["avx2"]["digests"])
    return {"runs": runs, "differ_with_pin": pinned, "differ_without_pin": unpinned}


def sweep(base: Path, size: str = "policy") -> dict:
    """Each SWEEP variable alone against none of them set (and none twice, to show a rerun is identical)."""
    ref = run_smoke(base / "none", environment(None, False), size)
    again = run_smoke(base / "none-again", environment(None, False), size)
    rows = [{"setting": "(none, rerun)", "changes": compare(ref["digests"], again["digests"]), **_brief(again)}]
    for key, value in SWEEP:
        got = run_smoke(base / f"{key}-{value.split()[0]}", environment(None, False, {key: value}), size)
        rows.append({"setting": f"{key}={value}", "changes": compare(ref["digests"], got["digests"]), **_brief(got)})
    return {"reference": ref, "rows": rows}


def _brief(run: dict) -> dict:
    return {"capability": run["capability"], "seconds": run["seconds"]}


# ---- pipeline-sized: `make repro` in clones of HEAD


def _clone(dest: Path, profile: str, report: dict[str, str]) -> Path:
    """A clone of HEAD whose params.yaml runs `profile` (and `report`'s `methods` / `envs` lists, where given)."""
    subprocess.run(["git", "clone", "-q", "--no-local", str(ROOT), str(dest / "scpo")], check=True)
    repo = dest / "scpo"
    params = repo / "params.yaml"
    text = params.read_text().replace("\nprofile: cpu\n", f"\nprofile: {profile}\n", 1)
    for key, value in report.items():
        pattern = rf"(?m)^(report:\n(?:  .*\n)*?)  {key}: \[[^\]]*\]"
        text, n = re.subn(pattern, rf"\g<1>  {key}: [{value}]", text, count=1)
        if n != 1:
            raise SystemExit(f"params.yaml: no report.{key} list to replace")
    params.write_text(text)
    # `make repro VENV=<this checkout's venv>`: the clone's install inputs, just checked out, would be newer than the
    # venv's stamp and make would reinstall into it; they are the same files, so they are dated back
    for name in ("pyproject.toml", "requirements/cpu.txt", "requirements/cpu-torch.txt"):
        os.utime(repo / name, (0, 0))
    shared = ROOT.parent / "shared"
    if shared.exists():
        (dest / "shared").symlink_to(shared)  # params.yaml's data.shared_dir: ../shared/data
    return repo


def _repro(repo: Path, machine: str, pinned: bool, log: Path) -> float:
    env = environment(machine, False)  # the Makefile adds the pin itself (PIN=) where asked
    env.update(DVC_NO_ANALYTICS="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    venv = ROOT / ".venv"
    cmd = ["make", "repro", f"VENV={venv}"] + ([] if pinned else ["PIN="])
    t0 = time.perf_counter()
    with log.open("w") as fh:
        done = subprocess.run(cmd, cwd=repo, env={**env, "PYTHONPATH": str(repo)}, stdout=fh, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RuntimeError(f"make repro ({machine}, pin {pinned}) failed: see {log}")
    return time.perf_counter() - t0


def _outputs(repo: Path, since: float | None = None) -> dict[str, str]:
    """sha256 of every table, figure, evaluation and results file the run wrote under reports/ (less executed
    notebooks, timings, the environment file; an eval.json by its successes) and of every model, rollout and history
    (less perf/) under runs/. Written by the run: newer than `since` (default: params.yaml, which `_clone` writes;
    files older than it came with the clone)."""
    since = (repo / "params.yaml").stat().st_mtime if since is None else since
    out = {}
    for folder in (repo / "reports", repo / "runs"):
        for p in sorted(folder.rglob("*")):
            rel = p.relative_to(repo).as_posix()
            if not p.is_file() or rel.startswith("reports/notebooks/") or "timing" in p.name:
                continue
            if p.stat().st_mtime < since:  # committed, not written by this run (a method or env left out)
                continue
            if rel == "reports/environment.json" or rel.startswith("reports/code_hash/"):
                continue
            if folder.name == "runs" and not (p.suffix in (".safetensors", ".parquet") or p.name == "history.csv"):
                continue
            if folder.name == "reports" and p.name == "eval.json":  # less timings and the clone's paths
                splits = _untimed(json.loads(p.read_text())["splits"])
                out[rel] = hashlib.sha256(json.dumps(splits, sort_keys=True).encode()).hexdigest()
            elif p.name == "history.csv":
                rows = list(csv.reader(io.StringIO(p.read_text())))
                keep = [i for i, n in enumerate(rows[0]) if not n.startswith("perf/")]
                out[rel] = hashlib.sha256("\n".join(",".join(r[i] for i in keep) for r in rows).encode()).hexdigest()
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _pipeline_case(
    base: Path, name: str, machine: str, pinned: bool, profile: str, report: dict[str, str], run: bool = True
) -> tuple[float, dict[str, str]]:
    """Clone and `make repro` (`run`), or only read the outputs of an earlier run kept in `base`."""
    if not run:
        return float("nan"), _outputs(base / name / "scpo")
    repo = _clone(base / name, profile, report)
    seconds = _repro(repo, machine, pinned, base / f"{name}.log")
    print(f"{name}: make repro {seconds:.0f} s", flush=True)
    return seconds, _outputs(repo)


def pipeline(
    base: Path,
    profile: str,
    unpinned: bool,
    jobs: int,
    report: dict[str, str] | None = None,
    run: bool = True,
    only: list[str] | None = None,
    against: Path | None = None,
) -> dict:
    """`make repro` per case in its own clone, `jobs` at a time (or, not `run`, the clones kept in `base` by an earlier
    call); which compared files agree between the machines. `only`: these cases alone. `against`: a checkout where
    `make repro` has finished in this machine's own environment (nothing set but the pin) stands as the case
    `here+pin`, all its outputs compared (its runs were not started by this check, so no file is left out by date)."""
    cases = {f"{m}+pin": (m, True) for m in MACHINES}
    cases.update({m: (m, False) for m in MACHINES} if unpinned else {})
    unknown = sorted(set(only or []) - set(cases))
    if unknown:
        raise SystemExit(f"--cases: no case {', '.join(unknown)} (cases: {', '.join(cases)})")
    cases = {n: c for n, c in cases.items() if not only or n in only}
    with ThreadPoolExecutor(jobs) as pool:
        futures = {
            n: pool.submit(_pipeline_case, base, n, m, p, profile, report or {}, run) for n, (m, p) in cases.items()
        }
        done = {n: f.result() for n, f in futures.items()}
    if against is not None:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=against, capture_output=True, text=True).stdout
        done["here+pin"] = (float("nan"), _outputs(against, since=0.0))
    outputs = {n: out for n, (_, out) in done.items()}
    result = {
        "profile": profile,
        "report": report or {},
        "cases": {n: {"seconds": None if s != s else round(s), "files": len(o)} for n, (s, o) in done.items()},
    }
    if against is not None:
        result["cases"]["here+pin"].update(checkout=str(against), commit=commit.strip())
    pinned = [n for n in outputs if n.endswith("+pin")]
    plain = [n for n in outputs if not n.endswith("+pin")]
    for group in (pinned, plain):
        for i, a in enumerate(group):
            for b in group[i + 1 :]:
                both = set(outputs[a]) & set(outputs[b])
                diff = sorted(k for k in both if outputs[a][k] != outputs[b][k])
                result[f"{a} vs {b}"] = {
                    "identical": len(both) - len(diff),
                    "differ": diff,
                    f"only {a}": sorted(set(outputs[a]) - both),
                    f"only {b}": sorted(set(outputs[b]) - both),
                }
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=["sweep", "smoke", "pipeline", "_work"])
    ap.add_argument("path", nargs="?", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help="write the result as JSON")
    ap.add_argument("--profile", default="smoke", help="pipeline: the params.yaml profile (smoke | cpu)")
    ap.add_argument("--unpinned", action="store_true", help="pipeline: also both machines without the pin")
    ap.add_argument("--jobs", type=int, default=2, help="pipeline: clones run at once")
    ap.add_argument("--methods", default=None, help="pipeline: report.methods of the clones, e.g. grpo,scpo")
    ap.add_argument("--envs", default=None, help="pipeline: report.envs of the clones, e.g. alfworld")
    ap.add_argument("--size", choices=sorted(SIZES), default="policy", help="smoke, sweep: the computation's size")
    ap.add_argument("--cases", default=None, help="pipeline: only these cases, e.g. avx2+pin (comma-separated)")
    ap.add_argument(
        "--against", type=Path, default=None, help="pipeline: a checkout with a finished `make repro`, as `here+pin`"
    )
    ap.add_argument("--compare-only", action="store_true", help="pipeline: compare the clones an earlier --keep left")
    ap.add_argument("--keep", type=Path, default=None, help="work in this folder (kept) instead of a temporary one")
    args = ap.parse_args()
    if args.mode == "_work":
        _work(Path(args.path), args.size)
        return
    base = args.keep or Path(tempfile.mkdtemp(prefix="numerics-"))
    try:
        if args.mode == "sweep":
            result = sweep(base, args.size)
            for row in result["rows"]:
                changes = ", ".join(row["changes"]) or "-"
                print(f"{row['setting']:60s} kernels {row['capability']:7s} changes: {changes}")
        elif args.mode == "smoke":
            result = smoke(base, args.size)
            for name, run in result["runs"].items():
                print(f"{name:11s} kernels {run['capability']:7s} numerics {run['numerics']:17s} {run['seconds']} s")
            print(f"with the pin, AVX-512 vs AVX2 machine: differ in {result['differ_with_pin'] or 'nothing'}")
            print(f"without it:                            differ in {result['differ_without_pin'] or 'nothing'}")
        else:
            report = {k: v for k, v in (("methods", args.methods), ("envs", args.envs)) if v}
            only = [c.strip() for c in args.cases.split(",")] if args.cases else None
            result = pipeline(
                base, args.profile, args.unpinned, args.jobs, report, not args.compare_only, only, args.against
            )
            for key, val in result.items():
                if " vs " in key:
                    alone = {k: len(v) for k, v in val.items() if k.startswith("only ")}
                    print(
                        f"{key}: {val['identical']} files identical, {len(val['differ'])} differ {val['differ'][:8]},"
                        f" in one only {alone}"
                    )
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=2) + "\n")
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()

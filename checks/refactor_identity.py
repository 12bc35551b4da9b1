"""Does a refactor leave every result the same? Train, evaluate and benchmark on the smoke profile with one checkout,
record the sha256 of every file those runs write (timings left out), and compare two checkouts' records.

    python checks/refactor_identity.py run --repo CLONE --data DATA --work WORK --json before.json
    python checks/refactor_identity.py run --repo .     --data DATA --work WORK --json after.json
    python checks/refactor_identity.py compare before.json after.json      # exit 1 when a file differs
    python checks/refactor_identity.py digest --repo CLONE --work WORK --json out.json   # the record of a WORK again
    python checks/refactor_identity.py run ... --only 'sft/*' --only 'rl/corridor/*'   # the cases named so (fnmatch)

Each case runs the `scpo` command of CLONE (`python -m scpo.cli`, PYTHONPATH=CLONE) under the CPU numerics pin
(`python -m scpo.numerics env`) in WORK (emptied first; CLONE's params.yaml copied in, `data` a link to DATA), two
processes at a time:
- the SFT warm start of alfworld, webshop and the corridor (`--profile smoke`);
- RL, 2 iterations, seed 0, from that warm start, for every estimator the train stages or the learning benchmark run
  (params.yaml's `report.methods` and `learning.methods`, every profile's), on alfworld and webshop (the oracle only
  where there is a planner), and on the corridor's long tasks (`env.corridor.train_split=train_long`, where groups
  are mixed, so the estimators' advantages differ and every update moves the weights), with `mc_advantage` there too
  (the policy's own state values, played by the trainer);
- on the corridor: dynamic sampling, a run stopped after 1 iteration and resumed to 2, and one learning-benchmark
  run (`scpo.testbeds.learning.learning_run`, gigpo, seed 0);
- `scpo eval` of four of the runs.
The record: sha256 per file, of the file's bytes, except where a file holds timings: history.csv without its `perf/*_s`
columns, JSON files (summary, provenance, checkpoint state, eval, dvclive metrics, learning results) without the keys
ending in `_s` and `seconds*`, `created`, `git` (the commit changes with every refactor step) and the size of
history.csv a checkpoint records, with the paths of WORK and CLONE written as `<work>` and `<repo>` (two records may
come from two folders), and no dvclive plot of a `perf/*_s` metric. A run folder's lock file is not a result. CLONE is
a whole checkout (its requirements/ lock is part of every provenance record).
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

SMOKE = ("--profile", "smoke")
PLANNER_ENVS = ("alfworld", "corridor")  # environments whose planner gives the oracle's progress
CORRIDOR_LONG = ("--set", "env.corridor.train_split=train_long", "--set", "env.corridor.max_steps=6")
DROPPED_KEYS = {"created", "git", "seconds", "seconds_per_iteration"}
HISTORY = "history.csv"  # a checkpoint's state.json records its size, which its timing columns change
SKIPPED_FILES = {".scpo.lock"}


def methods_run(params: Path) -> list[str]:
    """The methods of `report.methods` and `learning.methods`, in params.yaml and every profile, in first-seen order."""
    raw = yaml.safe_load(params.read_text())
    found = [*raw["report"]["methods"], *raw["learning"]["methods"]]
    for overrides in (raw.get("profiles") or {}).values():
        for key in ("report.methods", "learning.methods"):
            found += list((overrides or {}).get(key, []))
    return list(dict.fromkeys(found))


def cases(params: Path) -> list[list[tuple[str, list[str]]]]:
    """Waves of (name, argv after `python`): a wave starts when the one before it has finished."""
    cli = ["-m", "scpo.cli"]
    sft = [(f"sft/{env}", [*cli, "train", *SMOKE, "--stage", "sft", "--env", env, "--out", f"runs/sft/{env}"])
           for env in ("alfworld", "webshop", "corridor")]  # fmt: skip

    def rl(env: str, method: str, out: str, *extra: str) -> tuple[str, list[str]]:
        start = ("--set", f"train.init_from=runs/sft/{env}")
        args = [*cli, "train", *SMOKE, "--stage", "rl", "--env", env, "--method", method, *start, *extra]
        return out, [*args, "--out", f"runs/{out}"]

    rl_runs = []
    for method in methods_run(params):
        for env in ("alfworld", "webshop"):
            if method != "oracle" or env in PLANNER_ENVS:
                rl_runs.append(rl(env, method, f"rl/{env}/{method}"))
        rl_runs.append(rl("corridor", method, f"rl/corridor/{method}", *CORRIDOR_LONG))
    rl_runs.append(rl("corridor", "mc_advantage", "rl/corridor/mc_advantage", *CORRIDOR_LONG))
    ds = ("--set", "rollout.dynamic_sampling.enable=true")
    rl_runs.append(rl("corridor", "gigpo", "rl/corridor/gigpo+ds", *CORRIDOR_LONG, *ds))
    one = ("--set", "train.iterations=1")
    rl_runs.append(rl("corridor", "scpo", "rl/corridor/resumed", *CORRIDOR_LONG, *one))
    learning = (
        "import sys; from scpo.config import load_config; from scpo.testbeds.learning import RunKey, learning_run; "
        "cfg = load_config('params.yaml', profile='smoke', overrides={'learning.out_dir': 'runs/learning', "
        "'env.corridor.train_split': 'train_long', 'env.corridor.max_steps': 6, "
        "'learning.unseen_split': {'corridor': 'valid_long'}}); "
        "learning_run(cfg, RunKey('corridor', 'gigpo', 0), 'runs/sft/corridor')"
    )
    later = [
        ("rl/corridor/resumed (resume)", rl("corridor", "scpo", "rl/corridor/resumed", *CORRIDOR_LONG, "--resume")[1]),
        ("learning/corridor/gigpo", ["-c", learning]),
    ]
    for run in ("alfworld/gigpo", "webshop/scpo", "corridor/scpo", "corridor/hcapo"):
        later.append((f"eval/{run}", [*cli, "eval", *SMOKE, "--checkpoint", f"runs/rl/{run}"]))
    return [sft, rl_runs, later]


def run_cases(repo: Path, data: Path, work: Path, jobs: int, only: list[str] | None = None) -> list[dict]:
    """Every case of `cases` (or those whose name matches a pattern of `only`), `jobs` at a time, in `work`; -> one
    record per case (name, exit code, seconds)."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    shutil.copy(repo / "params.yaml", work / "params.yaml")
    (work / "data").symlink_to(data.resolve())
    env = {**os.environ, "PYTHONPATH": str(repo.resolve()), "TQDM_DISABLE": "1"}
    pin = subprocess.run([sys.executable, "-m", "scpo.numerics", "env"], env=env, capture_output=True, text=True)
    env.update(item.split("=", 1) for item in pin.stdout.split())
    (work / "logs").mkdir()
    records = []

    def one(case: tuple[str, list[str]]) -> dict:
        name, argv = case
        t0 = time.perf_counter()
        log = work / "logs" / (name.replace("/", "_").replace(" ", "_") + ".log")
        with open(log, "w") as out:
            proc = subprocess.run([sys.executable, *argv], cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
        return {"case": name, "rc": proc.returncode, "seconds": round(time.perf_counter() - t0, 1)}

    for wave in cases(repo / "params.yaml"):
        wave = [c for c in wave if not only or any(fnmatch.fnmatchcase(c[0], p) for p in only)]
        # the resume continues the run its wave's first part stopped: the waves keep that order
        with ThreadPoolExecutor(jobs) as pool:
            for rec in pool.map(one, wave):
                print(f"{rec['case']}: exit {rec['rc']} ({rec['seconds']} s)", file=sys.stderr)
                records.append(rec)
    return records


def _without_timings(value, places: dict[str, str]):
    if isinstance(value, dict):
        return {
            k: _without_timings(v, places)
            for k, v in value.items()
            if k not in DROPPED_KEYS and not k.endswith("_s") and not k.startswith("seconds") and k != HISTORY
        }
    if isinstance(value, list):
        return [_without_timings(v, places) for v in value]
    if isinstance(value, str):
        for path, name in places.items():
            value = value.replace(path, name)
    return value


def _timing_column(name: str) -> bool:
    return name.startswith("perf/") and name.endswith("_s")


def file_digest(path: Path, places: dict[str, str]) -> str | None:
    """sha256 of what `path` holds besides timings, with the folders of `places` named (module docstring); None for a
    file that is no result."""
    if path.name in SKIPPED_FILES:
        return None
    if path.suffix == ".tsv" and "perf" in path.parts and path.stem.endswith("_s"):
        return None
    data = path.read_bytes()
    if path.suffix == ".json":
        data = json.dumps(_without_timings(json.loads(data), places), sort_keys=True).encode()
    elif path.name == HISTORY:
        rows = list(csv.reader(io.StringIO(data.decode())))
        keep = [i for i, name in enumerate(rows[0]) if not _timing_column(name)] if rows else []
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([[row[i] for i in keep] for row in rows])
        data = buf.getvalue().encode()
    return hashlib.sha256(data).hexdigest()


def digests(work: Path, repo: Path) -> dict[str, str]:
    out = {}
    places = {str(work.resolve()): "<work>", str(repo.resolve()): "<repo>"}
    for path in sorted((work / "runs").rglob("*")):
        if path.is_file():
            digest = file_digest(path, places)
            if digest is not None:
                out[str(path.relative_to(work))] = digest
    return out


def compare(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """One line per file that is only in one record or differs between them."""
    lines = [f"only in the first: {p}" for p in sorted(set(a) - set(b))]
    lines += [f"only in the second: {p}" for p in sorted(set(b) - set(a))]
    lines += [f"differs: {p}" for p in sorted(set(a) & set(b)) if a[p] != b[p]]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the cases with one checkout and record the digests")
    run.add_argument("--repo", type=Path, default=Path("."))
    run.add_argument("--data", type=Path, default=Path("data"))
    run.add_argument("--work", type=Path, required=True, help="emptied, then holds the runs")
    run.add_argument("--json", type=Path, required=True, help="where the record goes")
    run.add_argument("--jobs", type=int, default=2)
    run.add_argument("--only", action="append", help="run only the cases whose name matches (fnmatch; repeatable)")
    again = sub.add_parser("digest", help="the record of a work folder that `run` filled")
    again.add_argument("--repo", type=Path, required=True)
    again.add_argument("--work", type=Path, required=True)
    again.add_argument("--json", type=Path, required=True)
    cmp = sub.add_parser("compare", help="compare two records")
    cmp.add_argument("first", type=Path)
    cmp.add_argument("second", type=Path)
    args = ap.parse_args(argv)
    if args.command == "run":
        records = run_cases(args.repo, args.data, args.work, args.jobs, args.only)
        failed = [r["case"] for r in records if r["rc"] != 0]
        record = {
            "repo": str(args.repo.resolve()),
            "only": args.only,
            "cases": records,
            "files": digests(args.work, args.repo),
        }
        args.json.write_text(json.dumps(record, indent=1) + "\n")
        print(f"{len(record['files'])} files from {len(records)} cases; wrote {args.json}", file=sys.stderr)
        if failed:
            print(f"failed: {', '.join(failed)} (logs in {args.work / 'logs'})", file=sys.stderr)
            return 1
        return 0
    if args.command == "digest":
        record = {"repo": str(args.repo.resolve()), "files": digests(args.work, args.repo)}
        args.json.write_text(json.dumps(record, indent=1) + "\n")
        print(f"{len(record['files'])} files; wrote {args.json}", file=sys.stderr)
        return 0
    a, b = (json.loads(p.read_text()) for p in (args.first, args.second))
    lines = compare(a["files"], b["files"])
    for line in lines:
        print(line)
    same = len(set(a["files"]) & set(b["files"])) - sum(line.startswith("differs") for line in lines)
    print(f"{len(a['files'])} and {len(b['files'])} files; {same} equal, {len(lines)} not")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())

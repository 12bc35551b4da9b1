"""The reliability cases (everyday mistakes), run against one checkout of this repository; then the before/after table.

    python checks/reliability.py run --repo CLONE --data DATA --work WORK --json before.json   # a checkout, its results
    python checks/reliability.py table before.json after.json > reports/RELIABILITY.md           # the table

Every case is a mistake a researcher makes in a normal week (a misspelled model aimed at a finished run, two trainings
on one folder, the README's own sweep, a resume with other settings, a truncated checkpoint file, ...), run with the
`scpo` command of CLONE (`python -m scpo.cli`, PYTHONPATH=CLONE) on the smoke profile, in folders under WORK. DATA is a
prepared data root (data/alfworld, and data/webshop with its catalogue for the WebShop case); CLONE/data is made a link
to it. A case records what the command printed (exit code, number of stderr lines, the last line), whether results were
lost or mixed (files of an earlier run compared byte for byte, or the run's own records), and whether the outcome is a
clear one-line error or the right result. The machine is assumed offline (no Hugging Face Hub, no GitHub).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

SMOKE = ("--profile", "smoke")
MISSPELLED = "policy.profile=Qwen/Qwen2.5-1.5B-Instrct"


# ---------------------------------------------------------------------------------------------------------- plumbing
class Checkout:
    def __init__(self, repo: Path, data: Path, work: Path):
        self.repo, self.data, self.work = repo.resolve(), data.resolve(), work.resolve()
        self.work.mkdir(parents=True, exist_ok=True)
        link = self.repo / "data"
        if not link.exists():
            link.symlink_to(self.data)
        self.env = {
            **os.environ,
            "PYTHONPATH": str(self.repo),
            "DVC_NO_ANALYTICS": "1",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        self.env.pop("HF_HUB_OFFLINE", None)  # as a user's shell: the library has to find out it is offline

    def run(self, *args: str, timeout: int = 900, env: dict | None = None) -> Outcome:
        t0 = time.time()
        proc = subprocess.run(
            [sys.executable, "-m", "scpo.cli", *map(str, args)],
            cwd=self.repo,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**self.env, **(env or {})},
        )
        return Outcome(proc.returncode, proc.stdout, proc.stderr, time.time() - t0)

    def spawn(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "scpo.cli", *map(str, args)],
            cwd=self.repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
        )

    def tool(self, *argv: str, timeout: int = 900) -> Outcome:
        t0 = time.time()
        proc = subprocess.run(list(argv), cwd=self.repo, capture_output=True, text=True, timeout=timeout, env=self.env)
        return Outcome(proc.returncode, proc.stdout, proc.stderr, time.time() - t0)

    def copy(self, src: Path, name: str) -> Path:
        dst = self.work / name
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(src, dst, symlinks=True)
        return dst


class Outcome:
    def __init__(self, rc: int, stdout: str, stderr: str, seconds: float):
        self.rc, self.stdout, self.stderr, self.seconds = rc, stdout, stderr, seconds

    @property
    def lines(self) -> list[str]:
        """stderr lines other than progress bars."""
        out = []
        for raw in self.stderr.splitlines():
            line = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", raw.split("\r")[-1]).strip()
            if line and not re.search(r"\d+%\|", line):
                out.append(line)
        return out

    def last(self, limit: int = 220) -> str:
        """The error a user reads: the last line naming an exception (`DataError: ...`, with the lines a traceback
        printer wrapped it into), else the last stderr line with words in it (rich's boxes stripped), else the last
        stdout line."""
        texts = [re.sub(r"^[\s│╭╮╰╯─]+|[\s│╭╮╰╯─]+$", "", ln) for ln in self.lines]
        texts = [t for t in texts if re.search(r"[A-Za-z]{2}", t)]
        starts = [i for i, t in enumerate(texts) if re.match(r"[A-Za-z_][\w.]*(Error|Exception): ", t)]
        if starts and len(texts) > 1:
            line = " ".join(texts[starts[-1] :])
        else:
            line = texts[-1] if texts else (self.stdout.strip().splitlines() or [""])[-1]
        line = re.sub(r"\s+", " ", line)
        return line if len(line) <= limit else line[: limit - 3] + "..."

    def said(self) -> str:
        n = len(self.lines)
        if not n and not self.stdout.strip():
            return f"exit {self.rc}, nothing printed"
        return f'exit {self.rc}, {n} stderr line{"s" if n != 1 else ""}: "{self.last()}"'


def fingerprint(folder: Path) -> dict[str, str]:
    folder = Path(folder)
    if not folder.exists():
        return {}
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".scpo.lock"
    }


def lost(before: dict[str, str], folder: Path) -> str:
    after = fingerprint(folder)
    changed = [k for k in before if after.get(k) != before[k]]
    return "no" if not changed else f"yes: {len(changed)} of {len(before)} files of the earlier run gone or replaced"


def history_iterations(run: Path) -> list[int]:
    import csv

    path = run / "history.csv"
    if not path.exists():
        return []
    with open(path) as f:
        return [int(float(r["iteration"])) for r in csv.DictReader(f)]


def _rows(path: Path) -> list[dict]:
    import csv

    if not path.exists():
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def summary(run: Path) -> dict:
    try:
        return json.loads((run / "summary.json").read_text())
    except (OSError, ValueError):
        return {}


# ------------------------------------------------------------------------------------------------------------- cases
CASES = []


def case(title: str):
    def register(fn):
        CASES.append((fn.__name__, title, fn))
        return fn

    return register


@case("fresh `train` with a misspelled Hub model aimed at a folder holding a finished run")
def misspelled_model_on_finished_run(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "c1")
    before = fingerprint(run)
    o = c.run("train", *SMOKE, "--out", run, "--set", MISSPELLED)
    return {
        "said": o.said() + f" after {o.seconds:.0f} s",
        "lost": lost(before, run),
        "ok": o.rc != 0 and len(o.lines) == 1,
    }


@case("the same with `--overwrite`")
def misspelled_model_overwrite(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "c2")
    before = fingerprint(run)
    o = c.run("train", *SMOKE, "--out", run, "--set", MISSPELLED, "--overwrite")
    return {
        "said": o.said() + f" after {o.seconds:.0f} s",
        "lost": lost(before, run),
        "ok": o.rc != 0 and len(o.lines) == 1 and "policy.profile" in o.last(),
    }


@case("`train --overwrite` with a missing data folder (`--set data.root=...`)")
def missing_data_overwrite(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "c3")
    before = fingerprint(run)
    o = c.run("train", *SMOKE, "--out", run, "--overwrite", "--set", f"data.root={c.work / 'no-data'}")
    return {"said": o.said(), "lost": lost(before, run), "ok": o.rc != 0 and len(o.lines) == 1}


@case("fresh `train` (valid config) on a folder holding a finished run")
def fresh_on_finished_run(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "c4")
    before = fingerprint(run)
    o = c.run("train", *SMOKE, "--out", run, "--set", "train.seed=1")
    return {"said": o.said(), "lost": lost(before, run), "ok": o.rc != 0 and len(o.lines) == 1}


@case("`train --overwrite` (valid config) on a finished run")
def overwrite_valid(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "c5")
    o = c.run("train", *SMOKE, "--out", run, "--overwrite", "--set", "train.seed=1", "--set", "train.iterations=1")
    s = summary(run)
    right = (
        o.rc == 0
        and s.get("seed") == 1
        and history_iterations(run) == [0]
        and sorted(p.name for p in (run / "checkpoints").iterdir()) == ["iter_0001"]
    )
    return {
        "said": o.said(),
        "lost": "replaced, as asked" if right else "n/a",
        "ok": right or (o.rc != 0 and len(o.lines) == 1),
    }


@case("`train --resume` on a folder with no checkpoint")
def resume_without_checkpoint(c: Checkout, base: Path) -> dict:
    run = c.work / "c6"
    shutil.rmtree(run, ignore_errors=True)
    o = c.run("train", *SMOKE, "--out", run, "--resume")
    return {
        "said": o.said() + ("; trained a fresh run" if summary(run) else ""),
        "lost": "no",
        "ok": o.rc != 0 and len(o.lines) == 1 and not run.exists(),
    }


@case("two `train` processes on one folder (seed 0, then seed 1 a few seconds later)")
def two_writers(c: Checkout, base: Path) -> dict:
    run = c.work / "c7"
    shutil.rmtree(run, ignore_errors=True)
    first = c.spawn("train", *SMOKE, "--out", run, "--set", "train.iterations=4")
    deadline = time.time() + 300
    while not (run / "history.csv").exists() and not (run / "provenance.json").exists():
        if first.poll() is not None or time.time() > deadline:
            break
        time.sleep(0.2)
    o = c.run("train", *SMOKE, "--out", run, "--set", "train.iterations=4", "--set", "train.seed=1")
    rc_first = first.wait(timeout=900)
    s = summary(run)
    iters = history_iterations(run)
    clean = iters == [0, 1, 2, 3] and s.get("seed") == 0 and o.rc != 0
    return {
        "said": f"first exit {rc_first}; second " + o.said() + f" after {o.seconds:.0f} s",
        "lost": "no" if clean else f"mixed: history iterations {iters}, summary seed {s.get('seed')}",
        "ok": clean and len(o.lines) == 1 and "in use by pid" in o.last(),
    }


@case("`train --resume` after the run was killed with SIGKILL (its lock left behind)")
def resume_after_kill(c: Checkout, base: Path) -> dict:
    run = c.work / "c8"
    shutil.rmtree(run, ignore_errors=True)
    victim = c.spawn("train", *SMOKE, "--out", run, "--set", "train.iterations=3")
    deadline = time.time() + 600
    while not (run / "checkpoints" / "iter_0001" / "state.json").exists() and time.time() < deadline:
        if victim.poll() is not None:
            break
        time.sleep(0.1)
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait()
    o = c.run("train", *SMOKE, "--out", run, "--set", "train.iterations=3", "--resume")
    right = o.rc == 0 and history_iterations(run) == [0, 1, 2]
    note = next((ln for ln in o.lines if "lock" in ln), "")
    return {"said": o.said() + (f'; "{note}"' if note else ""), "lost": "no" if right else "yes", "ok": right}


@case(
    "the README's sweep (`--grid method=scpo --grid credit.scpo.tau=0.6,0.8`), with a manual run at "
    "runs/alfworld/scpo/seed0"
)
def readme_sweep(c: Checkout, base: Path) -> dict:
    manual = c.repo / "runs" / "alfworld" / "scpo" / "seed0"
    shutil.rmtree(manual, ignore_errors=True)
    manual.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(base, manual)
    before = fingerprint(manual)
    out = c.work / "sweep1"
    shutil.rmtree(out, ignore_errors=True)
    o = c.run(
        "sweep",
        "notebooks/02_train.ipynb",
        "--grid",
        "profile=smoke",
        "--grid",
        "method=scpo",
        "--grid",
        "credit.scpo.tau=0.6,0.8",
        "--out",
        out,
        timeout=1800,
    )
    rows = _rows(out / "summary.csv")
    dirs = [r.get("point_dir") or r.get("run_dir") or r.get("result.run_dir") for r in rows]
    taus = {}
    for d in dirs:
        record = Path(d) / "provenance.json" if d else None
        if record and record.exists():
            taus[d] = json.loads(record.read_text())["config"]["credit"]["scpo"]["tau"]
    separate = len(set(dirs)) == len(rows) == 2 and sorted(taus.values()) == [0.6, 0.8]
    tcp = o.stderr.count("running over TCP")
    return {
        "said": f"exit {o.rc}; points' folders: {', '.join(sorted(set(map(str, dirs))))}; kernel TCP warnings: {tcp}",
        "lost": lost(before, manual) if not separate or lost(before, manual) != "no" else "no",
        "ok": separate and lost(before, manual) == "no" and o.rc == 0,
    }


@case("a sweep whose second point fails (`--grid data.root=data,<missing>`)")
def sweep_failing_point(c: Checkout, base: Path) -> dict:
    out = c.work / "sweep2"
    shutil.rmtree(out, ignore_errors=True)
    o = c.run(
        "sweep",
        "notebooks/02_train.ipynb",
        "--grid",
        "profile=smoke",
        "--grid",
        f"data.root=data,{c.work / 'no-data'}",
        "--grid",
        "train.iterations=1",
        "--out",
        out,
        timeout=1800,
    )
    rows = _rows(out / "summary.csv")
    status = rows[1]["status"] if len(rows) > 1 else "(no summary)"
    profile = rows[0].get("profile") if rows else None
    ok = o.rc != 0 and "DataError" in status and profile == "smoke"
    return {
        "said": f'exit {o.rc}; status "{status[:160]}"; the `profile` column reads {profile!r}',
        "lost": "no",
        "ok": ok,
    }


@case("`scpo sweep --profile smoke --set train.iterations=1`")
def sweep_profile_set(c: Checkout, base: Path) -> dict:
    out = c.work / "sweep3"
    shutil.rmtree(out, ignore_errors=True)
    o = c.run(
        "sweep",
        "notebooks/02_train.ipynb",
        "--profile",
        "smoke",
        "--set",
        "train.iterations=1",
        "--grid",
        "method=grpo",
        "--out",
        out,
        timeout=1800,
    )
    rows = _rows(out / "summary.csv")
    iters = rows[0].get("result.iterations") if rows else None
    return {
        "said": o.said() if o.rc else f"exit 0; the point trained {iters} iteration(s) on the smoke profile",
        "lost": "no",
        "ok": o.rc == 0 and iters == "1",
    }


@case("`train --resume` with another method, seed and lr")
def resume_mismatch(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "c12")
    before = fingerprint(run)
    o = c.run(
        "train",
        *SMOKE,
        "--out",
        run,
        "--resume",
        "--method",
        "scpo",
        "--seed",
        "1",
        "--set",
        "train.lr=0.01",
        "--set",
        "train.iterations=3",
    )
    s = summary(run)
    mixed = o.rc == 0 and s.get("method") == "scpo"
    return {
        "said": o.said() + (f"; summary now says method {s.get('method')}, seed {s.get('seed')}" if mixed else ""),
        "lost": "mixed: iterations 0-1 gigpo seed 0, iteration 2 scpo seed 1, labelled scpo"
        if mixed
        else lost(before, run),
        "ok": o.rc != 0 and len(o.lines) == 1,
    }


@case("provenance of a run folder and its checkpoints (`--set train.lr=0.002`)")
def provenance(c: Checkout, base: Path) -> dict:
    run = c.work / "c13"
    shutil.rmtree(run, ignore_errors=True)
    o = c.run("train", *SMOKE, "--out", run, "--set", "train.lr=0.002", "--set", "train.iterations=1")
    record = {}
    for path in (run / "provenance.json", run / "checkpoints" / "iter_0001" / "state.json"):
        try:
            data = json.loads(path.read_text())
            record[path.name] = data.get("provenance", data) if path.name == "state.json" else data
        except (OSError, ValueError):
            record[path.name] = {}
    has = {name: [k for k in ("config", "overrides", "scpo_version", "git") if k in r] for name, r in record.items()}
    s = summary(run)
    full = (
        all(len(v) == 4 for v in has.values())
        and record["provenance.json"].get("overrides", {}).get("train.lr") == 0.002
    )
    return {
        "said": f"exit {o.rc}; provenance.json: {has['provenance.json'] or 'absent'}; checkpoint state.json: "
        f"{has['state.json'] or 'iterations_done, method only'}; summary.json keys: "
        f"{', '.join(k for k in ('profile', 'policy', 'overrides', 'git') if k in s)}",
        "lost": "no",
        "ok": full,
    }


@case("`scpo eval` of a WebShop run (no env option)")
def eval_webshop_run(c: Checkout, base: Path) -> dict:
    run = c.work / "c14"
    shutil.rmtree(run, ignore_errors=True)
    t = c.run("train", *SMOKE, "--env", "webshop", "--out", run, "--set", "train.iterations=1")
    out = c.work / "c14-eval"
    shutil.rmtree(out, ignore_errors=True)
    o = c.run("eval", *SMOKE, "--checkpoint", run, "--out", out)
    try:
        env = json.loads((out / "eval.json").read_text())["env"]
    except (OSError, ValueError, KeyError):
        env = None
    return {
        "said": (f"training exit {t.rc}; " if t.rc else "")
        + f"exit {o.rc}; evaluated on {env}"
        + (f'; "{o.last()}"' if o.rc else ""),
        "lost": "no",
        "ok": o.rc == 0 and env == "webshop",
    }


@case("`papermill notebooks/03_evaluate.ipynb ... -p enviroment webshop` (misspelled parameter)")
def notebook_misspelled_parameter(c: Checkout, base: Path) -> dict:
    out = c.work / "c15-eval"
    shutil.rmtree(out, ignore_errors=True)
    nb = c.work / "c15.ipynb"
    o = c.tool(
        sys.executable,
        "-m",
        "papermill",
        "notebooks/03_evaluate.ipynb",
        str(nb),
        "-k",
        "python3",
        "--no-progress-bar",
        "-p",
        "enviroment",
        "webshop",
        "-p",
        "profile",
        "smoke",
        "-p",
        "checkpoint",
        str(base),
        "-p",
        "out_dir",
        str(out),
    )
    lines = o.stderr.splitlines()
    error = next(
        (ln for ln in lines if ln.startswith("NotebookParameterError:")),
        next((ln for ln in lines if "Passed unknown" in ln), ""),
    )
    wrote = (out / "eval.json").exists()
    return {
        "said": f'exit {o.rc}; "{error.strip()[:200]}"' + ("; wrote eval.json for alfworld" if wrote else ""),
        "lost": "no",
        "ok": o.rc != 0 and not wrote and "enviroment" in error,
    }


def _one_line_case(o: Outcome, extra: str = "") -> dict:
    return {"said": o.said() + extra, "lost": "no", "ok": o.rc != 0 and len(o.lines) == 1}


@case("`train` with data.root pointing nowhere (empty run folder)")
def missing_data(c: Checkout, base: Path) -> dict:
    run = c.work / "c16"
    shutil.rmtree(run, ignore_errors=True)
    return _one_line_case(c.run("train", *SMOKE, "--out", run, "--set", f"data.root={c.work / 'no-data'}"))


@case("`scpo eval` of a folder holding no model")
def eval_missing_checkpoint(c: Checkout, base: Path) -> dict:
    return _one_line_case(c.run("eval", *SMOKE, "--checkpoint", c.work / "no-such-run", "--out", c.work / "c17"))


@case("`train` on data with a corrupt game file")
def corrupt_game(c: Checkout, base: Path) -> dict:
    root = c.work / "corrupt-data"
    shutil.rmtree(root, ignore_errors=True)
    games = c.repo / "tests" / "fixtures" / "alfworld"
    shutil.copytree(games, root / "alfworld")
    for game in (root / "alfworld" / "json_2.1.1" / "train").glob("*/*/game.tw-pddl"):
        game.write_text(game.read_text()[:200])
    run = c.work / "c18"
    shutil.rmtree(run, ignore_errors=True)
    return _one_line_case(c.run("train", *SMOKE, "--out", run, "--set", f"data.root={root}"))


@case("`train` with an unknown Hub model on an offline machine (HF_HUB_OFFLINE unset)")
def unknown_model(c: Checkout, base: Path) -> dict:
    run = c.work / "c19"
    shutil.rmtree(run, ignore_errors=True)
    o = c.run("train", *SMOKE, "--out", run, "--set", MISSPELLED)
    return _one_line_case(o, f" after {o.seconds:.0f} s")


def _damaged_resume(c: Checkout, base: Path, name: str, damage: str) -> dict:
    run = c.copy(base, name)
    path = run / "checkpoints" / "iter_0002" / damage
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    o = c.run("train", *SMOKE, "--out", run, "--resume", "--set", "train.iterations=3")
    note = next((ln for ln in o.lines if "cannot be restored" in ln), "")
    right = o.rc == 0 and history_iterations(run) == [0, 1, 2] and damage in note
    return {
        "said": (f'exit 0; "{note[:200]}"' if right else o.said()),
        "lost": "no",
        "ok": right or (o.rc != 0 and len(o.lines) == 1 and damage.split("/")[-1] in o.last()),
    }


@case("`train --resume` with the newest checkpoint's optimizer.safetensors truncated")
def truncated_optimizer(c: Checkout, base: Path) -> dict:
    return _damaged_resume(c, base, "c20", "optimizer.safetensors")


@case("`train --resume` with the newest checkpoint's model.safetensors truncated")
def truncated_model(c: Checkout, base: Path) -> dict:
    return _damaged_resume(c, base, "c21", "model/model.safetensors")


@case("`train --resume` with the newest checkpoint's state.json truncated")
def truncated_state(c: Checkout, base: Path) -> dict:
    return _damaged_resume(c, base, "c22", "state.json")


@case("`train --resume` with every checkpoint's model.safetensors truncated")
def all_checkpoints_damaged(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "c23")
    for ckpt in (run / "checkpoints").glob("iter_*"):
        path = ckpt / "model" / "model.safetensors"
        path.write_bytes(path.read_bytes()[:1000])
    before = fingerprint(run)
    o = c.run("train", *SMOKE, "--out", run, "--resume", "--set", "train.iterations=3")
    return {"said": o.said(), "lost": lost(before, run), "ok": o.rc != 0 and len(o.lines) == 1}


@case("`prepare-data` without ALFWorld games anywhere and without network")
def missing_alfworld_source(c: Checkout, base: Path) -> dict:
    home = c.work / "empty-alfworld-home"
    home.mkdir(exist_ok=True)
    o = c.run(
        "prepare-data",
        *SMOKE,
        "--only",
        "alfworld",
        "--set",
        f"data.root={c.work / 'new-data'}",
        "--set",
        f"data.shared_dir={c.work / 'no-shared'}",
        env={"ALFWORLD_DATA": str(home)},
    )
    places = sum(p in o.last(2000) for p in ("$ALFWORLD_DATA", "no-shared/alfworld", "alfworld-download"))
    return {
        "said": o.said() + f" ({places} of 3 places named)",
        "lost": "no",
        "ok": o.rc != 0 and len(o.lines) == 1 and places == 3,
    }


@case("checkpoints kept by a 5-iteration smoke run (checkpoint every iteration)")
def retention(c: Checkout, base: Path) -> dict:
    run = c.work / "c25"
    shutil.rmtree(run, ignore_errors=True)
    o = c.run("train", *SMOKE, "--out", run, "--set", "train.iterations=5")
    kept = sorted(p.name for p in (run / "checkpoints").iterdir()) if (run / "checkpoints").exists() else []
    return {
        "said": f"exit {o.rc}; kept {len(kept)}: {', '.join(kept)}; final model/: {(run / 'model').exists()}",
        "lost": "no",
        "ok": o.rc == 0 and len(kept) == 3 and (run / "model").exists(),
    }


@case("what a smoke `train` prints (with `--set train.skip_zero_advantage=false`, so that updates happen)")
def output(c: Checkout, base: Path) -> dict:
    run = c.work / "c26"
    shutil.rmtree(run, ignore_errors=True)
    o = c.run("train", *SMOKE, "--out", run, "--set", "train.skip_zero_advantage=false")
    bars = len(re.findall(r"Loading weights|Writing model shards", o.stderr))

    def final(label: str) -> str:
        drawn = [
            m.group(1)
            for chunk in re.split(r"[\r\n]", o.stderr)
            if (m := re.search(rf"{label}:\s+\d+%\|[^|]*\|\s*(\d+/\d+)", chunk))
        ]
        return drawn[-1] if drawn else "none"

    rollouts, update = final("iter 1 rollouts"), final("update")
    last = (o.stdout.strip().splitlines() or ["(nothing)"])[-1]
    complete = [s != "none" and s.split("/")[0] == s.split("/")[1] for s in (rollouts, update)]
    right = bars == 0 and all(complete) and "wrote" in last
    return {
        "said": f"{bars} transformers bars; last rollout bar drawn at {rollouts}; update bar: {update}; last stdout "
        f'line: "{last[:140]}"',
        "lost": "no",
        "ok": bool(right),
    }


@case("`dvc repro --dry` and `dvc exp run -S credit.scpo.tau=0.8 --dry` in the clone")
def dvc_dry(c: Checkout, base: Path) -> dict:
    a = c.tool(sys.executable, "-m", "dvc", "repro", "--dry")
    b = c.tool(sys.executable, "-m", "dvc", "exp", "run", "-S", "credit.scpo.tau=0.8", "--dry")
    n = a.stdout.count("Running stage")
    err = next((ln for ln in (a.stderr + b.stderr).splitlines() if "ERROR" in ln), "")
    return {
        "said": f"exit {a.rc} and {b.rc}; {n} stages listed" + (f'; "{err[:160]}"' if err else ""),
        "lost": "no",
        "ok": a.rc == 0 and b.rc == 0,
    }


@case("`dvc plots show` on an offline machine")
def dvc_plots(c: Checkout, base: Path) -> dict:
    o = c.tool(sys.executable, "-m", "dvc", "plots", "show")
    page = c.repo / "dvc_plots" / "index.html"
    text = page.read_text() if page.exists() else ""
    remote = sorted(set(re.findall(r"src=\"(https?://[^\"]+)\"", text)))
    return {
        "said": f"exit {o.rc}; "
        + (
            f"loads {', '.join(remote)}"
            if remote
            else f"{text.count('<img')} embedded PNGs, nothing loaded from the network"
        ),
        "lost": "no",
        "ok": o.rc == 0 and not remote and "<img" in text,
    }


# ------------------------------------------------------------------------------------------------------------- main
def run_all(repo: Path, data: Path, work: Path, out: Path, only: list[str] | None) -> None:
    c = Checkout(repo, data, work)
    base = work / "finished"
    shutil.rmtree(base, ignore_errors=True)
    c.base_outcome = c.run("train", *SMOKE, "--out", base)  # a finished 2-iteration run: the victim of most cases
    assert c.base_outcome.rc == 0, c.base_outcome.stderr[-3000:]
    results = json.loads(out.read_text()) if out.exists() and only else {}
    for name, title, fn in CASES:
        if only and name not in only:
            continue
        t0 = time.time()
        try:
            res = fn(c, base)
        except Exception as err:
            res = {"said": f"the case raised {type(err).__name__}: {err}", "lost": "?", "ok": False}
        res.update(title=title, seconds=round(time.time() - t0, 1))
        results[name] = res
        print(f"[{'ok' if res['ok'] else '--'}] {name}: {res['said'][:200]} | lost: {res['lost']}", flush=True)
        out.write_text(json.dumps(results, indent=2))
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    results["_meta"] = {"commit": commit, "python": sys.version.split()[0]}
    out.write_text(json.dumps(results, indent=2))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(before: Path, after: Path) -> str:
    b, a = json.loads(before.read_text()), json.loads(after.read_text())
    rows = ["| case | before | after | data lost or mixed? (before / after) |", "|---|---|---|---|"]
    for name, title, _ in CASES:
        if name not in a:
            continue
        rb, ra = b.get(name, {"said": "(not run)", "lost": "?"}), a[name]
        mark = "" if ra["ok"] else " **(not fixed)**"
        rows.append(
            f"| {_cell(title)} | {_cell(rb['said'])} | {_cell(ra['said'])}{mark} | "
            f"{_cell(rb['lost'])} / {_cell(ra['lost'])} |"
        )
    meta = (
        f"Before: commit {b.get('_meta', {}).get('commit', '?')}; after: commit "
        f"{a.get('_meta', {}).get('commit', '?')}."
    )
    return "\n".join(rows) + "\n\n" + meta + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--repo", type=Path, required=True)
    r.add_argument("--data", type=Path, required=True)
    r.add_argument("--work", type=Path, required=True)
    r.add_argument("--json", type=Path, required=True)
    r.add_argument("--only", default="", help="comma-separated case names")
    t = sub.add_parser("table")
    t.add_argument("before", type=Path)
    t.add_argument("after", type=Path)
    args = ap.parse_args()
    if args.cmd == "run":
        run_all(args.repo, args.data, args.work, args.json, [x for x in args.only.split(",") if x] or None)
    else:
        print(table(args.before, args.after), end="")


if __name__ == "__main__":
    main()

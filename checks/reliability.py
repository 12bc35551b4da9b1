"""Everyday mistakes of a researcher, run against one checkout of this repository; then the before/after table.

    python checks/reliability.py run --repo CLONE --data DATA --work WORK --json before.json   # a checkout, its results
    python checks/reliability.py table before.json after.json > reports/RELIABILITY.md           # the table

Three groups of cases, each a mistake made in a normal week:
- run folders, checkpoints and resumes: a misspelled model aimed at a finished run, two trainings on one folder, the
  README's sweep, a resume with other settings, a truncated checkpoint file, a missing data source, what a run prints;
- data lost, runs mixed or wrong results without a word: `--overwrite` of a folder that is not a run (a parent of two
  runs, the checkout itself, the data), non-finite learning rates, a resume on other data or after the start model was
  retrained, two evaluations into one folder, a truncated history, a NaN reward, a grid value given twice, a second
  sweep into the same folder;
- one line per mistake: config mistakes (a YAML syntax error, a folder as --params, a negative seed, settings that train
  nothing), paths (a file, a read-only folder or a full disk as --out or data.root), and every command's own inputs
  (credit-map, fidelity, notebook parameters, a resume with changed code, a bad `dvc exp run -S` value).

Issue 59 added, to the second group: a checkpoint or model missing a tensor (resume, eval), `--overwrite` of a sweep
still running, an evaluation of a checkpoint then a resume that prunes it, `-p overwrite false` in the train and
evaluate notebooks, `dvc status` of a train stage after a credit option changed; to the third: no-GPU settings, `scpo
parity` mistakes, credit-map suffixes and unmixed groups, Ctrl-C before the first checkpoint, the gpu profile on a
CPU, booleans as counts, temperature 0, `--jobs 0` / `--gpus` on a CPU, `--set` against the grid, the WebShop data
digest and `~` in a path. Each result records the commit its clone was at (`--only` reruns keep the others').

Each runs the `scpo` command of CLONE (`python -m scpo.cli`, PYTHONPATH=CLONE) on the smoke profile, in folders under
WORK. DATA is a prepared data root (data/alfworld, and data/webshop with its catalogue for the WebShop cases);
CLONE/data is made a link to it. A case records what the command printed (exit code, number of stderr lines, the last
line), whether results were lost or mixed (files of an earlier run compared byte for byte, or the run's own records),
and whether the outcome is the right result or a clear one-line error. The machine is assumed offline (no Hugging Face
Hub, no GitHub). Two cases need root: the read-only folder runs the command as the user nobody (`setpriv`), the full
disk mounts a small tmpfs; without root they fall back to a simulated failure, and say so.
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
        self.shared: Path | None = None  # the shared data folder (ALFWorld tarballs), for the full-disk case
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

    def run(
        self, *args: str, timeout: int = 900, env: dict | None = None, cwd: Path | None = None, as_nobody: bool = False
    ) -> Outcome:
        t0 = time.time()
        user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] if as_nobody else []
        proc = subprocess.run(
            [*user, sys.executable, "-m", "scpo.cli", *map(str, args)],
            cwd=cwd or self.repo,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**self.env, **(env or {})},
        )
        return Outcome(proc.returncode, self.anon(proc.stdout), self.anon(proc.stderr), time.time() - t0)

    def anon(self, text: str) -> str:
        """`text` with this machine's folders named WORK, CLONE, DATA and SHARED (results read the same anywhere)."""
        return _placeholders(text, self)

    def py(self, code: str, *args: str, timeout: int = 900) -> Outcome:
        """`python -c code args` with this checkout's scpo (for the cases that call the library)."""
        return self.tool(sys.executable, "-c", code, *map(str, args), timeout=timeout)

    def spawn(self, *args: str, cwd: Path | None = None) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "scpo.cli", *map(str, args)],
            cwd=cwd or self.repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
        )

    def tool(self, *argv: str, timeout: int = 900) -> Outcome:
        t0 = time.time()
        proc = subprocess.run(list(argv), cwd=self.repo, capture_output=True, text=True, timeout=timeout, env=self.env)
        return Outcome(proc.returncode, self.anon(proc.stdout), self.anon(proc.stderr), time.time() - t0)

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
GROUPS = {
    "runs": "Run folders, checkpoints and resumes",
    "lost": "Data lost, runs mixed, or wrong results without a word",
    "line": "One line per mistake",
}
_GROUP = {"now": "runs"}


def group(name: str) -> None:
    """The group of the cases registered after this call."""
    _GROUP["now"] = name


def case(title: str):
    def register(fn):
        CASES.append((fn.__name__, title, fn, _GROUP["now"]))
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
    n = 20  # iterations of the first: it is still running when the second, slow to start on a busy machine, looks
    first = c.spawn("train", *SMOKE, "--out", run, "--set", f"train.iterations={n}")
    deadline = time.time() + 300
    while not (run / "history.csv").exists() and not (run / "provenance.json").exists():
        if first.poll() is not None or time.time() > deadline:
            break
        time.sleep(0.2)
    o = c.run("train", *SMOKE, "--out", run, "--set", f"train.iterations={n}", "--set", "train.seed=1")
    rc_first = first.wait(timeout=1800)
    s = summary(run)
    iters = history_iterations(run)
    clean = iters == list(range(n)) and s.get("seed") == 0 and o.rc != 0
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
    status = c.anon(rows[1]["status"]) if len(rows) > 1 else "(no summary)"
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


def _papermill(c: Checkout, notebook: str, out_nb: Path, *params: str) -> Outcome:
    return c.tool(
        sys.executable, "-m", "papermill", notebook, str(out_nb), "-k", "python3", "--no-progress-bar", *params,
        timeout=1800,
    )  # fmt: skip


def _has_notebook_command(c: Checkout) -> bool:
    """Whether the clone has `scpo notebook` (Papermill's arguments, a failed cell printed as the cell showed it)."""
    return (c.repo / "scpo" / "pipeline" / "run_notebook.py").exists()


def _scpo_notebook(c: Checkout, notebook: str, out_nb: Path, *params: str) -> Outcome:
    return c.run("notebook", notebook, str(out_nb), "-k", "python3", "--no-progress-bar", *params, timeout=1800)


def _traceback_in(o: Outcome) -> bool:
    return any(ln.startswith("Traceback (most recent call last)") for ln in o.lines)


def _papermill_said(o: Outcome) -> str:
    """What `papermill` printed, as a user reads it: its exit code, every stderr line (its own log lines included),
    whether they hold a Python traceback (Papermill's, through click, ending in PapermillExecutionError and the cell's
    error), and the cell's error (the last `Name(Error|Exception): ...` line that is not Papermill's own)."""
    errors = [
        ln.strip()
        for ln in o.lines
        if re.match(r"[A-Za-z_][\w.]*(Error|Exception): ", ln.strip()) and not ln.strip().startswith("papermill.")
    ]
    n = len(o.lines)
    kind = " (a traceback through click and Papermill)" if _traceback_in(o) else ""
    error = f', ending in "{errors[-1][:200]}"' if errors else ""
    return f"exit {o.rc}, {n} stderr line{'s' if n != 1 else ''}{kind}{error}"


def _notebook_verdict(pm: Outcome, lost_pm: str, ours: Outcome | None, lost_ours: str, expect: str) -> dict:
    """A notebook case: `papermill` as the user typed it, then (where the clone has it) `scpo notebook` with the same
    arguments. `papermill` always wraps a failed cell in its own traceback (no notebook can fail without it), so the
    one-line verdict is on `scpo notebook`; without it, on `papermill`. Both must fail and keep the data."""
    said = "`papermill`: " + _papermill_said(pm)
    if ours is None:
        one_line = len(pm.lines) == 1 and not _traceback_in(pm) and expect in pm.last()
        return {"said": said, "lost": lost_pm, "ok": pm.rc != 0 and lost_pm == "no" and one_line}
    one_line = len(ours.lines) == 1 and not _traceback_in(ours) and expect in ours.last()
    lost_both = lost_pm if lost_pm != "no" else lost_ours
    return {
        "said": said + "; `scpo notebook`, the same arguments: " + ours.said(),
        "lost": lost_both,
        "ok": pm.rc != 0 and ours.rc != 0 and lost_both == "no" and one_line,
    }


@case(
    "`papermill notebooks/03_evaluate.ipynb ... -p enviroment webshop` (misspelled parameter), and `scpo notebook` "
    "with the same arguments"
)
def notebook_misspelled_parameter(c: Checkout, base: Path) -> dict:
    out = c.work / "c15-eval"
    params = ("-p", "enviroment", "webshop", "-p", "profile", "smoke", "-p", "checkpoint", str(base), "-p", "out_dir")
    results = []
    for name, command in (("c15", _papermill), ("c15-ours", _scpo_notebook)):
        if command is _scpo_notebook and not _has_notebook_command(c):
            results.append((None, "no"))
            continue
        shutil.rmtree(out, ignore_errors=True)
        o = command(c, "notebooks/03_evaluate.ipynb", c.work / f"{name}.ipynb", *params, str(out))
        results.append((o, "wrong: wrote eval.json for alfworld" if (out / "eval.json").exists() else "no"))
    (pm, lost_pm), (ours, lost_ours) = results
    return _notebook_verdict(pm, lost_pm, ours, lost_ours, "'enviroment'")


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


# ------------------------------------------------------------------------ data lost, runs mixed, wrong results
group("lost")


def _verdict(o: Outcome, before: dict[str, str], folder: Path, extra: str = "") -> dict:
    """A refusal case: one clear line, and `folder` byte for byte as it was."""
    gone = lost(before, folder)
    return {"said": o.said() + extra, "lost": gone, "ok": o.rc != 0 and len(o.lines) == 1 and gone == "no"}


@case("`train --out PARENT --overwrite`, PARENT holding two finished runs and a notes file")
def overwrite_parent_of_runs(c: Checkout, base: Path) -> dict:
    parent = c.work / "l1"
    shutil.rmtree(parent, ignore_errors=True)
    for name in ("grpo-seed0", "scpo-seed0"):
        shutil.copytree(base, parent / name, symlinks=True)
    (parent / "notes.md").write_text("what I tried on Tuesday\n")
    before = fingerprint(parent)
    o = c.run("train", *SMOKE, "--out", parent, "--overwrite", "--set", "train.iterations=1")
    return _verdict(o, before, parent)


@case("`scpo train --out . --overwrite` run in a checkout (a git clone, with `--set data.root=DATA`)")
def overwrite_the_checkout(c: Checkout, base: Path) -> dict:
    copy = c.work / "l2-checkout"
    shutil.rmtree(copy, ignore_errors=True)
    c.tool("git", "clone", "-q", str(c.repo), str(copy))
    before = fingerprint(copy)
    o = c.run("train", *SMOKE, "--out", ".", "--overwrite", "--set", f"data.root={c.data}", cwd=copy)
    left = sorted(p.name for p in copy.iterdir()) if copy.exists() else []
    extra = "" if ".git" in left else f"; the checkout now holds only: {', '.join(left[:8]) or 'nothing'}"
    return _verdict(o, before, copy, extra)


@case("`train --out .. --overwrite` run from inside a finished run's checkpoints/ folder")
def overwrite_above_the_cwd(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "l3")
    before = fingerprint(run)
    o = c.run(
        "train",
        *SMOKE,
        "--params",
        c.repo / "params.yaml",
        "--out",
        "..",
        "--overwrite",
        "--set",
        f"data.root={c.data}",
        "--set",
        "train.iterations=1",
        cwd=run / "checkpoints",
    )
    return _verdict(o, before, run)


@case("`train --out PROJECT --overwrite --set data.root=PROJECT/data` (the run folder holds the data)")
def overwrite_the_data(c: Checkout, base: Path) -> dict:
    project = c.work / "l4"
    shutil.rmtree(project, ignore_errors=True)
    project.mkdir()
    shutil.copytree(c.data / "alfworld", project / "data" / "alfworld", symlinks=True)
    before = fingerprint(project / "data" / "alfworld" / "json_2.1.1" / "valid_seen")
    o = c.run(
        "train",
        *SMOKE,
        "--out",
        project,
        "--overwrite",
        "--set",
        f"data.root={project / 'data'}",
        "--set",
        "train.iterations=1",
    )
    return _verdict(o, before, project / "data" / "alfworld" / "json_2.1.1" / "valid_seen")


def _nonfinite_weights(run: Path) -> int:
    import numpy as np
    from safetensors.numpy import load_file

    bad = 0
    for f in sorted(run.rglob("*.safetensors")):
        if f.parent.name != "model":
            continue
        try:
            bad += sum(int(not np.isfinite(t).all()) for t in load_file(f).values())
        except Exception:
            continue
    return bad


@case("`train --set train.lr=.inf --set train.skip_zero_advantage=false` (every step updates)")
def lr_inf(c: Checkout, base: Path) -> dict:
    run = c.work / "l5"
    shutil.rmtree(run, ignore_errors=True)
    o = c.run("train", *SMOKE, "--out", run, "--set", "train.lr=.inf", "--set", "train.skip_zero_advantage=false")
    bad = _nonfinite_weights(run)
    return {
        "said": o.said() + (f"; {bad} non-finite weight tensors written" if bad else ""),
        "lost": "no" if not bad else f"yes: {bad} weight tensors written as NaN / inf",
        "ok": o.rc == 2 and len(o.lines) == 1 and "train.lr" in o.last() and not run.exists(),
    }


@case("`train --set train.lr=1e30 --set train.skip_zero_advantage=false` (finite, but the updates blow up)")
def lr_huge(c: Checkout, base: Path) -> dict:
    run = c.work / "l6"
    shutil.rmtree(run, ignore_errors=True)
    o = c.run(
        "train",
        *SMOKE,
        "--out",
        run,
        "--set",
        "train.lr=1e30",
        "--set",
        "train.skip_zero_advantage=false",
        "--set",
        "train.iterations=3",
    )
    bad = _nonfinite_weights(run)
    rows = _rows(run / "history.csv")
    nan_rows = sum(any(v.lower() in ("nan", "inf", "-inf") for v in r.values()) for r in rows)
    stopped = o.rc != 0 and len(o.lines) == 1 and "iteration" in o.last()
    return {
        "said": o.said() + f"; {bad} non-finite weight tensors and {nan_rows} non-finite history rows written",
        "lost": "no" if not bad and not nan_rows else "yes: non-finite values written",
        "ok": (stopped or o.rc == 0) and not bad and not nan_rows,
    }


@case("`train --resume --set data.root=tests/fixtures` on a finished run of the full data (a third iteration)")
def resume_other_pool(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "l7")
    before = fingerprint(run)
    o = c.run(
        "train",
        *SMOKE,
        "--out",
        run,
        "--resume",
        "--set",
        "data.root=tests/fixtures",
        "--set",
        "data.alfworld_require_all=false",
        "--set",
        "train.iterations=3",
    )
    mixed = o.rc == 0 and history_iterations(run) == [0, 1, 2]
    return {
        "said": o.said() + ("; iteration 2 drew from the 6 fixture games, 0-1 from 3,553" if mixed else ""),
        "lost": "mixed: iterations of two task pools in one run" if mixed else lost(before, run),
        "ok": o.rc != 0 and len(o.lines) == 1 and lost(before, run) == "no",
    }


@case("`train --resume` after the `train.init_from` SFT folder was retrained (`--overwrite --set train.sft.lr=0.01`)")
def resume_retrained_start(c: Checkout, base: Path) -> dict:
    sft, run = c.work / "l8-sft", c.work / "l8-rl"
    for folder in (sft, run):
        shutil.rmtree(folder, ignore_errors=True)
    a = c.run("train", *SMOKE, "--stage", "sft", "--out", sft)
    b = c.run("train", *SMOKE, "--out", run, "--set", f"train.init_from={sft}", "--set", "train.iterations=1")
    d = c.run("train", *SMOKE, "--stage", "sft", "--out", sft, "--overwrite", "--set", "train.sft.lr=0.01")
    if a.rc or b.rc or d.rc:
        return {"said": f"setup failed: {(a if a.rc else b if b.rc else d).said()}", "lost": "?", "ok": False}
    before = fingerprint(run)
    o = c.run(
        "train", *SMOKE, "--out", run, "--resume", "--set", f"train.init_from={sft}", "--set", "train.iterations=2"
    )
    mixed = o.rc == 0
    return {
        "said": o.said() + ("; iteration 1 trained with the new warm start as its KL reference" if mixed else ""),
        "lost": "mixed: two start models in one run" if mixed else lost(before, run),
        "ok": o.rc != 0 and len(o.lines) == 1 and lost(before, run) == "no",
    }


@case("two `scpo eval` into one `--out` at once")
def two_evals(c: Checkout, base: Path) -> dict:
    out = c.work / "l9-eval"
    shutil.rmtree(out, ignore_errors=True)
    # the first evaluates every task of each split, so that it is still running when the second, slow to start on a
    # busy machine, looks; it is stopped with Ctrl-C once the second has returned
    first = c.spawn("eval", *SMOKE, "--checkpoint", base, "--out", out, "--set", "eval.n_episodes=null")
    deadline = time.time() + 300
    while not out.exists() and first.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    o = c.run("eval", *SMOKE, "--checkpoint", base, "--out", out, "--set", "eval.n_episodes=2")
    running = first.poll() is None
    first.send_signal(signal.SIGINT)
    first.communicate(timeout=900)
    n = json.loads((out / "eval.json").read_text())["splits"] if (out / "eval.json").exists() else {}
    got = sorted({r["n"] for r in n.values()})
    return {
        "said": f"first still running when the second returned: {'yes' if running else 'no'}; second {o.said()}; "
        f"eval.json: {f'holds n={got}' if got else 'none (the first was stopped)'}",
        "lost": "yes: the second wrote eval.json" if 2 in got else "no",
        "ok": running and o.rc != 0 and len(o.lines) == 1 and "in use" in o.last() and 2 not in got,
    }


@case("`train --resume` after history.csv was cut to its header and first row")
def truncated_history(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "l10")
    lines = (run / "history.csv").read_text().splitlines()
    (run / "history.csv").write_text("\n".join(lines[:2]) + "\n")
    o = c.run("train", *SMOKE, "--out", run, "--resume", "--set", "train.iterations=3")
    iters, s = history_iterations(run), summary(run)
    right = o.rc == 0 and iters == [0, 1, 2] and s.get("iterations") == 3
    note = next((ln for ln in o.lines if "history" in ln), "")
    ckpts = sorted(p.name for p in (run / "checkpoints").glob("iter_*"))
    return {
        "said": (f'exit 0; "{note[:200]}"' if right else o.said()) + f"; history iterations {iters}, "
        f"summary.json says {s.get('iterations')} iterations, checkpoints {', '.join(ckpts)}",
        "lost": "no"
        if right or (o.rc != 0 and ckpts[-1:] == ["iter_0002"])
        else "mixed: model/ and summary.json of the old run, checkpoints of the new",
        "ok": right or (o.rc != 0 and len(o.lines) == 1 and ckpts[-1:] == ["iter_0002"]),
    }


NAN_REWARD = """
import numpy as np
from scpo.credit import compute_advantages
from scpo.credit.registry import available_methods
from scpo.credit.synthetic import synthetic_batch
b = synthetic_batch(n_groups=2, group_size=4, max_steps=6, seed=0)
b.reward = b.reward.copy(); b.reward[0] = np.nan
b.oracle_progress = np.zeros(b.n_rows)
out = []
for m in available_methods():
    extra = {"hindsight_logprob": -np.ones(b.n_rows)} if m == "hcapo" else {}
    try:
        adv = compute_advantages(m, b, **extra).advantages
        values = np.unique(adv[b.group_id == b.group_id[0]])
        out.append(f"{m}: no error, group of row 0 all {values[0] if len(values) == 1 else 'mixed'}")
    except ValueError as err:
        out.append(f"{m}: ValueError: {str(err)[:90]}")
print("\\n".join(out))
"""


@case("`compute_advantages(method, batch)` with a NaN reward at row 0, every method")
def nan_reward(c: Checkout, base: Path) -> dict:
    o = c.py(NAN_REWARD)
    lines = o.stdout.strip().splitlines()
    raised = [ln for ln in lines if "ValueError" in ln and "row" in ln]
    silent = [ln.split(":")[0] for ln in lines if "no error" in ln]
    return {
        "said": f"{len(raised)} of {len(lines)} methods raise"
        + (f" ('{raised[0].split(': ', 1)[1]}')" if raised else "")
        + (f"; no error for {', '.join(silent)} (the group's rows get 0)" if silent else ""),
        "lost": "no" if not silent else "wrong: advantage 0 for a whole group without a word",
        "ok": o.rc == 0 and bool(lines) and len(raised) == len(lines),
    }


@case("`scpo sweep notebooks/02_train.ipynb --grid method=grpo,grpo`")
def sweep_duplicate_value(c: Checkout, base: Path) -> dict:
    out = c.work / "l12-sweep"
    shutil.rmtree(out, ignore_errors=True)
    o = c.run(
        "sweep",
        "notebooks/02_train.ipynb",
        "--profile",
        "smoke",
        "--set",
        "train.iterations=1",
        "--grid",
        "method=grpo,grpo",
        "--out",
        out,
        timeout=1800,
    )
    rows = _rows(out / "summary.csv")
    statuses = [r["status"][:60] for r in rows]
    return {
        "said": o.said() + (f"; summary statuses {statuses}" if rows else ""),
        "lost": "mixed: one point's notebook replaced by the other's" if len(rows) == 2 else "no",
        "ok": o.rc == 2 and len(o.lines) == 1 and not out.exists(),
    }


@case("a second `scpo sweep` (`--grid method=gigpo`) into the `--out` of a first one (`--grid method=grpo`)")
def sweep_into_another_sweep(c: Checkout, base: Path) -> dict:
    out = c.work / "l13-sweep"
    shutil.rmtree(out, ignore_errors=True)
    common = ("notebooks/02_train.ipynb", "--profile", "smoke", "--set", "train.iterations=1", "--out", out)
    first = c.run("sweep", *common, "--grid", "method=grpo", timeout=1800)
    if first.rc != 0:
        return {"said": f"the first sweep failed: {first.said()}", "lost": "?", "ok": False}
    before = fingerprint(out)
    o = c.run("sweep", *common, "--grid", "method=gigpo", timeout=1800)
    rows = [r.get("method") for r in _rows(out / "summary.csv")]
    return {
        "said": o.said() + f"; summary.csv lists methods {rows}",
        "lost": lost(before, out),
        "ok": o.rc != 0 and len(o.lines) == 1 and lost(before, out) == "no",
    }


@case("`scpo sweep --overwrite` into that sweep's `--out` after a notes file was added to it")
def sweep_overwrite_with_notes(c: Checkout, base: Path) -> dict:
    out = c.work / "l13-sweep"
    if not (out / "summary.csv").exists():
        return {"said": "(needs the sweep of the case before)", "lost": "?", "ok": False}
    (out / "notes.md").write_text("which point to rerun\n")
    before = fingerprint(out)
    o = c.run(
        "sweep",
        "notebooks/02_train.ipynb",
        "--profile",
        "smoke",
        "--set",
        "train.iterations=1",
        "--out",
        out,
        "--grid",
        "method=gigpo",
        "--overwrite",
        timeout=1800,
    )
    return _verdict(o, before, out, "" if (out / "notes.md").exists() else "; notes.md is gone")


# ------------------------------------------------------------------------------------ one line per mistake
group("line")


def _config_case(c: Checkout, name: str, *args: str, code: int = 2) -> dict:
    run = c.work / name
    shutil.rmtree(run, ignore_errors=True)
    o = c.run("train", *SMOKE, "--out", run, *args)
    left = " and left " + ", ".join(sorted(p.name for p in run.iterdir())) if run.is_dir() else ""
    empty = "; left an empty run folder" if run.is_dir() and not any(run.iterdir()) else left
    return {"said": o.said() + empty, "lost": "no", "ok": o.rc == code and len(o.lines) == 1 and not run.exists()}


@case("`train --params P` where P has a YAML syntax error (an unclosed list on line 3)")
def params_yaml_error(c: Checkout, base: Path) -> dict:
    params = c.work / "u1-params.yaml"
    params.write_text("train:\n  lr: 0.001\n  seed: [0, 1\nrollout:\n  n_tasks: 2\n")
    o = c.run("train", "--params", params, "--out", c.work / "u1")
    return {
        "said": o.said(),
        "lost": "no",
        "ok": o.rc == 2 and len(o.lines) == 1 and c.anon(str(params)) in o.last() and "line" in o.last(),
    }


@case("`train --params reports/` (a folder)")
def params_folder(c: Checkout, base: Path) -> dict:
    return _config_case(c, "u2", "--params", c.repo / "reports")


@case("`train --set report.methods=[grpo,scpo` (an unparsable value)")
def unparsable_set(c: Checkout, base: Path) -> dict:
    return _config_case(c, "u3", "--set", "report.methods=[grpo,scpo")


@case("`train --seed -1`")
def negative_seed(c: Checkout, base: Path) -> dict:
    return _config_case(c, "u4", "--seed", "-1")


@case("`train --stage sft --set train.sft.n_demos=0`")
def zero_demos(c: Checkout, base: Path) -> dict:
    return _config_case(c, "u5", "--stage", "sft", "--set", "train.sft.n_demos=0")


@case("`train --stage sft --set train.sft.epochs=0`")
def zero_epochs(c: Checkout, base: Path) -> dict:
    return _config_case(c, "u6", "--stage", "sft", "--set", "train.sft.epochs=0")


@case("`train --set rollout.group_size=1` (every advantage 0, no update)")
def group_of_one(c: Checkout, base: Path) -> dict:
    return _config_case(c, "u7", "--set", "rollout.group_size=1")


@case("`train --env webshop --method oracle` (no planner for WebShop)")
def oracle_on_webshop(c: Checkout, base: Path) -> dict:
    o = _config_case(c, "u8", "--env", "webshop", "--method", "oracle")
    return o


@case("`train --set train.iterations=0`")
def zero_iterations(c: Checkout, base: Path) -> dict:
    run = c.work / "u9"
    shutil.rmtree(run, ignore_errors=True)
    o = c.run("train", *SMOKE, "--out", run, "--set", "train.iterations=0")
    last = (o.stdout.strip().splitlines() or [""])[-1]
    claims = "checkpoints/" in last and not (run / "checkpoints").exists()
    return {
        "said": f'exit {o.rc}; "{last[:200]}"' + ("; no checkpoints/ was written" if claims else ""),
        "lost": "no",
        "ok": o.rc == 0 and not claims and (run / "model").is_dir(),
    }


@case("`train --out FILE`, `eval --out FILE`, `sweep --out FILE` (FILE an existing file)")
def out_is_a_file(c: Checkout, base: Path) -> dict:
    file = c.work / "u10.txt"
    file.write_text("mine\n")
    outs = [
        c.run("train", *SMOKE, "--out", file),
        c.run("eval", *SMOKE, "--checkpoint", base, "--out", file),
        c.run("sweep", "notebooks/02_train.ipynb", "--profile", "smoke", "--grid", "method=grpo", "--out", file),
    ]
    said = "; ".join(f"{cmd}: {o.said()}" for cmd, o in zip(("train", "eval", "sweep"), outs))
    return {
        "said": said,
        "lost": "no" if file.read_text() == "mine\n" else "yes: the file was replaced",
        "ok": all(o.rc != 0 and len(o.lines) == 1 for o in outs) and file.read_text() == "mine\n",
    }


def _read_only_folder(c: Checkout, name: str) -> Path:
    folder = c.work / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    folder.chmod(0o555)
    return folder


def _can_drop_root() -> bool:
    return os.geteuid() == 0 and shutil.which("setpriv") is not None


@case("`train --out RO/run` and `eval --out RO/eval`, RO a read-only folder (run as the user nobody)")
def out_read_only(c: Checkout, base: Path) -> dict:
    if not _can_drop_root():
        return {"said": "(skipped: needs root and setpriv to run as another user)", "lost": "no", "ok": False}
    ro = _read_only_folder(c, "u11-ro")
    env = {"HOME": str(c.work / "u11-home"), "HF_HOME": str(c.work / "u11-home" / "hf")}
    (c.work / "u11-home").mkdir(exist_ok=True)
    (c.work / "u11-home").chmod(0o777)
    readable = c.work / "u11-run"
    shutil.rmtree(readable, ignore_errors=True)
    shutil.copytree(base, readable)
    for p in [readable, *readable.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    a = c.run("train", *SMOKE, "--out", ro / "run", env=env, as_nobody=True)
    b = c.run("eval", *SMOKE, "--checkpoint", readable, "--out", ro / "eval", env=env, as_nobody=True)
    return {
        "said": f"train: {a.said()}; eval: {b.said()}",
        "lost": "no",
        "ok": all(o.rc != 0 and len(o.lines) == 1 for o in (a, b)),
    }


@case("`train` reading a data.root it cannot write (as the user nobody), and `prepare-data` into a read-only folder")
def data_root_read_only(c: Checkout, base: Path) -> dict:
    if not _can_drop_root():
        return {"said": "(skipped: needs root and setpriv to run as another user)", "lost": "no", "ok": False}
    home = c.work / "u12-home"
    home.mkdir(exist_ok=True)
    home.chmod(0o777)
    env = {"HOME": str(home), "HF_HOME": str(home / "hf")}
    work = c.work / "u12-out"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    work.chmod(0o777)
    ro = _read_only_folder(c, "u12-data")
    a = c.run(  # from a folder of the user's own: inside the clone (root's), dvclive writes into .dvc/tmp
        "train",
        *SMOKE,
        "--params",
        c.repo / "params.yaml",
        "--out",
        work / "run",
        "--set",
        f"data.root={c.data}",
        "--set",
        "train.iterations=1",
        env=env,
        as_nobody=True,
        cwd=work,
    )
    b = c.run("prepare-data", *SMOKE, "--only", "alfworld", "--set", f"data.root={ro}", env=env, as_nobody=True)
    return {
        "said": f"train (data only read): {a.said()}; prepare-data: {b.said()}",
        "lost": "no",
        "ok": a.rc == 0 and b.rc != 0 and len(b.lines) == 1 and "corrupt" not in b.last(),
    }


@case("`train` and `prepare-data` with data.root a file")
def data_root_a_file(c: Checkout, base: Path) -> dict:
    file = c.work / "u13-data"
    file.write_text("not a folder\n")
    a = c.run("train", *SMOKE, "--out", c.work / "u13-run", "--set", f"data.root={file}")
    b = c.run("prepare-data", *SMOKE, "--set", f"data.root={file}")
    return {
        "said": f"train: {a.said()}; prepare-data: {b.said()}",
        "lost": "no",
        "ok": all(o.rc != 0 and len(o.lines) == 1 for o in (a, b)) and not (c.work / "u13-run").exists(),
    }


FULL_DISK = """
import errno, sys
from scpo.run import checkpoint
real, calls = checkpoint.write_training_state, []
def full(*a, **k):
    calls.append(1)
    if len(calls) == 2:
        raise OSError(errno.ENOSPC, "No space left on device", str(a[0]))
    return real(*a, **k)
checkpoint.write_training_state = full
from scpo.cli import app
sys.argv = ["scpo", *sys.argv[1:]]
app()
"""


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    return (
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True
        ).returncode
        == 0
    )


@case("a full disk while training (a 6 MB tmpfs as --out; `--set train.keep_checkpoints=null`), then `--resume`")
def disk_full_training(c: Checkout, base: Path) -> dict:
    disk = c.work / "u14-disk"
    if disk.is_mount():
        subprocess.run(["umount", str(disk)])
    shutil.rmtree(disk, ignore_errors=True)
    args = (*SMOKE, "--out", disk / "run", "--set", "train.iterations=8", "--set", "train.keep_checkpoints=null")
    if os.geteuid() == 0 and _mount_tmpfs(disk, "6m"):
        try:
            o = c.run("train", *args)
            subprocess.run(["mount", "-o", "remount,size=256m", str(disk)], capture_output=True)
            r = c.run(
                "train",
                *SMOKE,
                "--out",
                disk / "run",
                "--resume",
                "--set",
                "train.iterations=8",
                "--set",
                "train.keep_checkpoints=null",
            )
            iters = history_iterations(disk / "run")
        finally:
            subprocess.run(["umount", str(disk)], capture_output=True)
        how = ""
    else:
        o = c.tool(sys.executable, "-c", FULL_DISK, "train", *map(str, args))
        r = c.run(
            "train",
            *SMOKE,
            "--out",
            disk / "run",
            "--resume",
            "--set",
            "train.iterations=8",
            "--set",
            "train.keep_checkpoints=null",
        )
        iters = history_iterations(disk / "run")
        how = " (simulated: no tmpfs could be mounted, the second checkpoint write raises ENOSPC)"
    return {
        "said": o.said() + how + f"; after freeing space, --resume: exit {r.rc}, history iterations {iters}",
        "lost": "no" if r.rc == 0 and iters == list(range(8)) else "?",
        "ok": o.rc != 0 and len(o.lines) == 1 and "no space left" in o.last() and r.rc == 0,
    }


@case("a full disk while `prepare-data` unpacks the ALFWorld tarballs (a 2 MB tmpfs as data.root)")
def disk_full_prepare(c: Checkout, base: Path) -> dict:
    disk = c.work / "u15-disk"
    if disk.is_mount():
        subprocess.run(["umount", str(disk)])
    shutil.rmtree(disk, ignore_errors=True)
    if c.shared is None or not (c.shared / "alfworld").is_dir():
        return {"said": "(skipped: needs --shared, the folder holding alfworld/*.tar.gz)", "lost": "no", "ok": False}
    args = (
        "prepare-data",
        *SMOKE,
        "--only",
        "alfworld",
        "--set",
        f"data.root={disk / 'data'}",
        "--set",
        f"data.shared_dir={c.shared}",
    )
    env = {"ALFWORLD_DATA": str(c.work / "u15-no-home")}
    if os.geteuid() == 0 and _mount_tmpfs(disk, "2m"):
        try:
            o = c.run(*args, env=env)
        finally:
            subprocess.run(["umount", str(disk)], capture_output=True)
        how = ""
    else:
        return {"said": "(skipped: no tmpfs could be mounted)", "lost": "no", "ok": False}
    return {
        "said": o.said() + how,
        "lost": "no",
        "ok": o.rc != 0 and len(o.lines) == 1 and "no space left" in o.last() and "corrupt" not in o.last(),
    }


@case("`train --out RUN/rollouts/again` (a run folder inside a finished run)")
def out_inside_a_run(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "u16")
    before = fingerprint(run)
    o = c.run("train", *SMOKE, "--out", run / "rollouts" / "again", "--set", "train.iterations=1")
    return _verdict(o, before, run)


@case(
    "`credit-map` of a folder with no rollouts, of an iteration not saved (`--iteration 7`), of a group not "
    "there (`--group 99`)"
)
def credit_map_inputs(c: Checkout, base: Path) -> dict:
    outs = [
        c.run("credit-map", c.work / "no-such-run", "--out", c.work / "u17.png"),
        c.run("credit-map", base, "--iteration", "7", "--out", c.work / "u17.png"),
        c.run("credit-map", base, "--group", "99", "--out", c.work / "u17.png"),
    ]
    return {
        "said": "; ".join(o.said() for o in outs),
        "lost": "no",
        "ok": all(o.rc != 0 and len(o.lines) == 1 for o in outs),
    }


@case("`fidelity --eps abc`, and `fidelity` without ALFWorld data (`--set data.root=WORK/no-data`)")
def fidelity_inputs(c: Checkout, base: Path) -> dict:
    reports = c.work / "u18-reports"
    shutil.rmtree(reports, ignore_errors=True)
    a = c.run("fidelity", *SMOKE, "--eps", "abc", "--reports-dir", reports)
    b = c.run("fidelity", *SMOKE, "--set", f"data.root={c.work / 'no-data'}", "--reports-dir", reports)
    wrote = sorted(p.name for p in reports.rglob("*") if p.is_file()) if reports.exists() else []
    return {
        "said": f"{a.said()}; {b.said()}" + (f"; wrote {len(wrote)} files" if wrote else ""),
        "lost": "no",
        "ok": all(o.rc != 0 and len(o.lines) == 1 for o in (a, b)) and not wrote,
    }


@case("`fidelity --trained` over runs whose alfworld/grpo/seed0 holds a WebShop run")
def fidelity_webshop_run(c: Checkout, base: Path) -> dict:
    runs = c.work / "u19-runs"
    shutil.rmtree(runs, ignore_errors=True)
    t = c.run(
        "train",
        *SMOKE,
        "--env",
        "webshop",
        "--out",
        runs / "alfworld" / "grpo" / "seed0",
        "--set",
        "train.iterations=1",
    )
    shutil.copytree(base, runs / "alfworld" / "gigpo" / "seed0")
    reports = c.work / "u19-reports"
    shutil.rmtree(reports, ignore_errors=True)
    o = c.run(
        "fidelity",
        *SMOKE,
        "--tasks",
        "2",
        "--estimators",
        "grpo,gigpo",
        "--no-sweep",
        "--reports-dir",
        reports,
        "--set",
        f"train.out_dir={runs}",
        "--set",
        "report.methods=[grpo, gigpo]",
        timeout=1800,
    )
    table = reports / "tables" / "credit_fidelity_trained.md"
    skip = next((ln for ln in o.lines if ln.startswith("skipping")), "")
    return {
        "said": (f"training exit {t.rc}; " if t.rc else "")
        + (f'exit 0; "{skip}"' if o.rc == 0 else o.said())
        + ("; the trained table was written" if table.exists() else ""),
        "lost": "no",
        "ok": o.rc == 0 and bool(skip) and table.exists(),
    }


@case(
    "`papermill notebooks/02_train.ipynb OUT -p seed -1` (a bad notebook parameter), and `scpo notebook` with the "
    "same arguments"
)
def notebook_bad_parameter(c: Checkout, base: Path) -> dict:
    nb = c.work / "u20.ipynb"
    params = ("-p", "seed", "-1", "-p", "profile", "smoke", "-p", "out_dir", str(c.work / "u20-run"))
    pm = _papermill(c, "notebooks/02_train.ipynb", nb, *params)
    shown = []
    if nb.exists():
        for cell in json.loads(nb.read_text())["cells"]:
            for out in cell.get("outputs", []):
                if out.get("output_type") == "error":
                    shown = out.get("traceback", [])
    error = re.sub(r"\x1b\[[0-9;]*m", "", " ".join(shown[-1:]))
    in_notebook = (
        f'the executed notebook\'s error output: {len(shown)} traceback lines, the last "{error.strip()[:180]}"'
    )
    ours = (
        _scpo_notebook(c, "notebooks/02_train.ipynb", c.work / "u20-ours.ipynb", *params)
        if _has_notebook_command(c)
        else None
    )
    res = _notebook_verdict(pm, "no", ours, "no", "train.seed")
    res["said"] += "; " + in_notebook
    res["ok"] = res["ok"] and len(shown) == 1 and "train.seed" in error
    return res


@case("`train --resume` after the code changed (a tracked file edited: the checkout is dirty)")
def resume_changed_code(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "u21")
    readme = c.repo / "README.md"
    text = readme.read_text()
    readme.write_text(text + "\nan edit\n")
    try:
        o = c.run("train", *SMOKE, "--out", run, "--resume", "--set", "train.iterations=3")
    finally:
        readme.write_text(text)
    note = next((ln for ln in o.lines if "code" in ln), "")
    return {
        "said": f"exit {o.rc}" + (f'; "{note[:200]}"' if note else "; nothing said about the code"),
        "lost": "no",
        "ok": o.rc == 0 and bool(note) and history_iterations(run) == [0, 1, 2],
    }


@case("`dvc exp run -s -S train.lr=-1 train@grpo-alfworld` in the clone, the recovery, and `scpo config` first")
def dvc_bad_value(c: Checkout, base: Path) -> dict:
    params = c.repo / "params.yaml"
    original = params.read_text()
    d = c.tool(sys.executable, "-m", "dvc", "exp", "run", "-s", "-S", "train.lr=-1", "train@grpo-alfworld")
    edited = params.read_text() != original
    c.tool("git", "restore", "params.yaml")
    restored = params.read_text() == original
    params.write_text(original)
    o = c.run("config", "--set", "train.lr=-1")
    return {
        "said": f"dvc exit {d.rc}, params.yaml {'left edited' if edited else 'unchanged'}; `git restore params.yaml`: "
        f"{'restored' if restored else 'not restored'}; `scpo config --set train.lr=-1`: {o.said()}",
        "lost": "no" if restored else "yes: params.yaml edited",
        "ok": restored
        and o.rc == 2
        and len(o.lines) == 1
        and "train.lr" in o.last()
        and params.read_text() == original,
    }


# ------------------------------------------------------------------------------------- issue 59: the cases it added
group("lost")


def _drop_tensor(model_file: Path) -> str:
    """Rewrite a model's safetensors file without one of its MLP tensors (a valid file); the tensor's name."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(model_file)
    name = sorted(k for k in tensors if ".mlp." in k)[0]
    del tensors[name]
    save_file(tensors, model_file, metadata={"format": "pt"})
    return name


@case("`train --resume` with one tensor removed from the newest checkpoint's model.safetensors (a valid file)")
def resume_missing_tensor(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "i1")
    name = _drop_tensor(run / "checkpoints" / "iter_0002" / "model" / "model.safetensors")
    o = c.run("train", *SMOKE, "--out", run, "--resume", "--set", "train.iterations=3")
    note = next((ln for ln in o.lines if name in ln), "")
    right = o.rc == 0 and "resuming from iter_0001" in note and history_iterations(run) == [0, 1, 2]
    return {
        "said": f"exit {o.rc}" + (f'; "{note[:220]}"' if note else f"; nothing named {name}: {o.said()}"),
        "lost": "no" if right else "wrong: continued from a model whose missing layer was initialised at random",
        "ok": right,
    }


@case("`scpo eval` of a run whose model/ lacks one tensor")
def eval_missing_tensor(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "i2")
    name = _drop_tensor(run / "model" / "model.safetensors")
    out = c.work / "i2-eval"
    shutil.rmtree(out, ignore_errors=True)
    o = c.run("eval", *SMOKE, "--checkpoint", run, "--out", out)
    wrote = (out / "eval.json").exists()
    return {
        "said": o.said(),
        "lost": "wrong: eval.json of a partly random model" if wrote else "no",
        "ok": o.rc != 0 and len(o.lines) == 1 and name in o.last() and not wrote,
    }


def _sweep_grid(method: str, iterations: int) -> list[str]:
    return ["--grid", "profile=smoke", "--grid", f"method={method}", "--grid", f"train.iterations={iterations}"]


@case("`scpo sweep --overwrite` (`--grid method=gigpo`) into a sweep (`--grid method=grpo`) that is still running")
def sweep_overwrite_running(c: Checkout, base: Path) -> dict:
    out = c.work / "i3"
    shutil.rmtree(out, ignore_errors=True)
    first = c.spawn("sweep", "notebooks/02_train.ipynb", *_sweep_grid("grpo", 50), "--out", out)
    deadline = time.time() + 600
    while not list(out.glob("*/provenance.json")) and first.poll() is None and time.time() < deadline:
        time.sleep(0.5)
    o = c.run("sweep", "notebooks/02_train.ipynb", *_sweep_grid("gigpo", 1), "--out", out, "--overwrite", timeout=1800)
    running = first.poll() is None  # the first sweep (50 iterations) was still running when the second ended
    try:
        grid = json.loads((out / SWEEP_JSON).read_text())["grid"]
    except (OSError, ValueError, KeyError):
        grid = []
    first.terminate()  # not needed to the end: what matters is whether the second one wrote into it meanwhile
    first.wait(timeout=600)
    rows = _rows(out / "summary.csv")
    methods = [r.get("method") for r in rows]
    clean = o.rc != 0 and "method=grpo" in grid and "gigpo" not in methods
    return {
        "said": f"first still running: {'yes' if running else 'no'}; second "
        + o.said()
        + f"; then sweep.json grid {grid}, summary.csv methods {methods or 'none'}",
        "lost": "no" if clean else "mixed: the running sweep's folders and record replaced by the second's",
        "ok": running and clean and len(o.lines) == 1 and "in use" in o.last(),
    }


SWEEP_JSON = "sweep.json"


@case("`eval --checkpoint RUN/checkpoints/iter_0001` (default --out), then `train --resume` to 5 iterations")
def eval_then_resume(c: Checkout, base: Path) -> dict:
    run = c.copy(base, "i4")
    e = c.run("eval", *SMOKE, "--checkpoint", run / "checkpoints" / "iter_0001")
    written = sorted(run.rglob("eval.json"))
    o = c.run("train", *SMOKE, "--out", run, "--resume", "--set", "train.iterations=5")
    kept = [p for p in written if p.exists()]
    where = ", ".join(str(p.relative_to(run)) for p in written) or "nowhere"
    right = e.rc == 0 and o.rc == 0 and written and kept == written
    return {
        "said": f"eval exit {e.rc}, eval.json at RUN/{where}; resume exit {o.rc}",
        "lost": "no" if right else f"yes: {len(written) - len(kept)} of {len(written)} eval.json deleted by pruning",
        "ok": right,
    }


@case(
    "`papermill notebooks/02_train.ipynb OUT -p overwrite false` aimed at a finished run, and `scpo notebook` with the "
    "same arguments"
)
def notebook_overwrite_false(c: Checkout, base: Path) -> dict:
    results = []
    for name, command in (("i5", _papermill), ("i5-ours", _scpo_notebook)):
        if command is _scpo_notebook and not _has_notebook_command(c):
            results.append((None, "no"))
            continue
        run = c.copy(base, name)
        before = fingerprint(run)
        o = command(c, "notebooks/02_train.ipynb", c.work / f"{name}.ipynb", "-p", "profile", "smoke", "-p",
                    "overwrite", "false", "-p", "seed", "3", "-p", "out_dir", str(run))  # fmt: skip
        results.append((o, lost(before, run)))
    (pm, lost_pm), (ours, lost_ours) = results
    return _notebook_verdict(pm, lost_pm, ours, lost_ours, "not empty")


@case(
    "`papermill notebooks/03_evaluate.ipynb OUT -p overwrite no` into a folder holding another run's eval.json, and "
    "`scpo notebook` with the same arguments"
)
def notebook_eval_overwrite_no(c: Checkout, base: Path) -> dict:
    results = []
    for name, command in (("i6", _papermill), ("i6-ours", _scpo_notebook)):
        if command is _scpo_notebook and not _has_notebook_command(c):
            results.append((None, "no"))
            continue
        out = c.work / f"{name}-eval"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        (out / "eval.json").write_text(json.dumps({"checkpoint": "another run", "splits": {}}))
        before = fingerprint(out)
        o = command(c, "notebooks/03_evaluate.ipynb", c.work / f"{name}.ipynb", "-p", "profile", "smoke", "-p",
                    "overwrite", "no", "-p", "checkpoint", str(base), "-p", "out_dir", str(out))  # fmt: skip
        results.append((o, lost(before, out)))
    (pm, lost_pm), (ours, lost_ours) = results
    return _notebook_verdict(pm, lost_pm, ours, lost_ours, "eval.json")


@case("`dvc status train@grpo-alfworld` after editing `credit.grpo.stats_over` in params.yaml")
def dvc_status_credit_option(c: Checkout, base: Path) -> dict:
    params = c.repo / "params.yaml"
    original = params.read_text()
    params.write_text(original.replace("grpo: {stats_over: steps}", "grpo: {stats_over: trajectories}"))
    try:
        d = c.tool(sys.executable, "-m", "dvc", "status", "train@grpo-alfworld")
    finally:
        params.write_text(original)
    seen = "credit.grpo" in d.stdout
    return {
        "said": f"exit {d.rc}; "
        + (
            "the stage's changed params name credit.grpo"
            if seen
            else "credit.grpo not named: " + (d.stdout.strip().splitlines() or [""])[0][:120]
        ),
        "lost": "no" if seen else "wrong: `dvc repro -s` would keep the old value",
        "ok": d.rc == 0 and seen,
    }


group("line")


@case("`train --set train.device=cuda` and `--set rollout.engine=vllm` (smollm2-135m) on a machine without a GPU")
def no_gpu_settings(c: Checkout, base: Path) -> dict:
    outs = []
    for name, sets in (
        ("i10a", ["train.device=cuda"]),
        ("i10b", ["rollout.engine=vllm", "policy.profile=smollm2-135m", "rollout.action_choice=generate"]),
    ):
        shutil.rmtree(c.work / name, ignore_errors=True)
        outs.append(c.run("train", *SMOKE, "--out", c.work / name, *[a for s in sets for a in ("--set", s)]))
    left = [n for n in ("i10a", "i10b") if (c.work / n / "provenance.json").exists()]
    return {
        "said": "; ".join(o.said() for o in outs) + (f"; provenance.json left in {left}" if left else ""),
        "lost": "no",
        "ok": all(o.rc != 0 and len(o.lines) == 1 for o in outs) and not left,
    }


@case("`scpo parity` with `--split valid_sen`, `--games 0`, `--games -1`, a missing `--data-root`, a folder as `--out`")
def parity_mistakes(c: Checkout, base: Path) -> dict:
    outs = [
        c.run("parity", "--split", "valid_sen"),
        c.run("parity", "--games", "0"),
        c.run("parity", "--games", "-1"),
        c.run("parity", "--games", "1", "--data-root", c.work / "no-data"),
        c.run("parity", "--games", "1", "--random-walks", "0", "--out", c.work),
    ]
    return {
        "said": "; ".join(o.said() + f" after {o.seconds:.0f} s" for o in outs),
        "lost": "no",
        "ok": all(o.rc != 0 and len(o.lines) == 1 for o in outs),
    }


@case("`credit-map RUN --out WORK/map.txt` (a suffix matplotlib cannot write)")
def credit_map_bad_suffix(c: Checkout, base: Path) -> dict:
    o = c.run("credit-map", base, "--out", c.work / "i12.txt")
    return {"said": o.said() + f" after {o.seconds:.0f} s", "lost": "no", "ok": o.rc != 0 and len(o.lines) == 1}


@case("`credit-map RUN` of a smoke run whose groups all lost (no group with won and lost siblings)")
def credit_map_unmixed(c: Checkout, base: Path) -> dict:
    figure = c.work / "i13.png"
    figure.unlink(missing_ok=True)
    o = c.run("credit-map", base, "--out", figure)
    said = next((ln for ln in o.lines if "sibling" in ln or "every advantage is 0" in ln), "")
    return {
        "said": f"exit {o.rc}" + (f'; "{said[:220]}"' if said else "; nothing said of the group; figure drawn"),
        "lost": "no",
        "ok": bool(said) and (o.rc == 0) == figure.exists(),
    }


@case("Ctrl-C (SIGINT) before the first checkpoint, then a plain `train` and `train --resume` on the folder")
def interrupted_before_checkpoint(c: Checkout, base: Path) -> dict:
    run = c.work / "i14"
    shutil.rmtree(run, ignore_errors=True)
    victim = c.spawn("train", *SMOKE, "--out", run)
    deadline = time.time() + 300
    while not (run / "provenance.json").exists() and victim.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    victim.send_signal(signal.SIGINT)
    rc_victim = victim.wait(timeout=300)
    ckpt = latest_checkpoint_name(run)
    plain = c.run("train", *SMOKE, "--out", run)
    resumed = c.run("train", *SMOKE, "--out", run, "--resume")
    contradict = "--resume" in plain.last() and "without --resume" in resumed.last()
    way = all(o.rc == 0 or "--overwrite" in o.last() for o in (plain, resumed))
    return {
        "said": f"Ctrl-C: exit {rc_victim}, checkpoint after it: {ckpt or 'none'}"
        + ("" if ckpt is None else " (the run was not stopped before its first checkpoint: nothing tested)")
        + f"; plain: {plain.said()}; --resume: {resumed.said()}",
        "lost": "no",
        "ok": ckpt is None
        and rc_victim != 0
        and not contradict
        and way
        and all(o.rc == 0 or len(o.lines) == 1 for o in (plain, resumed)),
    }


def latest_checkpoint_name(run: Path) -> str | None:
    done = sorted(p.name for p in (run / "checkpoints").glob("iter_*") if (p / "state.json").exists())
    return done[-1] if done else None


@case("`train --profile gpu` on a machine with no GPU")
def gpu_profile_on_cpu(c: Checkout, base: Path) -> dict:
    shutil.rmtree(c.work / "i15", ignore_errors=True)
    o = c.run("train", "--profile", "gpu", "--out", c.work / "i15")
    return {
        "said": o.said() + f" after {o.seconds:.0f} s",
        "lost": "no",
        "ok": o.rc != 0 and len(o.lines) == 1 and "no GPU" in o.last() and "estimated" in o.last(),
    }


@case("`train --set train.iterations=true` (a boolean as an iteration count) and `--set rollout.temperature=0`")
def boolean_count_and_zero_temperature(c: Checkout, base: Path) -> dict:
    outs = []
    for name, value in (("i16a", "train.iterations=true"), ("i16b", "rollout.temperature=0")):
        shutil.rmtree(c.work / name, ignore_errors=True)
        outs.append(c.run("train", *SMOKE, "--out", c.work / name, "--set", value))
    return {
        "said": "; ".join(o.said() for o in outs),
        "lost": "no",
        "ok": all(o.rc != 0 and len(o.lines) == 1 for o in outs),
    }


@case("`scpo sweep --jobs 0`, and `--backend local --gpus 0,1` on a machine without GPUs")
def sweep_jobs_gpus(c: Checkout, base: Path) -> dict:
    outs = []
    for name, extra in (("i17a", ["--jobs", "0"]), ("i17b", ["--backend", "local", "--gpus", "0,1"])):
        shutil.rmtree(c.work / name, ignore_errors=True)
        outs.append(c.run("sweep", "notebooks/02_train.ipynb", *_sweep_grid("grpo", 1), "--out", c.work / name,
                          *extra, timeout=1800))  # fmt: skip
    return {
        "said": "; ".join(o.said() + f" after {o.seconds:.0f} s" for o in outs),
        "lost": "no",
        "ok": all(o.rc != 0 and len(o.lines) == 1 for o in outs),
    }


@case("`scpo sweep --set train.iterations=1 --grid train.iterations=2` (the same key twice)")
def sweep_set_and_grid(c: Checkout, base: Path) -> dict:
    out = c.work / "i18"
    shutil.rmtree(out, ignore_errors=True)
    o = c.run("sweep", "notebooks/02_train.ipynb", "--profile", "smoke", "--set", "train.iterations=1", "--grid",
              "train.iterations=2", "--grid", "method=grpo", "--out", out, timeout=1800)  # fmt: skip
    rows = _rows(out / "summary.csv")
    iters = rows[0].get("result.iterations") if rows else None
    return {
        "said": o.said() if o.rc else f"exit 0; the point trained {iters} iteration(s), nothing said of --set",
        "lost": "no",
        "ok": o.rc != 0 and len(o.lines) == 1,
    }


@case("data provenance: a WebShop run's provenance.json and its eval.json (the catalogue's digest)")
def webshop_data_digest(c: Checkout, base: Path) -> dict:
    run, out = c.work / "i19", c.work / "i19-eval"
    for folder in (run, out):
        shutil.rmtree(folder, ignore_errors=True)
    t = c.run("train", *SMOKE, "--env", "webshop", "--out", run, "--set", "train.iterations=1")
    e = c.run("eval", *SMOKE, "--checkpoint", run, "--out", out)
    try:
        record = json.loads((run / "provenance.json").read_text()).get("data") or {}
    except (OSError, ValueError):
        record = {}
    try:
        splits = json.loads((out / "eval.json").read_text())["splits"]
        evaluated = {name: (s.get("data") or {}).get("sha256", "")[:12] for name, s in splits.items()}
    except (OSError, ValueError, KeyError):
        evaluated = {}
    ok = t.rc == 0 and e.rc == 0 and bool(record.get("sha256")) and evaluated and all(evaluated.values())
    return {
        "said": f"train exit {t.rc}, eval exit {e.rc}; provenance data: {record.get('kind', 'none')} "
        f"{str(record.get('sha256', ''))[:12]}; eval.json data per split: {evaluated or 'none'}",
        "lost": "no",
        "ok": bool(ok),
    }


@case("`parity --games 1 --random-walks 0 --out '~/parity.json'` (HOME=WORK/home; a quoted ~ reaches the command)")
def tilde_out(c: Checkout, base: Path) -> dict:
    home = c.work / "home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    shutil.rmtree(c.repo / "~", ignore_errors=True)
    o = c.run("parity", "--games", "1", "--random-walks", "0", "--out", "~/i20.json", env={"HOME": str(home)})
    literal = (c.repo / "~").exists()
    shutil.rmtree(c.repo / "~", ignore_errors=True)
    wrote = (home / "i20.json").exists()
    return {
        "said": f"exit {o.rc}; "
        + ("wrote a folder literally named ~ in the checkout" if literal else f"wrote HOME/i20.json: {wrote}"),
        "lost": "no",
        "ok": not literal and o.rc == 0 and wrote,
    }


# ------------------------------------------------------------------------------------------------------------- main
def run_all(repo: Path, data: Path, work: Path, out: Path, only: list[str] | None, shared: Path | None) -> None:
    # A runner started in the background of a non-interactive shell has SIGINT ignored, and every command it starts
    # would inherit that (Python installs its Ctrl-C handler only over the default): the Ctrl-C case would test nothing.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    c = Checkout(repo, data, work)
    c.shared = shared
    base = work / "finished"
    shutil.rmtree(base, ignore_errors=True)
    c.base_outcome = c.run("train", *SMOKE, "--out", base)  # a finished 2-iteration run: the victim of most cases
    assert c.base_outcome.rc == 0, c.base_outcome.stderr[-3000:]
    results = json.loads(out.read_text()) if out.exists() and only else {}
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    earlier = results.get("_meta", {}).get("commit")
    for res in results.values():  # results of an earlier run kept (--only): they name the commit they ran on
        if isinstance(res, dict) and "title" in res:
            res.setdefault("commit", earlier)
    for name, title, fn, _ in CASES:
        if only and name not in only:
            continue
        t0 = time.time()
        try:
            res = fn(c, base)
        except Exception as err:
            res = {"said": f"the case raised {type(err).__name__}: {err}", "lost": "?", "ok": False}
        res = {k: _placeholders(v, c) if isinstance(v, str) else v for k, v in res.items()}
        res.update(title=title, seconds=round(time.time() - t0, 1), kind=outcome_kind(res), commit=commit)
        results[name] = res
        print(f"[{'ok' if res['ok'] else '--'}] {name}: {res['said'][:200]} | lost: {res['lost']}", flush=True)
        out.write_text(json.dumps(results, indent=2))
    results["_meta"] = {"commit": commit, "python": sys.version.split()[0]}
    out.write_text(json.dumps(results, indent=2))


def _placeholders(text: str, c: Checkout) -> str:
    """`text` with this machine's folders named WORK, CLONE, DATA and SHARED (results read the same anywhere)."""
    places = [(c.work, "WORK"), (c.repo, "CLONE"), (c.data, "DATA")] + ([(c.shared, "SHARED")] if c.shared else [])
    for path, name in sorted(places, key=lambda p: -len(str(p[0]))):
        text = text.replace(str(path), name)
    return text


def outcome_kind(res: dict) -> str:
    """'right' (the right result), 'line' (a clear one-line error) or 'not fixed' (ugly or misleading), from a case's
    verdict and what the deciding command said: a second command's exit code where there is one, else the first."""
    if not res.get("ok"):
        return "not fixed"
    said = res.get("said", "")
    second = re.search(r"second (?:\S+ )?exit (\d+)", said)
    first = second or re.search(r"exit (\d+)", said)
    return "line" if first and first.group(1) != "0" else "right"


def data_lost(lost_text: str) -> bool:
    """Whether a case's `lost` entry says data was lost, runs were mixed or a result was wrong."""
    return lost_text.startswith(("yes", "mixed", "wrong"))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _counts(results: dict, names: list[str]) -> str:
    kinds = [results.get(n, {}).get("kind") or outcome_kind(results.get(n, {})) for n in names]
    lost_n = sum(data_lost(results.get(n, {}).get("lost", "?")) for n in names)
    return (
        f"{kinds.count('right')} the right result, {kinds.count('line')} one clear line, "
        f"{kinds.count('not fixed')} ugly, misleading or wrong; {lost_n} lose or mix data or give a wrong result"
    )


def _commits(results: dict, names: list[str]) -> str:
    """The commit(s) a results file's cases ran on: 'X', or 'X (N cases), Y (M cases)'."""
    fallback = results.get("_meta", {}).get("commit", "?")
    counts: dict[str, int] = {}
    for name in names:
        commit = results.get(name, {}).get("commit") or fallback
        counts[commit] = counts.get(commit, 0) + 1
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{c} ({n} cases)" for c, n in counts.items())


def table(before: Path, after: Path, note: str = "") -> str:
    """reports/RELIABILITY.md: the summary counts, then one table per group of cases; `note` (a sentence on how the
    runs were made) follows the commits."""
    b, a = json.loads(before.read_text()), json.loads(after.read_text())
    names = [name for name, *_ in CASES if name in a]
    bc, ac = _commits(b, names), _commits(a, names)
    out = [
        "# Reliability: everyday mistakes, before and after",
        "",
        "Each row is one mistake a researcher makes in a normal week, run on the smoke profile against a fresh",
        "clone (`checks/reliability.py run`; offline: no Hugging Face Hub, no GitHub).",
        f"Before: a clone at {bc}.",
        f"After: a clone at {ac}.",
        *([note] if note else []),
        *(
            [
                "Cases were run in separate passes (`run --only NAMES`, which keeps the other cases' results): each",
                "commit above is named with the number of cases that ran on it; earlier passes were not re-run.",
            ]
            if "cases)" in bc + ac
            else []
        ),
        "Notebook cases: `papermill` reports a failed cell by raising its own `PapermillExecutionError`, so it",
        "prints a traceback (about 30 lines) ending in the cell's error, whatever the notebook does; where the",
        "clone has `scpo notebook` (Papermill's arguments, the cell's error alone) the case runs it too and judges",
        "the one line on it; the cell shows both.",
        "WORK and CLONE stand for the check's work folder and the clone. Regenerate (each run takes a while on 2",
        "cores):",
        "",
        "    git clone REPO CLONE_BEFORE && git -C CLONE_BEFORE checkout BEFORE; git clone REPO CLONE_AFTER",
        "    python checks/reliability.py run --repo CLONE_BEFORE --data DATA --shared SHARED --work WORK_B \\",
        "        --json checks/results/reliability_before.json",
        "    python checks/reliability.py run --repo CLONE_AFTER --data DATA --shared SHARED --work WORK_A \\",
        "        --json checks/results/reliability_after.json",
        "    python checks/reliability.py table checks/results/reliability_before.json \\",
        "        checks/results/reliability_after.json > reports/RELIABILITY.md",
        "",
        f"**{len(names)} cases.** Before: {_counts(b, names)}. After: {_counts(a, names)}.",
        "",
    ]
    for key, heading in GROUPS.items():
        group_names = [name for name, _, _, g in CASES if g == key and name in a]
        if not group_names:
            continue
        out += [
            f"## {heading} ({len(group_names)})",
            "",
            f"Before: {_counts(b, group_names)}. After: {_counts(a, group_names)}.",
            "",
            "| case | before | after | data lost or mixed? (before / after) |",
            "|---|---|---|---|",
        ]
        for name, title, _, g in CASES:
            if g != key or name not in a:
                continue
            rb, ra = b.get(name, {"said": "(not run)", "lost": "?"}), a[name]
            mark = "" if ra["ok"] else " **(not fixed)**"
            out.append(
                f"| {_cell(title)} | {_cell(rb['said'])} | {_cell(ra['said'])}{mark} | "
                f"{_cell(rb['lost'])} / {_cell(ra['lost'])} |"
            )
        out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--repo", type=Path, required=True)
    r.add_argument("--data", type=Path, required=True)
    r.add_argument("--work", type=Path, required=True)
    r.add_argument("--json", type=Path, required=True)
    r.add_argument("--only", default="", help="comma-separated case names")
    r.add_argument("--shared", type=Path, default=None, help="the shared data folder (ALFWorld tarballs)")
    t = sub.add_parser("table")
    t.add_argument("before", type=Path)
    t.add_argument("after", type=Path)
    t.add_argument("--note", default="", help="a sentence on how the runs were made, printed after the commits")
    args = ap.parse_args()
    if args.cmd == "run":
        only = [x for x in args.only.split(",") if x] or None
        run_all(args.repo, args.data, args.work, args.json, only, args.shared)
    else:
        print(table(args.before, args.after, args.note), end="")


if __name__ == "__main__":
    main()

"""`make mutate`: mutation testing of the credit library, the drop-ins, the inconsistency metric and WebShop's reward.

    python tests/mutation/run.py                      # a run from scratch (one worker), then the table per module
    python tests/mutation/run.py --report             # the table from the last run, nothing re-run
    python tests/mutation/run.py --rerun 'scpo.credit.gigpo.*'   # re-run these mutants (after adding tests)

mutmut and its scope are configured in pyproject.toml ([tool.mutmut]); its state lives in mutants/ (gitignored). A plain
run starts from an empty mutants/, so no verdict of older tests is kept (mutmut would keep the verdicts of unchanged
code); --rerun keeps the state and re-runs only the named mutants.
Hypothesis runs derandomised (SCPO_HYPOTHESIS_PROFILE=mutation, see tests/conftest.py) so a verdict never depends on
the draw. The score counts non-equivalent mutants only: a surviving mutant listed in tests/mutation/equivalent.toml is
equivalent when its recorded change still matches the mutant mutmut made (else the entry is stale and reported).

    score = killed / (killed + survived + timeout + suspicious + no tests + not checked), equivalent ones left out

Exit status 1 when a module is below --min-score (95 %) or an entry is stale.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

if sys.version_info >= (3, 11):
    from tomllib import loads as toml_loads
else:  # mutmut installs `toml` on Python 3.10
    from toml import loads as toml_loads

ROOT = Path(__file__).resolve().parents[2]
EQUIVALENT = Path(__file__).with_name("equivalent.toml")
KILLED = {"killed", "caught by type check"}


def mutmut(*args: str) -> int:
    """Run the mutmut CLI of this interpreter's environment in the repository root (one worker)."""
    # one intra-op thread: mutmut forks its test runs, and a torch thread pool made before a fork hangs in the child
    env = {**os.environ, "SCPO_HYPOTHESIS_PROFILE": "mutation", "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)  # mutmut puts mutants/ first; the tree itself must not shadow it
    exe = Path(sys.executable).with_name("mutmut")
    return subprocess.call([str(exe), *args], cwd=ROOT, env=env)


def module_of(name: str) -> str:
    """'scpo.credit.gigpo.x_anchor_groups__mutmut_3' -> 'scpo.credit.gigpo'."""
    return re.split(r"\.x[_ǁ]", name, maxsplit=1)[0]


def load_results() -> dict[str, str]:
    """mutant name -> status, from mutmut's per-file metadata."""
    from mutmut.mutation.data import SourceFileMutationData
    from mutmut.stats import status_by_exit_code
    from mutmut.utils.file_utils import walk_mutatable_files

    out = {}
    for path in walk_mutatable_files():
        data = SourceFileMutationData(path=path)
        data.load()
        out.update({k: status_by_exit_code[v] for k, v in data.exit_code_by_key.items()})
    return out


def change_of(name: str) -> str:
    """The mutated lines of a mutant (the '+' side of its diff, stripped, joined by ' | ')."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    diff = get_diff_for_mutant(name)
    return " | ".join(
        line[1:].strip() for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")
    )


def load_equivalent() -> dict[str, dict]:
    entries = toml_loads(EQUIVALENT.read_text())["mutant"] if EQUIVALENT.exists() else []
    names = Counter(e["name"] for e in entries)
    dup = [n for n, c in names.items() if c > 1]
    if dup:
        raise SystemExit(f"{EQUIVALENT.name} lists {dup} more than once")
    missing = [e["name"] for e in entries if not e.get("reason") or "change" not in e]
    if missing:
        raise SystemExit(f"{EQUIVALENT.name}: entries {missing} need both 'change' and 'reason'")
    return {e["name"]: e for e in entries}


def report(min_score: float, wall_s: float | None) -> int:
    os.chdir(ROOT)
    status = load_results()
    equivalent = load_equivalent()
    stale, unused = [], []
    for name, entry in equivalent.items():
        if name not in status:
            unused.append(name)
        elif status[name] not in KILLED and change_of(name) != entry["change"]:
            stale.append(name)
    rows = defaultdict(Counter)
    survivors = []
    for name, st in sorted(status.items()):
        mod = module_of(name)
        rows[mod]["mutants"] += 1
        if st in KILLED:
            rows[mod]["killed"] += 1
        elif name in equivalent and name not in stale:
            rows[mod]["equivalent"] += 1
        else:
            rows[mod]["survived" if st == "survived" else "other"] += 1
            survivors.append((name, st))
    head = f"{'module':34} {'mutants':>7} {'killed':>7} {'survived':>8} {'other':>6} {'equiv.':>7} {'score':>7}"
    print(head)
    print("-" * len(head))
    total, failed = Counter(), []
    for mod in sorted(rows):
        c = rows[mod]
        total.update(c)
        counted = c["mutants"] - c["equivalent"]
        score = 100.0 * c["killed"] / counted if counted else 100.0
        failed += [mod] if score < min_score else []
        print(
            f"{mod:34} {c['mutants']:7d} {c['killed']:7d} {c['survived']:8d} {c['other']:6d} {c['equivalent']:7d} "
            f"{score:6.1f}%"
        )
    counted = total["mutants"] - total["equivalent"]
    print("-" * len(head))
    print(
        f"{'total':34} {total['mutants']:7d} {total['killed']:7d} {total['survived']:8d} {total['other']:6d} "
        f"{total['equivalent']:7d} {100.0 * total['killed'] / max(counted, 1):6.1f}%"
    )
    print("other: timeout, suspicious, no tests or not checked; score = killed / (mutants - equivalent)")
    if wall_s is not None:
        print(f"wall time of `mutmut run`: {wall_s / 60:.1f} min ({wall_s:.0f} s)")
    if survivors:
        print(f"\n{len(survivors)} non-equivalent mutants not killed (`mutmut show NAME` for the diff):")
        for name, st in survivors:
            print(f"  {name}: {st}")
    if stale:
        print(f"\nstale entries in {EQUIVALENT.name} (the mutant no longer makes the recorded change): {stale}")
    if unused:
        print(f"\nentries of {EQUIVALENT.name} that mutmut did not generate this time: {len(unused)}")
    if failed:
        print(f"\nbelow {min_score:.0f} %: {', '.join(failed)}")
    return 1 if failed or stale else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", action="store_true", help="only print the table of the last run")
    ap.add_argument("--rerun", nargs="+", metavar="MUTANT", help="re-run these mutants (names or fnmatch patterns)")
    ap.add_argument("--min-score", type=float, default=95.0, help="minimum score per module, percent (default 95)")
    args = ap.parse_args()
    wall = None
    if not args.report:
        if not args.rerun and (ROOT / "mutants").exists():
            print("removing mutants/ (the previous run's state): this run starts from scratch")
            shutil.rmtree(ROOT / "mutants")
        start = time.perf_counter()
        code = mutmut("run", "--max-children", "1", *(args.rerun or []))
        wall = time.perf_counter() - start
        if code not in (0, None):
            print(f"mutmut run exited with {code}", file=sys.stderr)
    return report(args.min_score, wall)


if __name__ == "__main__":
    sys.exit(main())

"""What a result was computed with beyond its config, and what differs between two results: the record each run's
`provenance.json` holds under "environment" (and `reports/environment.json` for a pipeline run), and the comparison
`scpo provenance diff A B` prints.

    record() = {"python": version, "platform": ..., "packages": {name: version} of every installed distribution,
                "lock": {"file", "sha256", "installed_matches", "differences"} (the installed set against
                requirements/cpu.txt), "cpu": scpo.numerics.cpu_info(), "numerics": scpo.numerics.check()}

Two results of the CPU profile are bit-identical when their records agree in packages, CPU kernel families (the
numerics group: the pin in force, PyTorch's capability, the BLAS kernels and threads) and config
(docs/reproducibility.md); `differences` names, group by group, what does not agree.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re
import sys
from pathlib import Path
from typing import Any

from scpo import numerics

__all__ = [
    "LOCK_FILE",
    "installed_packages",
    "lock_entries",
    "lock_state",
    "record",
    "differences",
    "GROUPS",
    "load_record",
    "pipeline_report",
]

REPO = Path(__file__).resolve().parents[1]
LOCK_FILE = REPO / "requirements" / "cpu.txt"
GROUPS = ("packages", "lock", "python", "cpu", "numerics", "config", "git")
# this package itself: installed from the checkout, not from the lock
_NOT_LOCKED = {"scpo"}
# resolved-config keys that name folders of the machine (they differ between any two clones)
_PATH_KEYS = ("data.root", "data.shared_dir", "train.out_dir", "train.init_from")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_packages() -> dict[str, str]:
    """{normalised name: version} of every distribution installed in this interpreter, sorted by name."""
    from importlib.metadata import distributions

    found = {_normalise(d.metadata["Name"]): d.version for d in distributions() if d.metadata["Name"]}
    return dict(sorted(found.items()))


def lock_entries(path: Path = LOCK_FILE) -> dict[str, str]:
    """{normalised name: version} of the `name==version` lines of a lock file (pip requirements format)."""
    out = {}
    for line in Path(path).read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)", line)
        if m:
            out[_normalise(m.group(1))] = m.group(2)
    return out


def lock_state(packages: dict[str, str], path: Path = LOCK_FILE) -> dict[str, Any]:
    """The lock file's digest and whether `packages` is exactly its set (one line per difference); {"file": None} for
    an installation without the checkout's lock (the package installed as a library)."""
    path = Path(path)
    if not path.is_file():
        return {"file": None, "sha256": None, "installed_matches": None, "differences": []}
    locked = lock_entries(path)
    diffs = []
    for name in sorted(set(locked) | set(packages)):
        if name in _NOT_LOCKED:
            continue
        want, have = locked.get(name), packages.get(name)
        if want is None:
            diffs.append(f"{name} {have} installed, not in the lock")
        elif have is None:
            diffs.append(f"{name} {want} in the lock, not installed")
        elif want != have:
            diffs.append(f"{name} {have} installed, {want} in the lock")
    rel = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else str(path)
    return {
        "file": rel,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "installed_matches": not diffs,
        "differences": diffs,
    }


def record(note=None) -> dict[str, Any]:
    """See the module docstring; `note` gets the one line of `scpo.numerics.check` when the pin is not in force."""
    packages = installed_packages()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": packages,
        "lock": lock_state(packages),
        "cpu": numerics.cpu_info(),
        "numerics": numerics.check(note),
    }


def load_record(path: Path) -> dict[str, Any]:
    """A provenance or environment record from a run folder, a checkpoint folder, a provenance.json, a state.json or
    a reports/environment.json. ValueError (one line) when there is none."""
    path = Path(path)
    candidates = [path] if path.is_file() else [path / n for n in ("provenance.json", "state.json", "environment.json")]
    for file in candidates:
        try:
            data = json.loads(file.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("provenance"), dict):
            data = data["provenance"]  # a checkpoint's state.json
        if isinstance(data, dict) and ("environment" in data or "config" in data):
            return data
    raise ValueError(f"{path}: no provenance.json, checkpoint state.json or environment.json with a record there")


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict) and tree:
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: tree}


def _short(value: Any) -> str:
    return "<absent>" if value is None else json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _keyed(group: str, a: dict, b: dict, skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    fa, fb = _flat(a or {}), _flat(b or {})
    out = []
    for key in sorted(set(fa) | set(fb)):
        if any(key == s or key.startswith(s + ".") for s in skip):
            continue
        va, vb = fa.get(key), fb.get(key)
        if va != vb:
            out.append((group, f"{key}: {_short(va)} -> {_short(vb)}"))
    return out


def _packages(a: dict, b: dict) -> list[tuple[str, str]]:
    out = []
    for name in sorted(set(a) | set(b)):
        va, vb = a.get(name), b.get(name)
        if va != vb:
            out.append(("packages", f"{name} {va or '<not installed>'} -> {vb or '<not installed>'}"))
    return out


def _cpu(a: dict, b: dict) -> list[tuple[str, str]]:
    out = _keyed("cpu", {k: v for k, v in a.items() if k != "flags"}, {k: v for k, v in b.items() if k != "flags"})
    fa, fb = set(a.get("flags") or ()), set(b.get("flags") or ())
    if fa - fb:
        out.append(("cpu", f"flags only in A: {' '.join(sorted(fa - fb))}"))
    if fb - fa:
        out.append(("cpu", f"flags only in B: {' '.join(sorted(fb - fa))}"))
    return out


def _numerics(a: dict, b: dict) -> list[tuple[str, str]]:
    def split(st: dict) -> tuple[dict, dict]:
        pools = {p.get("file") or p.get("prefix"): p for p in st.get("threadpools") or []}
        rest = {k: v for k, v in st.items() if k != "threadpools"}
        # a variable as it is now, only where it was changed after the start (else it repeats at_start)
        rest["now"] = {k: v for k, v in (st.get("now") or {}).items() if v != (st.get("at_start") or {}).get(k)}
        return rest, pools

    (sa, pa), (sb, pb) = split(a), split(b)
    common = sorted(set(pa) & set(pb))  # which libraries a process loaded says what it imported, not how it computes
    return _keyed("numerics", sa, sb) + _keyed(
        "numerics", {"threadpools": {k: pa[k] for k in common}}, {"threadpools": {k: pb[k] for k in common}}
    )


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, str]]:
    """(group, one line) for every difference between two provenance or environment records, in `GROUPS` order:
    packages (name A-version -> B-version), the lock (digest, whether the installed set matched it), Python, CPU (model,
    vendor, logical CPUs, flags only in one), numerics (the pin's status, PyTorch's kernels, the pinned variables at
    start, and the kernels, version and threads of each BLAS or OpenMP library both processes loaded), the resolved
    config (leaving out the keys naming folders of the machine), git (commit, dirty). A group that one record lacks is
    compared as empty."""
    ea, eb = a.get("environment", a), b.get("environment", b)
    out = _packages(ea.get("packages") or {}, eb.get("packages") or {})
    out += _keyed("lock", *({k: v for k, v in (e.get("lock") or {}).items() if k != "differences"} for e in (ea, eb)))
    out += _keyed("python", {"version": ea.get("python")}, {"version": eb.get("python")})
    out += _cpu(ea.get("cpu") or {}, eb.get("cpu") or {})
    out += _numerics(ea.get("numerics") or {}, eb.get("numerics") or {})
    if "config" in a or "config" in b:
        out += _keyed("config", a.get("config") or {}, b.get("config") or {}, skip=_PATH_KEYS)
    if "git" in a or "git" in b:
        out += _keyed("git", a.get("git") or {}, b.get("git") or {})
    return out


def _set_by_the_run(line: str) -> bool:
    """A thread count the trainer sets itself (`train.torch_threads`, a config key), not the environment."""
    return line.startswith("threads.torch:") or (line.startswith("threadpools.") and ".num_threads:" in line)


def pipeline_report(runs: Path, out: Path) -> dict[str, Any]:
    """Write `out` (reports/environment.json): this process's `record()` (the environment `make repro` ran the
    pipeline in) and, for every run folder under `runs` (a provenance.json), whether its own record agrees with it, with
    the lines that differ (less the thread counts a run sets from its config); return it."""
    env = record()
    runs_seen, differing = {}, {}
    for prov in sorted(Path(runs).rglob("provenance.json")):
        rel = prov.parent.relative_to(runs).as_posix()
        try:
            data = json.loads(prov.read_text())
        except (OSError, ValueError):
            differing[rel] = ["provenance.json does not parse"]
            continue
        theirs = data.get("environment")
        if theirs is None:
            differing[rel] = ["recorded no environment"]
            continue
        diffs = [f"{g}: {line}" for g, line in differences(env, theirs) if not _set_by_the_run(line)]
        runs_seen[rel] = {"numerics": theirs.get("numerics", {}).get("status"), "differences": len(diffs)}
        if diffs:
            differing[rel] = diffs
    report = {
        "environment": env,
        "runs_folder": Path(runs).as_posix(),
        "runs": runs_seen,
        "runs_in_another_environment": differing,
    }
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    tmp.replace(out)
    return report


def main(argv: list[str] | None = None) -> int:
    """`python -m scpo.software report RUNS OUT`: write the pipeline's environment file (`pipeline_report`) and
    print one line."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0] != "report":
        print("usage: python -m scpo.software report RUNS_FOLDER OUT_JSON", file=sys.stderr)
        return 2
    report = pipeline_report(Path(args[1]), Path(args[2]))
    env, other = report["environment"], report["runs_in_another_environment"]
    lock, num = env["lock"], env["numerics"]
    print(
        f"wrote {args[2]}: numerics {num['status']} (PyTorch kernels {num['torch_cpu_capability']}), "
        f"{len(env['packages'])} packages, lock {'matches' if lock['installed_matches'] else 'does NOT match'} "
        f"({lock['file']}); {len(report['runs'])} runs, {len(other)} recorded in another environment"
        + (f": {', '.join(sorted(other)[:5])}{' ...' if len(other) > 5 else ''}" if other else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

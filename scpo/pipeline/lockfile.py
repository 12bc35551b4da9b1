"""dvc.lock without the entries of stages dvc.yaml no longer defines.

DVC keeps a stage's lock entry after the stage is renamed or removed from dvc.yaml (a matrix item dropped, a stage
split), and rewrites the whole lock file, stale entries included, after every stage it runs: at 148 entries for 50
stages the round-trip parse and dump took 3.5 s per stage, against 1.4 s without the stale ones. `make repro` prunes
them when DVC is done; `tests/pipeline/test_dvc.py` checks that the committed lock has none.

    python -m scpo.pipeline.lockfile [--repo .] [--check]
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["defined_stages", "stale_stages", "prune_stale_stages"]


def defined_stages(repo_root: str | Path = ".") -> set[str]:
    """The names of the stages dvc.yaml defines, matrix and foreach items expanded (`train@grpo-alfworld`)."""
    from dvc.repo import Repo

    with Repo(str(repo_root)) as repo:
        return {s.name for s in repo.index.stages}


def stale_stages(repo_root: str | Path = ".") -> list[str]:
    """The stage names of dvc.lock that dvc.yaml does not define, in the lock's order."""
    from dvc.utils.serialize import load_yaml

    lock = Path(repo_root) / "dvc.lock"
    if not lock.exists():
        return []
    defined = defined_stages(repo_root)
    return [name for name in (load_yaml(lock).get("stages") or {}) if name not in defined]


def prune_stale_stages(repo_root: str | Path = ".") -> list[str]:
    """Remove `stale_stages` from dvc.lock (DVC's own round-trip YAML: every other line stays as it was); -> the
    removed names."""
    from dvc.utils.serialize import modify_yaml

    stale = stale_stages(repo_root)
    if stale:
        with modify_yaml(Path(repo_root) / "dvc.lock") as data:
            for name in stale:
                del data["stages"][name]
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=".", help="the repository root (holds dvc.yaml and dvc.lock)")
    parser.add_argument("--check", action="store_true", help="only list the stale entries; exit 1 if there are any")
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_stages(args.repo)
        print(f"dvc.lock: {len(stale)} stale stage entries" + (f": {', '.join(stale)}" if stale else ""))
        return 1 if stale else 0
    stale = prune_stale_stages(args.repo)
    print(f"dvc.lock: removed {len(stale)} stale stage entries" + (f" ({', '.join(stale[:5])}, ...)" if stale else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

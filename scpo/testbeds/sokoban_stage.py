"""The Sokoban benchmark as the pipeline runs it (notebook 09, DVC stage `sokoban`), and the same computation under
another kernel family (the check that its conclusions survive a change of machine).

    frames = run_benchmark(cfg)                         # runs, fidelity, wrong-sign credit under cfg.sokoban.out_dir
    tables = write_sokoban_report(**frames, section=cfg.sokoban, reports_dir="reports")

    python -m scpo.testbeds.sokoban_stage --profile smoke --out /tmp/a --reports /tmp/a/reports
    run_in_family("aten-default", ...)                  # the same in a fresh process under another kernel family

Kernel families (`families`): `pinned` is the project's CPU pin (scpo/numerics.env: AVX2 ATen kernels, MKL's
COMPATIBLE branch, ...); `unpinned` is the environment without the pin's variables (on this AVX-512 CPU: ATen's
AVX-512 kernels and MKL's own choice, as another machine would pick its own); `aten-default` is ATen's portable
kernels without SIMD (`ATEN_CPU_CAPABILITY=default`, available on every CPU), the rest pinned. Each is read once,
when the process starts, so a family is a fresh process (`run_in_family`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from scpo.testbeds.sokoban_benchmark import (
    check_settings,
    fidelity_runs,
    learning_runs,
    run_settings,
    setup,
    wrong_sign_credit,
)

__all__ = ["FAMILIES", "run_benchmark", "families", "run_in_family", "main"]

FAMILIES = ("pinned", "unpinned", "aten-default")
OVERRIDES = {"env.name": "sokoban", "env.history_length": 0}  # the grid is the state: no history in the observation


def run_benchmark(cfg, out_dir: str | Path | None = None) -> dict[str, pd.DataFrame]:
    """Every learning run of `cfg.sokoban` (kept under `out_dir`, default `cfg.sokoban.out_dir`, and not repeated),
    then gradient fidelity and wrong-sign credit of seed 0's policy per start -> {"curves", "per_batch", "signs"},
    also written there as curves.csv, fidelity_per_batch.csv and wrong_sign.csv."""
    sec = cfg.sokoban
    out = Path(out_dir or sec.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    s = run_settings(sec)
    check_settings(out, s)
    env = setup(cfg, s)
    curves = learning_runs(s, env, sec.starts, sec.seeds, sec.methods, out, sec.workers)
    per_batch = fidelity_runs(s, env, sec.fidelity_batches, sec.starts, sec.methods)
    signs = wrong_sign_credit(s, env, sec.fidelity_batches, sec.starts, sec.methods)
    for name, frame in (("curves", curves), ("fidelity_per_batch", per_batch), ("wrong_sign", signs)):
        frame.to_csv(out / f"{name}.csv", index=False)
    return {"curves": curves, "per_batch": per_batch, "signs": signs}


def families(environ: Mapping[str, str] | None = None) -> dict[str, dict[str, str]]:
    """{family: the process environment that runs under it}, from `environ` (default this process's)."""
    from scpo.numerics import pin

    base = dict(os.environ if environ is None else environ)
    pinned = pin()
    unpinned = {k: v for k, v in base.items() if k not in pinned}
    return {
        "pinned": unpinned | pinned,
        "unpinned": unpinned,
        "aten-default": unpinned | pinned | {"ATEN_CPU_CAPABILITY": "default"},
    }


def run_in_family(
    family: str, out: Path, reports: Path, profile: str = "smoke", params: str = "params.yaml", cwd: Path | None = None
) -> None:
    """`main` in a fresh process under `family`'s environment (`families`); raises CalledProcessError if it fails."""
    if family not in FAMILIES:
        raise ValueError(f"unknown kernel family {family!r}; known: {', '.join(FAMILIES)}")
    cmd = [sys.executable, "-m", "scpo.testbeds.sokoban_stage", "--params", params, "--profile", profile]
    cmd += ["--out", str(out), "--reports", str(reports)]
    subprocess.run(cmd, env=families()[family], cwd=cwd, check=True, capture_output=True, text=True)


def main(argv: list[str] | None = None) -> None:
    """Run the stage's computation and write its tables (`--out`: the runs folder, default the section's)."""
    from scpo.config import load_config
    from scpo.testbeds.sokoban_tables import write_sokoban_report

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--profile", default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--reports", type=Path, required=True)
    args = ap.parse_args(argv)
    cfg = load_config(args.params, profile=args.profile, overrides=OVERRIDES)
    frames = run_benchmark(cfg, args.out)
    write_sokoban_report(**frames, section=cfg.sokoban, reports_dir=args.reports)


if __name__ == "__main__":
    main()

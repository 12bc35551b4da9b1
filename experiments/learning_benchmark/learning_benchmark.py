"""The longer learning benchmark: both bounds (oracle, shuffled), GRPO, GiGPO (also with dynamic sampling) and SCPO on
ALFWorld, 5 paired seeds, 10 iterations of 4 panel tasks x 8 rollouts on a 12-game panel, 2 evaluation episodes per
panel game and 40 valid_unseen games (settings.yaml), from the pipeline's warm start. The pipeline's `learning` stage
runs every method on both environments, shorter.

    python experiments/learning_benchmark/learning_benchmark.py [--warm-start alfworld=DIR webshop=DIR]
        [--fidelity reports/tables/credit_fidelity.csv] [--report-only [--from-results]] [--workers 2]
        [--set KEY=VALUE ...] [--results DIR]

Runs go to `learning.out_dir` (settings.yaml: runs/learning_benchmark/<env>/<method>/seed<k>); a run whose
result.json exists is not repeated, so an interrupted benchmark continues where it stopped (`--report-only`: the
tables and figures from the finished runs only; with `--from-results`, from the runs.json and fidelity_auc.json
already in the results folder, when the run folders are gone: `remake_tables.sh` re-makes every committed study so).
Tables and figures: results/ beside this file, or `--results` (`scpo.testbeds.learning_tables`), with runs.json
(every run's curves, unseen success and training success), the fidelity-vs-learning correlation from the fidelity
benchmark's table (`--fidelity`) and from the runs' own last saved rollouts (ALFWorld, planner-labelled), and
timing.json.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import yaml

from scpo.config import load_config, parse_overrides
from scpo.testbeds.learning import FIDELITY_ENVS, RESULT_FILE, own_rollouts_fidelity, run_keys, run_learning
from scpo.testbeds.learning_tables import fidelity_from_table, write_learning_report

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm-start", nargs="*", default=[], help="env=DIR (default: runs/<env>/sft/seed0)")
    ap.add_argument("--fidelity", type=Path, default=REPO / "reports" / "tables" / "credit_fidelity.csv")
    ap.add_argument("--report-only", action="store_true")
    ap.add_argument(
        "--from-results",
        action="store_true",
        help="with --report-only: the runs from <results>/runs.json and the fidelity from <results>/fidelity_auc.json",
    )
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--set", dest="sets", action="append", default=[], help="more dotted overrides")
    ap.add_argument("--results", type=Path, default=HERE / "results", help="the tables' folder (a side study: its own)")
    args = ap.parse_args()

    overrides = yaml.safe_load((HERE / "settings.yaml").read_text())
    overrides.update(parse_overrides(args.sets))
    cfg = load_config(REPO / "params.yaml", profile="cpu", overrides=overrides)
    starts = {env: REPO / "runs" / env / "sft" / "seed0" for env in cfg.learning.envs}
    starts.update({k: Path(v) for k, v in (item.split("=", 1) for item in args.warm_start)})
    t0 = time.perf_counter()
    out = args.results
    if args.from_results:
        if not args.report_only:
            ap.error("--from-results rebuilds the tables of finished runs: it needs --report-only")
        kept = out / "runs.json"
        if not kept.exists():
            ap.error(f"--from-results: no {kept}")
        results = json.loads(kept.read_text())
        auc = out / "fidelity_auc.json"
        fidelity = json.loads(auc.read_text()) if auc.exists() else {}
        tables = write_learning_report(cfg, results, out, fidelity=fidelity)
        print(tables["learning_differences"].to_string())
        return
    if args.report_only:
        results = []
        for key in run_keys(cfg):
            path = key.folder(cfg.learning.out_dir) / RESULT_FILE
            if path.exists():
                results.append(json.loads(path.read_text()))
    else:
        results = run_learning(cfg, starts, workers=args.workers)
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs.json").write_text(json.dumps(results, indent=1) + "\n")
    fidelity = {}
    if any(r["env"] in FIDELITY_ENVS for r in results):  # fidelity is measured on ALFWorld rollouts
        if args.fidelity.exists():
            fidelity["noisy-optimal rollouts (fidelity benchmark)"] = fidelity_from_table(args.fidelity)
        fidelity["the benchmark runs' own last rollouts"] = own_rollouts_fidelity(cfg, results)
    tables = write_learning_report(cfg, results, out, fidelity=fidelity)
    (out / "fidelity_auc.json").write_text(json.dumps(fidelity, indent=1) + "\n")
    if not args.report_only:  # the benchmark's own time; a report rebuilt from finished runs keeps it
        walls = [r["wall_s"] for r in results]
        timing = {"wall_s": time.perf_counter() - t0, "runs": len(results), "run_wall_s": walls}
        (out / "timing.json").write_text(json.dumps(timing, indent=1) + "\n")
    print(tables["learning_ranking"].to_string())
    print(tables["learning_differences"].to_string())


if __name__ == "__main__":
    main()

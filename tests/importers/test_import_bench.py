"""benchmarks/import_bench.py in its quick mode: it runs end to end and prints the side-by-side figures (the full-size
figures: benchmarks/results/import_bench.txt)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from helpers import REPO


def test_the_import_benchmark_runs_in_quick_mode():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "benchmarks/import_bench.py", "--quick"], capture_output=True, text=True, cwd=REPO, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[2].startswith("jsonl: 5 vs 1 iterations: time x") and "peak RSS x" in lines[2]
    report = json.loads(lines[-1])
    assert set(report["iterations"]) == {"1", "5"} and report["shape"]["steps"] == 10
    five = report["iterations"]["5"]
    assert five["jsonl"]["peak_rss_mb"] > 0 and five["rollout_files"]["seconds"] > 0
    assert set(report["writer"]) == {"prompt_tokens", "with_prompts", "without_prompts"}

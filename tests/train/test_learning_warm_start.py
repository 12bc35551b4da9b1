"""The learning benchmark evaluates a seed's warm start once and every method of that seed reuses it."""

from __future__ import annotations

import json

from scpo.config import load_config
from scpo.testbeds import learning
from scpo.testbeds.learning import RunKey, warm_start_evaluation


def _warm_start(folder, sha):
    (folder / "model").mkdir(parents=True, exist_ok=True)
    (folder / "model" / "config.json").write_text("{}")
    (folder / "manifest.json").write_text(json.dumps({"model": {"sha256": sha}}))
    return folder


def test_the_warm_start_is_evaluated_once_per_seed_and_again_when_its_model_changes(tmp_path, monkeypatch):
    calls = []

    def fake_evaluate(cfg, model_dir, tasks, episodes, seed):
        calls.append((str(model_dir), tuple(tasks), episodes, seed))
        return {"n": len(tasks) * episodes, "success": 0.25 * len(calls)}

    monkeypatch.setattr(learning, "_evaluate", fake_evaluate)
    cfg = load_config("params.yaml", profile="smoke", overrides={"learning.out_dir": str(tmp_path / "runs")})
    start = _warm_start(tmp_path / "sft", "a" * 64)
    panel = ["t1", "t2"]

    first = warm_start_evaluation(cfg, RunKey("alfworld", "grpo", 0), start, panel)
    assert warm_start_evaluation(cfg, RunKey("alfworld", "oracle", 0), start, panel) == first  # reused
    assert len(calls) == 1 and first["success"] == 0.25
    assert (tmp_path / "runs" / "alfworld" / "warm_start" / "seed0.json").exists()

    warm_start_evaluation(cfg, RunKey("alfworld", "grpo", 1), start, panel)  # another seed: its own episode list
    assert [c[3] for c in calls] == [0, 1]
    warm_start_evaluation(cfg, RunKey("alfworld", "grpo", 0), start, ["t1"])  # another panel
    _warm_start(tmp_path / "sft", "b" * 64)  # the warm start retrained in place
    again = warm_start_evaluation(cfg, RunKey("alfworld", "gigpo", 0), start, panel)
    assert len(calls) == 4 and again["success"] == 1.0


def test_a_warm_start_without_a_manifest_is_evaluated_every_time(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(learning, "_evaluate", lambda *a: calls.append(a) or {"n": 1, "success": 0.0})
    cfg = load_config("params.yaml", profile="smoke", overrides={"learning.out_dir": str(tmp_path / "runs")})
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    for method in ("grpo", "oracle"):
        warm_start_evaluation(cfg, RunKey("alfworld", method, 0), tmp_path, ["t1"])
    assert len(calls) == 2 and not (tmp_path / "runs").exists()

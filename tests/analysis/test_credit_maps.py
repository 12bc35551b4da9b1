"""Credit maps: step matrices, group choice, SCPO match extraction, and the figure end to end on saved rollouts."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.analysis.credit_maps import credit_map_figure, draw_credit_maps, group_step_matrix, scpo_matches
from scpo.analysis.rollout_files import (
    choose_view,
    iteration_files,
    iteration_of,
    load_rollouts,
    mixed_groups,
    pick_group,
)
from scpo.batch import RolloutBatch
from scpo.config import load_config


def _batch() -> RolloutBatch:
    # group 0: traj 0 lost (3 steps), traj 1 won (2 steps); group 1: traj 2 lost, traj 3 lost
    return RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0, 0, 1, 1, 1],
        traj_id=[0, 0, 0, 1, 1, 2, 3, 3],
        step=[0, 1, 2, 0, 1, 0, 0, 1],
        reward=[0, 0, 0, 0, 10, 0, 0, 0],
        observation=["a", "b", "c", "a", "d", "a", "a", "b"],
        action=["x", "y", "z", "x", "w", "x", "x", "y"],
    )


def test_group_step_matrix_pads_with_nan():
    b = _batch()
    values = np.arange(8, dtype=float)
    matrix, traj_ids = group_step_matrix(b, 0, values)
    assert traj_ids.tolist() == [0, 1]
    np.testing.assert_array_equal(matrix, [[0, 1, 2], [3, 4, np.nan]])
    with pytest.raises(ValueError, match="group 7"):
        group_step_matrix(b, 7, values)


def test_mixed_and_picked_groups():
    b = _batch()
    assert mixed_groups(b).tolist() == [0]
    assert pick_group(b) == 0
    all_lost = b.select(b.group_id == 1)
    assert mixed_groups(all_lost).tolist() == []
    assert pick_group(all_lost) == 1


def test_scpo_matches_read_reference_rows():
    b = _batch()
    diag = {
        "scpo_ref_row": np.array([3, -1, 4, -1, -1, -1, -1, -1]),
        "scpo_score": np.array([0.9, 0.2, 0.8, 0, 0, 0, 0, 0]),
        "scpo_credit": np.array([2.5, 0, 1.0, 0, 0, 0, 0, 0]),
    }
    m = scpo_matches(b, 0, diag)
    assert m[["traj_id", "step", "ref_traj_id", "ref_step"]].values.tolist() == [[0, 0, 1, 0], [0, 2, 1, 1]]
    assert m["credit"].tolist() == [2.5, 1.0]
    with pytest.raises(KeyError, match="scpo_ref_row"):
        scpo_matches(b, 0, {"scpo_score": diag["scpo_score"]})


def test_rollout_files_are_ordered_by_iteration(tmp_path):
    b = _batch()
    for it in (10, 2):
        b.to_parquet(tmp_path / "rollouts" / f"iter_{it:04d}.parquet")
    files = iteration_files(tmp_path)
    assert [iteration_of(f) for f in files] == [2, 10]
    _, latest = load_rollouts(tmp_path)
    assert latest.name == "iter_0010.parquet"
    with pytest.raises(ValueError, match="notes.txt"):
        iteration_of("notes.txt")
    with pytest.raises(FileNotFoundError):
        iteration_files(tmp_path / "missing")


def test_choose_view_takes_the_latest_iteration_with_a_mixed_group(tmp_path):
    b = _batch()
    lost = b.select(b.group_id == 1)  # no mixed group
    b.to_parquet(tmp_path / "rollouts" / "iter_0000.parquet")
    b.to_parquet(tmp_path / "rollouts" / "iter_0001.parquet")
    lost.to_parquet(tmp_path / "rollouts" / "iter_0002.parquet")
    view = choose_view(tmp_path)
    assert (view.iteration, view.group) == (1, 0) and sorted(view.batches) == [0, 1, 2]
    assert (choose_view(tmp_path, iteration=2).iteration, choose_view(tmp_path, iteration=2).group) == (2, 1)
    assert choose_view(tmp_path / "rollouts" / "iter_0000.parquet", group=1).group == 1
    with pytest.raises(ValueError, match="iteration 5 is not saved.*saved: \\[0, 1, 2\\]"):
        choose_view(tmp_path, iteration=5)
    with pytest.raises(ValueError, match="group 4 is not in iteration 1"):
        choose_view(tmp_path, group=4)


def test_draw_writes_a_png(tmp_path):
    b = _batch()
    out = draw_credit_maps(
        b, 0, {"grpo": np.linspace(-1, 1, 8), "gigpo": np.zeros(8)}, np.ones(8), None, tmp_path / "cm.png"
    )
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_credit_map_figure_on_saved_synthetic_rollouts(tmp_path, repo_root):
    from scpo.credit.synthetic import synthetic_batch

    batch = synthetic_batch(n_groups=3, group_size=4, max_steps=10, seed=3)
    run = tmp_path / "alfworld" / "scpo" / "seed0"
    batch.to_parquet(run / "rollouts" / "iter_0000.parquet")
    cfg = load_config(repo_root / "params.yaml", overrides={"report.methods": ["grpo", "gigpo", "scpo", "hcapo"]})
    out, view, results = credit_map_figure(run, cfg, group=-1, out=tmp_path / "fig.png")
    assert out.exists() and out.stat().st_size > 10_000
    assert view.iteration == 0 and view.group == pick_group(batch)
    assert list(results) == ["grpo", "gigpo", "scpo"]  # HCAPO needs the policy: left out of the saved rollouts' maps


def test_cli_credit_map(tmp_path, repo_root):
    from typer.testing import CliRunner

    from scpo.cli import app
    from scpo.credit.synthetic import synthetic_batch

    rollouts = synthetic_batch(n_groups=2, group_size=4, max_steps=8, seed=5).to_parquet(tmp_path / "iter_0000.parquet")
    out = tmp_path / "cli.png"
    result = CliRunner().invoke(
        app,
        [
            "credit-map",
            str(rollouts),
            "--params",
            str(repo_root / "params.yaml"),
            "--set",
            "report.methods=[grpo, gigpo]",
            "--group",
            "1",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("mode", "revision"), [("advantage", 2), ("returns", 1)])
def test_every_label_names_the_revision_its_mode_is(mode, revision):
    from types import SimpleNamespace

    from scpo.analysis.credit_maps import credit_map_title
    from scpo.analysis.inconsistency_tables import scpo_label
    from scpo.testbeds.learning_tables import setup_label

    cfg = load_config("params.yaml", profile="smoke", overrides={"credit.scpo.mode": mode})
    view = SimpleNamespace(source="run", iteration=3, group=1)
    for text in (credit_map_title(cfg, view), scpo_label(cfg), setup_label(cfg, "alfworld")):
        assert f"SCPO revision {revision}" in text and f"SCPO revision {3 - revision}" not in text

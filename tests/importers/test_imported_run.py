"""An imported run (verl-agent's writer on batches of its trainer's code path) read by every analysis as a run of ours:
`scpo credit-map`, the explorer (with the trained-with panel first), the inconsistency analysis and `estimate`."""

from __future__ import annotations

import numpy as np
import pytest

from scpo.analysis.credit_maps import TRAINED_WITH, group_step_matrix
from scpo.analysis.explorer import explore
from scpo.analysis.explorer_data import CreditCache, RolloutCatalogue, group_view
from scpo.analysis.explorer_figure import group_figure
from scpo.analysis.imported import inconsistency_of_run, run_inconsistency_table
from scpo.analysis.rollout_files import choose_view, iteration_files
from scpo.batch import RolloutBatch
from scpo.config import load_config
from scpo.credit import CreditConfig, estimate, unmet_need
from scpo.importers.verl_agent import write_rollouts

from helpers import REPO
from helpers.runs import cli, one_line
from helpers.verl_agent_trainer import trainer_step

# two estimators: the figure's drawing (seaborn, one panel per estimator) is what costs here
FEW = ("--set", "credit.scpo.scorer=lexical", "--set", "report.methods=[gigpo,scpo]")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Two iterations (3 and 4) of verl-agent's GiGPO written by `write_rollouts`, padding copies included."""
    folder = tmp_path_factory.mktemp("verl") / "alfworld_gigpo"
    for it in (3, 4):
        step = trainer_step(n_groups=4, group_n=6, max_steps=8, seed=it)
        write_rollouts(step.batch, it, folder, tokenizer=step.tokenizer, env="alfworld")
    return folder


def smoke():
    return load_config(REPO / "params.yaml", profile="smoke", overrides={"credit.scpo.scorer": "lexical"})


def test_scpo_credit_map_draws_an_imported_run(run, tmp_path):
    out = tmp_path / "map.png"
    result = cli("credit-map", run, "--profile", "smoke", *FEW, "--params", REPO / "params.yaml", "--out", out)
    assert result.exit_code == 0, result.output
    view = choose_view(run)
    assert one_line(result.stdout) == f"wrote {out} (iteration {view.iteration}, group {view.group})"
    assert out.stat().st_size > 10_000


def test_the_credit_map_figure_leads_with_the_trained_advantages(run, tmp_path, monkeypatch):
    import scpo.analysis.credit_maps as maps

    drawn = {}
    monkeypatch.setattr(maps, "draw_credit_maps", lambda batch, group, adv, *a, **k: drawn.update(adv) or k)
    _, view, results = maps.credit_map_figure(run, smoke(), out=tmp_path / "m.png", methods=("grpo", "gigpo"))
    assert list(drawn) == [TRAINED_WITH, "grpo", "gigpo"]
    np.testing.assert_array_equal(drawn[TRAINED_WITH], view.batch.trained_advantage)


def test_the_explorer_shows_the_trained_advantages_beside_every_estimator(run):
    catalogue = RolloutCatalogue.from_source(run)
    (name,) = catalogue.runs
    assert catalogue.iterations(name) == [3, 4]
    batch = catalogue.batch(name, 4)
    cfg = CreditConfig(scpo={"scorer": "lexical"})
    results = CreditCache(cfg).results(catalogue, name, 4, ["gigpo", "scpo", "grpo"], {})
    group = int(batch.group_id[batch.won][0])
    view = group_view(batch, group, results, ["gigpo", "grpo"])
    assert list(view.advantages) == [TRAINED_WITH, "gigpo", "grpo"]
    np.testing.assert_array_equal(
        view.advantages[TRAINED_WITH], group_step_matrix(batch, group, batch.trained_advantage)[0]
    )
    fig = group_figure(view, ["gigpo", "grpo"])
    heatmaps = [t["name"] for t in fig["data"] if t["type"] == "heatmap"]
    assert heatmaps[:3] == [TRAINED_WITH, "gigpo", "grpo"]
    assert fig["layout"]["annotations"][0]["text"].startswith("trained with: the advantage A(i,t)")
    # the widget: its first panel is the trained one, and the side panel lists it per step
    explorer = explore(run, cfg, ["gigpo", "grpo"], iteration=4, group=group)
    assert explorer.figure.data[0].name == TRAINED_WITH
    assert f"{TRAINED_WITH} <b>" in explorer.text.value


def test_inconsistency_of_an_imported_run_sets_the_trained_advantages_beside_the_recomputed(run):
    cfg = smoke().model_copy(deep=True)
    cfg.report.methods = ("grpo", "gigpo")
    per_iteration = inconsistency_of_run(run, cfg, progress=False)
    assert sorted(per_iteration["iteration"].unique()) == [3, 4]
    assert set(per_iteration["estimator"]) == {TRAINED_WITH, "grpo", "gigpo"}
    table = run_inconsistency_table(per_iteration)
    same = table[(table["pair_set"] == "same_step") & (table["kind"] == "all")].set_index("estimator")
    assert same.loc[TRAINED_WITH, "n_pairs"] == same.loc["gigpo", "n_pairs"] > 0


def test_estimate_runs_every_rollout_only_estimator_on_an_imported_batch(run):
    from scpo.credit import available_methods

    batch = RolloutBatch.read(iteration_files(run)[-1])
    methods = [m for m in available_methods() if unmet_need(m, batch) is None]
    assert {"grpo", "gigpo", "scpo", "g2po", "hgpo", "graphgpo", "rloo", "progpo_c"} <= set(methods)
    results = estimate(batch, methods, smoke())
    for m, res in results.items():
        assert res.advantages.shape == (batch.n_rows,) and np.isfinite(res.advantages).all(), m

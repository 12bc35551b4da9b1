"""The credit explorer without a browser: sources -> runs x iterations, cached credit per option set, one group's arrays
worked by hand, the plotly figure, generic option controls, and the widget reacting to control changes and clicks.
(The real-browser check is tests/analysis/test_explorer_browser.py.)"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Literal

import numpy as np
import pytest
from pydantic import Field

from scpo.analysis.explorer import CreditExplorer, explore, interactive_session, option_controls, trajectory_html
from scpo.analysis.explorer_data import CreditCache, RolloutCatalogue, group_table, group_view, shared_scale
from scpo.analysis.explorer_figure import MATCH_BINS, group_figure
from scpo.batch import RolloutBatch
from scpo.credit import CreditConfig, compute_advantages
from scpo.credit.scpo import SCPOOptions
from scpo.strict_model import StrictModel

LONG = "You are in the middle of a room. " + "Looking quickly around you, you see a drawer. " * 12


def _batch() -> RolloutBatch:
    """group 0 (mixed): traj 0 lost, 3 steps; traj 1 won, 2 steps; both start at observation 'a' with action 'x' and
    next observation 'kitchen', so SCPO matches traj 0's step 0 to the reference's step 0 with score 1.
    group 1: traj 2 lost (1 step), traj 3 lost (2 steps)."""
    return RolloutBatch.from_columns(
        group_id=[0, 0, 0, 0, 0, 1, 1, 1],
        traj_id=[0, 0, 0, 1, 1, 2, 3, 3],
        step=[0, 1, 2, 0, 1, 0, 0, 1],
        reward=[0, 0, 0, 0, 10, 0, 0, 0],
        observation=["a", "b", LONG, "a", "d", "a", "a", "b"],
        action=["x", "y", "z", "x", "w", "x", "x", "y"],
        next_observation=["kitchen", "garden", "attic", "kitchen", "goal reached", "kitchen", "kitchen", "garden"],
        valid=[True, True, False, True, True, True, True, True],
        task_id=["t0"] * 5 + ["t1"] * 3,
    )


def _results(batch, methods=("grpo", "gigpo", "scpo"), **scpo_options):
    cfg = CreditConfig()
    return {m: compute_advantages(m, batch, cfg, **(scpo_options if m == "scpo" else {})) for m in methods}


# ---------------------------------------------------------------------------------------------------- sources
def _save_run(folder, iterations=(0, 1)):
    for it in iterations:
        _batch().to_parquet(folder / "rollouts" / f"iter_{it:04d}.parquet")
    return folder


def test_catalogue_reads_every_kind_of_source(tmp_path):
    run = _save_run(tmp_path / "runs" / "alfworld" / "scpo" / "seed0", (0, 3))
    _save_run(tmp_path / "runs" / "alfworld" / "gigpo" / "seed1", (2,))
    b = _batch()

    assert RolloutCatalogue.from_source(b).runs == {"batch": {0: b}}
    file = run / "rollouts" / "iter_0003.parquet"
    assert RolloutCatalogue.from_source(file).runs == {"alfworld/scpo/seed0": {3: file}}
    for src in (run, run / "rollouts"):
        assert RolloutCatalogue.from_source(src).iterations("alfworld/scpo/seed0") == [0, 3]
    several = RolloutCatalogue.from_source(tmp_path / "runs")
    assert sorted(several.runs) == ["alfworld/gigpo/seed1", "alfworld/scpo/seed0"]
    assert several.iterations("alfworld/gigpo/seed1") == [2]
    twice = RolloutCatalogue.from_source([run, run])
    assert list(twice.runs) == ["alfworld/scpo/seed0", "alfworld/scpo/seed0 (2)"]
    named = RolloutCatalogue.from_source({"mine": b, "theirs": file})
    assert named.iterations("mine") == [0] and named.iterations("theirs") == [3]
    user_file = tmp_path / "my_rollouts.parquet"
    b.to_parquet(user_file)
    assert RolloutCatalogue.from_source(user_file).batch(tmp_path.name, 0).n_rows == 8

    with pytest.raises(FileNotFoundError, match="nowhere"):
        RolloutCatalogue.from_source(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="holds no run"):
        RolloutCatalogue.from_source(tmp_path / "empty")
    with pytest.raises(KeyError, match=r"saved: \[0, 3\]"):
        RolloutCatalogue.from_source(run).batch("alfworld/scpo/seed0", 7)
    with pytest.raises(KeyError, match="runs: alfworld/scpo/seed0"):
        RolloutCatalogue.from_source(run).iterations("other")


def test_catalogue_keeps_only_the_most_recent_batches(tmp_path, monkeypatch):
    import scpo.analysis.explorer_data as ed

    run = _save_run(tmp_path / "run", (0, 1, 2))
    monkeypatch.setattr(ed, "KEEP_BATCHES", 2)
    cat = RolloutCatalogue.from_source(run)
    first = cat.batch("run", 0)
    cat.batch("run", 1)
    assert cat.batch("run", 0) is first  # kept, and now the most recent
    cat.batch("run", 2)  # drops iteration 1, the least recently used
    assert cat.batch("run", 0) is first and list(cat._loaded) == [("run", 2), ("run", 0)]


def test_default_iteration_is_the_latest_with_a_mixed_group(tmp_path):
    b = _batch()
    no_mixed = b.select(b.group_id == 1)
    cat = RolloutCatalogue({"r": {0: b, 1: b, 2: no_mixed}})
    assert cat.default_iteration("r") == 1
    assert RolloutCatalogue({"r": {0: no_mixed, 4: no_mixed}}).default_iteration("r") == 4


def test_group_table_counts_outcomes_by_hand():
    t = group_table(_batch())
    assert t[["group", "trajectories", "won", "lost", "steps", "mixed"]].values.tolist() == [
        [0, 2, 1, 1, 5, True],
        [1, 2, 0, 2, 3, False],
    ]
    assert t["task_id"].tolist() == ["t0", "t1"]


# ---------------------------------------------------------------------------------------------------- credit cache
def test_cache_recomputes_only_what_reads_scpo_options_and_keeps_the_scorer_option_apart():
    b = _batch()
    cat, cache = RolloutCatalogue.from_source(b), CreditCache(CreditConfig())
    first = cache.results(cat, "batch", 0, ["grpo", "scpo", "hcapo"], {"tau": 0.7, "scorer": "lexical"})
    assert list(first) == ["grpo", "scpo"]  # HCAPO needs the policy
    second = cache.results(cat, "batch", 0, ["grpo", "scpo"], {"tau": 0.0, "scorer": "lexical"})
    assert second["grpo"] is first["grpo"] and second["scpo"] is not first["scpo"]
    again = cache.results(cat, "batch", 0, ["scpo"], {"scorer": "lexical", "tau": 0.0})
    assert again["scpo"] is second["scpo"]
    # 'scorer' is SCPO's option here, not compute_advantages' scorer object
    np.testing.assert_array_equal(second["scpo"].advantages, compute_advantages("scpo", b, tau=0.0).advantages)
    with pytest.raises(ValueError, match="tau"):
        cache.results(cat, "batch", 0, ["scpo"], {"tau": 1.5})


def test_cache_credits_each_batch_at_its_environments_scale_like_the_static_maps(repo_root):
    from scpo.config import load_config
    from scpo.credit import estimate

    cfg = load_config(repo_root / "params.yaml")  # norm.scale_by_env: webshop -> none
    b = _batch()
    shop = RolloutBatch(**{**b.columns(), "env_name": np.full(b.n_rows, "webshop", dtype=object)})
    cache = CreditCache(cfg.credit)
    got = cache.results(RolloutCatalogue.from_source(shop), "batch", 0, ["gigpo", "scpo"], {})
    want = estimate(shop, ["gigpo", "scpo"], cfg)
    for m in ("gigpo", "scpo"):
        np.testing.assert_array_equal(got[m].advantages, want[m].advantages)
    std_scale = compute_advantages("gigpo", shop, cfg.credit, scale="std").advantages
    assert not np.allclose(got["gigpo"].advantages, std_scale)


# ---------------------------------------------------------------------------------------------------- one group
def test_group_view_matrices_and_hover_by_hand():
    b = _batch()
    res = _results(b)
    v = group_view(b, 0, res, ["grpo", "scpo"])
    assert v.traj_ids.tolist() == [0, 1] and v.labels == ["#0 lost T=3", "#1 won T=2"] and v.won.tolist() == [0, 1]
    # GiGPO anchors: observation 'a' opens both trajectories, every other observation is a singleton
    np.testing.assert_array_equal(v.anchor, [[2, 1, 1], [2, 1, np.nan]])
    np.testing.assert_array_equal(v.advantages["grpo"][0], res["grpo"].advantages[:3])
    assert np.isnan(v.advantages["scpo"][1, 2])
    assert set(v.advantages) == {"grpo", "scpo"} and v.q is None
    cell = v.hover[0, 0]
    for part in (
        "#0 lost T=3</b>, step 0",
        "action: x",
        "observation: a",
        "next observation: kitchen",
        "GiGPO anchor size: 2",
    ):
        assert part in cell
    assert "<i>(invalid)</i>" in v.hover[0, 2] and v.hover[0, 2].count("…") == 1  # long observation clipped
    assert v.hover[1, 2] == ""
    # SCPO at tau 0.7: only step 0 of the lost trajectory matches (score 1) -> credit kappa s_t (R_ref - R_i) / sigma_g,
    # sigma_g the unbiased std of the group's step rows' R - penalty (step 2 is invalid: 0.1)
    sigma = np.std([0, 0, -0.1, 10, 10], ddof=1)
    assert v.scpo_hover[0, 0] == f"SCPO match: reference #1 step 0, score 1.00, credit {10 / (sigma + 1e-6):+.3f}"
    assert v.scpo_hover[0, 0].endswith("credit +1.820")
    assert v.scpo_hover[0, 1].startswith("SCPO match: none (best candidate score 0.")
    assert v.scpo_hover[1, 0].startswith("SCPO match: none (SCPO credits only lost")
    assert v.matches[["traj_id", "step", "ref_traj_id", "ref_step"]].values.tolist() == [[0, 0, 1, 0]]
    assert v.vmax == shared_scale(v.advantages.values())

    lax = group_view(b, 0, _results(b, tau=0.0), ["scpo"])
    assert lax.matches[["step", "ref_step"]].values.tolist() == [[0, 0], [1, 1]]  # step 2: nothing after j* = 1 left

    without_scpo = group_view(b, 0, res, ["grpo"])
    assert without_scpo.scpo_hover is None and without_scpo.matches is None
    with pytest.raises(ValueError, match="gigpo, scpo, progpo_c"):
        group_view(b, 0, {"grpo": res["grpo"]})


def test_group_view_reads_oracle_progress_when_the_batch_has_it():
    b = _batch()
    b.oracle_progress = np.array([0.0, 0.25, 0.5, 0.5, 1.0, 0.0, 0.0, 0.1])  # the credit-fidelity work's column
    v = group_view(b, 0, _results(b))
    np.testing.assert_array_equal(v.q, [[0.0, 0.25, 0.5], [0.5, 1.0, np.nan]])
    assert "oracle progress q: 0.250" in v.hover[0, 1]
    fig = group_figure(v)
    assert [t["name"] for t in fig["data"] if t["type"] == "heatmap"] == ["grpo", "gigpo", "scpo", "anchor", "q"]
    b.oracle_progress = np.full(8, np.nan)  # a column without values is no column
    assert group_view(b, 0, _results(b)).q is None


def test_the_hover_says_where_credit_has_the_wrong_sign():
    """GRPO credits the lost trajectory down and the won one up. Lost: q 0 (nothing to check), 0.25 (progress credited
    down: wrong), -1 (a step away credited down: agrees); won: q -1 (a step away credited up: wrong), 1 (agrees)."""
    from scpo.analysis.explorer_data import WRONG_DOWN, WRONG_UP

    b = _batch()
    b.oracle_progress = np.array([0.0, 0.25, -1.0, -1.0, 1.0, 0.0, 0.0, 0.1])
    res = _results(b)
    v = group_view(b, 0, res)
    grpo = v.sign_hover["grpo"]
    assert (res["grpo"].advantages[:3] < 0).all() and (res["grpo"].advantages[3:5] > 0).all()
    assert grpo.tolist() == [
        ["q = 0: no sign to check", WRONG_DOWN, "credit sign agrees with q"],
        [WRONG_UP, "credit sign agrees with q", ""],
    ]
    assert set(v.sign_hover) == {"grpo", "gigpo", "scpo"}
    heat = {t["name"]: t for t in group_figure(v)["data"] if t["type"] == "heatmap"}
    assert heat["grpo"]["customdata"][1][0].endswith(f"<br>{WRONG_UP}") and heat["grpo"]["customdata"][1][2] == ""
    scpo_cell = heat["scpo"]["customdata"][0][0]  # SCPO's match first, then the sign of SCPO's own credit
    assert scpo_cell.startswith("SCPO match: reference #1 step 0") and scpo_cell.endswith("q = 0: no sign to check")
    assert group_view(_batch(), 0, _results(_batch())).sign_hover is None  # no q, no sign to show


def test_shared_scale_is_the_99th_percentile_of_abs_advantage():
    assert shared_scale([np.array([[1.0, -3.0], [np.nan, 2.0]])]) == pytest.approx(np.quantile([1, 2, 3], 0.99))
    assert shared_scale([np.zeros((2, 2))]) == 1.0


def test_figure_panels_share_one_colour_axis_and_draw_matches():
    b = _batch()
    v = group_view(b, 0, _results(b, tau=0.0))
    fig = group_figure(v, title="t")
    heat = [t for t in fig["data"] if t["type"] == "heatmap"]
    assert [t["name"] for t in heat] == ["grpo", "gigpo", "scpo", "anchor"]
    assert {t["coloraxis"] for t in heat[:3]} == {"coloraxis"} and heat[3]["coloraxis"] == "coloraxis2"
    lay = fig["layout"]
    assert (lay["coloraxis"]["cmin"], lay["coloraxis"]["cmax"]) == (-v.vmax, v.vmax)
    assert heat[0]["z"][1][2] is None and heat[0]["yaxis"] == "y" and heat[3]["yaxis"] == "y4"
    assert heat[2]["customdata"][0][0].startswith("SCPO match: reference #1 step 0")
    lines = [t for t in fig["data"] if t["name"].startswith("score bin")]
    assert len(lines) == MATCH_BINS
    mids = next(t for t in fig["data"] if t["name"] == "matches")
    # lost #0 (y=0) step 0 -> reference #1 (y=1) step 0, and step 1 -> step 1
    assert mids["x"] == [0.0, 1.0] and mids["y"] == [0.5, 0.5]
    assert mids["marker"]["color"][0] == 1.0
    assert lines[MATCH_BINS - 1]["x"][:2] == [0.0, 0.0]  # score 1 falls in the top bin
    top = [a["text"] for a in lay["annotations"]]
    assert top[0].startswith("grpo: advantage") and top[-1].startswith("SCPO matches")

    empty = group_figure(group_view(b, 1, _results(b)))  # all lost: no matches, a note instead
    assert next(t for t in empty["data"] if t["name"] == "matches")["x"] == []
    assert any(a["text"].startswith("no SCPO matches") for a in empty["layout"]["annotations"])


# ---------------------------------------------------------------------------------------------------- controls
class _Opts(StrictModel):
    rule: Literal["argmax", "first"] = "first"
    strength: float = Field(0.5, ge=0, lt=1, description="a strictly bounded share")
    weight: float = Field(2.0, ge=0)
    flag: bool = True
    n: int = 3
    model: str | None = None
    depths: tuple[int, ...] = (1,)


def test_option_controls_follow_the_model_fields():
    import ipywidgets as w

    ctl = option_controls(_Opts())
    assert list(ctl) == ["rule", "strength", "weight", "flag", "n", "model"]  # tuples have no control
    assert isinstance(ctl["rule"], w.Dropdown) and ctl["rule"].options == ("argmax", "first")
    assert ctl["rule"].value == "first"
    assert isinstance(ctl["strength"], w.FloatSlider) and ctl["strength"].min == 0
    assert ctl["strength"].max == pytest.approx(0.99) and ctl["strength"].tooltip == "a strictly bounded share"
    assert isinstance(ctl["weight"], w.FloatText) and isinstance(ctl["flag"], w.Checkbox)
    assert isinstance(ctl["n"], w.IntText) and isinstance(ctl["model"], w.Text)
    scpo = option_controls(SCPOOptions(tau=0.4))
    assert set(scpo) == set(SCPOOptions.model_fields) and scpo["tau"].value == 0.4 and scpo["tau"].max == 1


def test_interactive_session_follows_the_jupyter_server(monkeypatch):
    import psutil

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    assert not interactive_session()  # Papermill / nbclient / DVC start kernels without it
    monkeypatch.setenv("JPY_SESSION_NAME", "/lab/04_credit_maps.ipynb")
    assert interactive_session()
    monkeypatch.setenv("CI", "true")
    assert not interactive_session()
    monkeypatch.setenv("CI", "")
    parent = SimpleNamespace(cmdline=lambda: ["python", "/venv/bin/papermill", "in.ipynb", "out.ipynb"])
    monkeypatch.setattr(psutil, "Process", lambda *a: SimpleNamespace(parent=lambda: parent))
    assert not interactive_session()  # Papermill launched from inside a JupyterLab kernel
    parent = SimpleNamespace(cmdline=lambda: ["python", "-m", "papermill", "in.ipynb", "out.ipynb"])
    assert not interactive_session()
    parent = SimpleNamespace(cmdline=lambda: ["python", "/venv/bin/jupyter-lab", "/home/me/papermill-notes"])
    assert interactive_session()  # a JupyterLab server whose folder happens to be named after Papermill


# ---------------------------------------------------------------------------------------------------- the widget
def _z(ex, name):
    return next(np.array(t.z, dtype=float) for t in ex.figure.data if t.name == name)


def test_explorer_redraws_on_every_control():
    b = _batch()
    cfg = CreditConfig(norm={"scale": "none"})  # SCPO's credit is then kappa s_t (R_ref - R_i), unscaled
    ex = explore(b, cfg, methods=["grpo", "gigpo", "scpo", "hcapo"])
    assert ex.group.value == 0 and ex.group.options[0] == ("group 0: 1 won / 1 lost, 5 steps", 0)
    assert [t.name for t in ex.figure.data if t.type == "heatmap"] == ["grpo", "gigpo", "scpo", "anchor"]
    assert "color:#b00" not in ex.status.value
    fig, grpo, scpo = ex.figure, _z(ex, "grpo"), _z(ex, "scpo")

    ex.options[
        "tau"
    ].value = 0.0  # one more match: SCPO's credit moves, GRPO's does not, the figure is updated in place
    assert ex.figure is fig
    np.testing.assert_array_equal(_z(ex, "grpo"), grpo)
    assert not np.allclose(_z(ex, "scpo")[0], scpo[0])
    np.testing.assert_allclose(_z(ex, "scpo")[0], compute_advantages("scpo", b, cfg, tau=0.0).advantages[:3])
    assert len(next(t for t in ex.figure.data if t.name == "matches").x) == 2

    ex.options["shape_episode"].value = True  # invalid with mode "advantage": said in the status line, figure kept
    assert "shape_episode=True belongs to mode=&#x27;returns&#x27;" in ex.status.value and ex.figure is fig
    ex.options["mode"].value = "returns"  # revision 1 as an ablation: a control like any other option
    assert "color:#b00" not in ex.status.value
    np.testing.assert_allclose(
        _z(ex, "scpo")[0],
        compute_advantages("scpo", b, cfg, tau=0.0, mode="returns", shape_episode=True).advantages[:3],
    )

    ex.group.value = 1
    assert list(ex.figure.layout.yaxis.ticktext) == ["#0 lost T=1", "#1 lost T=2"]
    assert "group 1: 0 won / 2 lost" in ex.figure.layout.title.text

    ex.estimators["grpo"].value = False
    assert [t.name for t in ex.figure.data if t.type == "heatmap"] == ["gigpo", "scpo", "anchor"]
    for button in ex.estimators.values():
        button.value = False
    assert "no estimator selected" in ex.status.value  # told, not raised


def test_explorer_switching_between_groups_of_one_shape_updates_every_text():
    b = _batch()
    twin = b.select(b.group_id == 0)
    twin = RolloutBatch.from_columns(
        group_id=[*b.group_id[:5], *([1] * 5)],
        traj_id=[*twin.traj_id, *(twin.traj_id + 2)],
        step=[*twin.step] * 2,
        reward=[*twin.reward] * 2,
        observation=[*twin.observation, *["e", "f", "g", "e", "h"]],
        action=[*twin.action, *["u", "v", "s", "u", "q"]],
    )
    ex = explore(twin, methods=["gigpo", "scpo"])
    fig = ex.figure
    ex.group.value = 1  # same shape (2 trajectories x 3 steps): updated in place, texts included
    assert ex.figure is fig
    heat = next(t for t in ex.figure.data if t.name == "gigpo")
    assert "action: u" in heat.text[0][0] and "observation: e" in heat.text[0][0]
    assert "group 1:" in ex.figure.layout.title.text


def test_explorer_click_selects_the_trajectory_and_step():
    ex = explore(_batch(), methods=["gigpo", "scpo"])
    assert ex.trajectory.options == (("#0 lost T=3", 0), ("#1 won T=2", 1))
    ex._on_click(None, SimpleNamespace(point_inds=[(1, 1)]), None)
    assert ex.trajectory.value == 1
    assert "<b>t=1</b> <code>w</code>" in ex.text.value and "goal reached" in ex.text.value
    highlighted = ex.text.value.split("background:#fff3c4;")[1]
    assert highlighted.split("</div>")[0].count("<b>t=1</b>") == 1
    ex._on_click(None, SimpleNamespace(point_inds=[(0, 2)]), None)
    assert ex.trajectory.value == 0 and LONG.strip() in ex.text.value  # the side panel keeps the full text


def test_explorer_switches_runs_and_iterations(tmp_path):
    b = _batch()
    only_group_1 = b.select(b.group_id == 1)
    assert explore({"first": b, "second": only_group_1}).run.options == ("first", "second")
    two = RolloutCatalogue({"a": {0: b}, "b": {3: b, 5: only_group_1}})
    ex = CreditExplorer(two, CreditConfig(), ["gigpo", "scpo"])
    assert ex.run.value == "a" and ex.iteration.options == (("iteration 0", 0),)
    ex.run.value = "b"  # latest iteration with a mixed group: 3 (5 has none); its most informative group: 0
    assert ex.iteration.options == (("iteration 3", 3), ("iteration 5", 5)) and ex.iteration.value == 3
    assert ex.group.value == 0 and "b · iteration 3 · group 0" in ex.figure.layout.title.text
    ex.iteration.value = 5
    assert [v for _, v in ex.group.options] == [1] and "iteration 5 · group 1" in ex.figure.layout.title.text
    bad = tmp_path / "iter_0001.parquet"
    bad.write_text("not parquet")
    broken = CreditExplorer(RolloutCatalogue({"ok": {0: b}, "broken": {1: bad}}), CreditConfig(), ["gigpo"])
    broken.run.value = "broken"  # told in the status line, the last figure stays
    assert "color:#b00" in broken.status.value and "group 0" in broken.figure.layout.title.text


def test_explore_rejects_bad_arguments():
    b = _batch()
    with pytest.raises(ValueError, match=r"no estimator among \[.hcapo.\] runs on saved rollouts alone"):
        explore(b, methods=["hcapo"])
    with pytest.raises(KeyError, match="unknown credit methods \\['gae'\\]; available: exact_advantage, g2po, gigpo"):
        explore(b, methods=["gigpo", "gae"])
    with pytest.raises(KeyError, match="runs: batch"):
        explore(b, run="nope")
    with pytest.raises(KeyError, match=r"no group 9; groups: \[0, 1\]"):
        explore(b, group=9)
    with pytest.raises(TypeError, match="config must be"):
        explore(b, config={"tau": 1})


def test_trajectory_html_escapes_text():
    b = RolloutBatch.from_columns(
        group_id=[0, 0], traj_id=[0, 1], step=[0, 0], reward=[10, 0], action=["<script>", "x"], observation=["o", "o"]
    )
    v = group_view(b, 0, _results(b, ("gigpo",)))
    page = trajectory_html(b, v, 0)
    assert "&lt;script&gt;" in page and "<script>" not in page


def test_the_hover_shows_the_critics_value_and_td_error_when_the_batch_has_them():
    """A PPO run's saved rollouts carry the critic's V(s_t) (critic_value): each cell's hover gives it and PPO's TD
    error delta_t = r_t - pen_t + V(s_{t+1}) - V(s_t) (gamma 1; 0 after a trajectory's end), by hand."""
    b = _batch().with_column("critic_value", [1.0, 2.0, 4.0, 3.0, 5.0, 0.0, 0.0, 0.0])
    v = group_view(b, 0, _results(b))
    # traj 0: (0 + 2 - 1, 0 + 4 - 2, 0 - 0.1 invalid + 0 - 4) = (1, 2, -4.1); traj 1: (0 + 5 - 3, 10 - 5) = (2, 5)
    assert v.hover[0, 0].endswith("critic V(s_t): 1.000, TD error δ_t: +1.000")
    assert v.hover[0, 2].endswith("critic V(s_t): 4.000, TD error δ_t: -4.100")
    assert v.hover[1, 1].endswith("critic V(s_t): 5.000, TD error δ_t: +5.000")
    ppo = compute_advantages("ppo", b, CreditConfig(), gamma=0.5, whiten="steps")  # the explorer's own PPO result
    with_ppo = group_view(b, 0, {**_results(b), "ppo": ppo}, ["gigpo"])
    assert with_ppo.hover[0, 0].endswith("critic V(s_t): 1.000, TD error δ_t: +0.000")  # 0 + 0.5 x 2 - 1
    assert "critic V" not in group_view(_batch(), 0, _results(_batch())).hover[0, 0]

"""Interactive credit-map explorer for JupyterLab: `explore(rollouts)` over any saved rollouts.

    from scpo.analysis.explorer import explore
    explore("runs/alfworld")                  # a folder of runs, a run, its rollouts/, one file, a RolloutBatch, a list

Controls: run, iteration, group (with its outcome mix), the estimators to show, and SCPO's options (one control per
field of the SCPO options model, so new options appear by themselves), which recompute credit live through
`scpo.credit.estimate` (results cached per option set; the scorer is built once per process by the registry).
The figure (`explorer_figure`): per-step heat maps on one shared colour scale with hover text, GiGPO's anchor sizes,
oracle progress q when the rollouts have it, SCPO's match lines. Clicking a cell shows that trajectory's text in the
side panel. Widgets: ipywidgets + plotly's FigureWidget (plotly >= 6 renders it through anywidget).

Under Papermill, DVC and CI notebook 04 draws the static PNG instead (`interactive_session` tells which).
"""

from __future__ import annotations

import html
import os
import time
import typing
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from scpo.analysis.explorer_data import CreditCache, GroupView, RolloutCatalogue, group_table, group_view
from scpo.analysis.explorer_figure import group_figure, same_structure, update_in_place
from scpo.analysis.rollout_files import pick_group
from scpo.credit import CreditConfig, available_methods
from scpo.credit.registry import method_spec
from scpo.scorers.base import ScorerError

__all__ = ["explore", "CreditExplorer", "interactive_session", "option_controls"]


def interactive_session() -> bool:
    """True in a kernel that a Jupyter server started for a notebook (JupyterLab / Notebook set JPY_SESSION_NAME),
    unless CI is set or the kernel's parent is Papermill (a Papermill run launched from inside such a kernel inherits
    the variable). Papermill, nbclient and DVC runs otherwise start kernels without it."""
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        return False
    if not os.environ.get("JPY_SESSION_NAME"):
        return False
    try:
        import psutil

        launcher = psutil.Process().parent().cmdline()[:3]  # python, the script or -m, the module
    except Exception:
        return True
    return not any(Path(arg).stem == "papermill" for arg in launcher)


def _bounds(info) -> tuple[float | None, float | None, bool]:
    """(low, high, high_is_strict) from a pydantic field's annotated_types metadata (Ge/Gt/Le/Lt)."""
    lo = hi = None
    strict = False
    for m in info.metadata:
        lo = getattr(m, "ge", getattr(m, "gt", lo))
        if getattr(m, "le", None) is not None:
            hi = m.le
        elif getattr(m, "lt", None) is not None:
            hi, strict = m.lt, True
    return lo, hi, strict


def option_controls(model: Any) -> dict[str, Any]:
    """{field: ipywidget} for each field of the options `model` (a pydantic model instance), valued from it.

    Literal -> Dropdown; bool -> Checkbox; float bounded on both sides -> FloatSlider (released-only updates; a strict
    upper bound stops one step below it); other float / int -> FloatText / IntText; str | None -> Text ('' = None).
    Fields of other types are left out (the explorer then keeps their configured value)."""
    import ipywidgets as w

    out = {}
    style = {"description_width": "initial"}
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        ann = info.annotation
        tip = info.description or name
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if typing.get_origin(ann) is typing.Literal:
            ctl = w.Dropdown(
                options=list(typing.get_args(ann)),
                value=value,
                description=name,
                tooltip=tip,
                style=style,
                layout=w.Layout(width="220px"),
            )
        elif ann is bool:
            ctl = w.Checkbox(
                value=bool(value), description=name, tooltip=tip, indent=False, layout=w.Layout(width="150px")
            )
        elif ann is float:
            lo, hi, strict = _bounds(info)
            if lo is not None and hi is not None:
                step = 0.01 if hi - lo <= 2 else (hi - lo) / 100
                ctl = w.FloatSlider(
                    value=value,
                    min=lo,
                    max=hi - step if strict else hi,
                    step=step,
                    description=name,
                    tooltip=tip,
                    continuous_update=False,
                    readout_format=".2f",
                    style=style,
                    layout=w.Layout(width="300px"),
                )
            else:
                ctl = w.FloatText(
                    value=value, description=name, tooltip=tip, style=style, layout=w.Layout(width="180px")
                )
        elif ann is int:
            ctl = w.IntText(value=value, description=name, tooltip=tip, style=style, layout=w.Layout(width="150px"))
        elif args == [str]:
            ctl = w.Text(
                value=value or "",
                placeholder="default",
                description=name,
                tooltip=tip,
                continuous_update=False,
                style=style,
                layout=w.Layout(width="260px"),
            )
        else:
            continue
        out[name] = ctl
    return out


def _option_value(ctl) -> Any:
    import ipywidgets as w

    if isinstance(ctl, w.Text):
        return ctl.value.strip() or None
    return ctl.value


class CreditExplorer:
    """The explorer's widgets and state; display it (it renders as its `widget`). `redraw()` is what every control
    change calls; it returns the seconds it took."""

    def __init__(
        self,
        catalogue: RolloutCatalogue,
        config: CreditConfig,
        methods: Iterable[str],
        *,
        run: str | None = None,
        iteration: int | None = None,
        group: int | None = None,
        text_chars: int = 160,
        width: int = 1000,
    ):
        import ipywidgets as w

        self.catalogue, self.cache, self.text_chars, self.width = catalogue, CreditCache(config), text_chars, width
        methods = list(methods)
        unknown = [m for m in methods if m not in available_methods()]
        if unknown:
            raise KeyError(f"unknown credit methods {unknown}; available: {', '.join(available_methods())}")
        self.methods = [m for m in methods if not method_spec(m).policy_scores]  # the policy is not loaded here
        if not self.methods:
            raise ValueError(
                f"no estimator among {list(methods)} runs on saved rollouts alone (HCAPO needs the policy); "
                f"available: {available_methods()}"
            )
        self._holding = False
        self.figure = None
        self._drawn: tuple | None = None  # (run, iteration, group) the figure shows
        self.view: GroupView | None = None
        run = run if run is not None else next(iter(catalogue.runs))
        catalogue.iterations(run)  # unknown run -> KeyError naming the runs

        wide = {"description_width": "initial"}
        self.run = w.Dropdown(
            options=list(catalogue.runs), value=run, description="run", style=wide, layout=w.Layout(width="330px")
        )
        self.iteration = w.Dropdown(description="iteration", style=wide, layout=w.Layout(width="160px"))
        self.group = w.Dropdown(description="group", style=wide, layout=w.Layout(width="420px"))
        self.estimators = {
            m: w.ToggleButton(
                value=True, description=m, tooltip=f"show {m}'s advantages", icon="check", layout=w.Layout(width="auto")
            )
            for m in self.methods
        }
        for button in self.estimators.values():
            button.observe(lambda change: setattr(change["owner"], "icon", "check" if change["new"] else ""), "value")
        self.options = option_controls(config.scpo)
        self.trajectory = w.Dropdown(description="trajectory", style=wide, layout=w.Layout(width="300px"))
        self.status = w.HTML()
        self.text = w.HTML(layout=w.Layout(max_height="1100px", overflow_y="auto"))
        self.plot = w.Box(layout=w.Layout(width=f"{width + 10}px", flex="0 0 auto"))
        self._step: int | None = None

        with self._hold():
            self._fill_iterations(iteration)
            self._fill_groups(group)
        self.run.observe(self._on_run, "value")
        self.iteration.observe(self._on_iteration, "value")
        self.group.observe(lambda _: self.redraw(), "value")
        for ctl in (*self.estimators.values(), *self.options.values()):
            ctl.observe(lambda _: self.redraw(), "value")
        self.trajectory.observe(lambda _: self._show_text(), "value")

        scpo_box = w.HBox(
            [w.HTML("<b>SCPO</b>", layout=w.Layout(width="50px")), *self.options.values()],
            layout=w.Layout(flex_flow="row wrap", align_items="center"),
        )
        controls = w.VBox(
            [
                w.HBox([self.run, self.iteration, self.group], layout=w.Layout(flex_flow="row wrap")),
                w.HBox(
                    [w.HTML("<b>estimators</b>", layout=w.Layout(width="80px")), *self.estimators.values()],
                    layout=w.Layout(flex_flow="row wrap", align_items="center"),
                ),
                scpo_box,
                self.status,
            ]
        )
        side = w.VBox(
            [w.HTML("<b>Selected trajectory</b> (click a heat-map cell)"), self.trajectory, self.text],
            layout=w.Layout(flex="1 1 320px", min_width="320px", max_width="760px", padding="0 0 0 8px"),
        )
        self.widget = w.VBox([controls, w.HBox([self.plot, side], layout=w.Layout(flex_flow="row wrap"))])
        self.widget.add_class("scpo-credit-explorer")
        self.redraw()

    # ------------------------------------------------------------------ display
    def _repr_mimebundle_(self, **kwargs):
        return self.widget._repr_mimebundle_(**kwargs)

    # ------------------------------------------------------------------ state
    @contextmanager
    def _hold(self):
        """Refill dropdowns without a redraw per change."""
        held, self._holding = self._holding, True
        try:
            yield
        finally:
            self._holding = held

    def scpo_options(self) -> dict[str, Any]:
        """The SCPO options as the controls set them."""
        return {name: _option_value(ctl) for name, ctl in self.options.items()}

    def shown_methods(self) -> list[str]:
        return [m for m, b in self.estimators.items() if b.value]

    def _fill_iterations(self, iteration: int | None) -> None:
        its = self.catalogue.iterations(self.run.value)
        chosen = self.catalogue.default_iteration(self.run.value) if iteration is None else int(iteration)
        if chosen not in its:
            raise KeyError(f"run {self.run.value!r} has no iteration {iteration}; saved: {its}")
        self.iteration.options = [(f"iteration {i}", i) for i in its]
        self.iteration.value = chosen

    def _fill_groups(self, group: int | None) -> None:
        batch = self.catalogue.batch(self.run.value, self.iteration.value)
        table = group_table(batch)
        labels = []
        for r in table.itertuples():
            task = f" · {r.task_type}" if r.task_type else ""
            labels.append((f"group {r.group}: {r.won} won / {r.lost} lost, {r.steps} steps{task}", int(r.group)))
        chosen = pick_group(batch) if group is None else int(group)
        if chosen not in set(table["group"]):
            raise KeyError(
                f"iteration {self.iteration.value} of run {self.run.value!r} has no group {group}; "
                f"groups: {table['group'].tolist()}"
            )
        self.group.options = labels
        self.group.value = chosen

    def _on_run(self, _) -> None:
        self._refill(lambda: (self._fill_iterations(None), self._fill_groups(None)))

    def _on_iteration(self, _) -> None:
        if not self._holding:
            self._refill(lambda: self._fill_groups(None))

    def _refill(self, fill) -> None:
        """Refill the dependent dropdowns (a run's files are read here), then redraw; a file that cannot be read is
        reported in the status line."""
        try:
            with self._hold():
                fill()
        except (ValueError, KeyError, OSError) as err:
            self.status.value = f"<span style='color:#b00'>{html.escape(str(err))}</span>"
            return
        self.redraw()

    # ------------------------------------------------------------------ drawing
    def redraw(self) -> float:
        """Recompute credit for the current controls and update the figure (in place when only values changed)."""
        if self._holding:
            return 0.0
        import plotly.graph_objects as go

        start = time.perf_counter()
        self.status.value = "<i>computing credit (a model scorer loads once, on its first use)…</i>"
        methods = self.shown_methods()
        run, it, g = self.run.value, self.iteration.value, self.group.value
        try:
            if not methods:
                raise ValueError("no estimator selected: switch one on")
            batch = self.catalogue.batch(run, it)
            results = self.cache.results(self.catalogue, run, it, [*methods, "gigpo"], self.scpo_options())
            missing = [m for m in methods if m not in results]  # needs these rollouts do not meet (oracle progress)
            methods = [m for m in methods if m in results]
            if not methods:
                raise ValueError(f"these rollouts do not carry what {missing} need (oracle progress)")
            computed = time.perf_counter()
            self.view = group_view(batch, g, results, methods, text_chars=self.text_chars)
            mix = group_table(batch).set_index("group").loc[g]
            title = f"{run} · iteration {it} · group {g}: {mix['won']} won / {mix['lost']} lost"
            fig = group_figure(self.view, methods, title)
            fig["layout"]["width"] = self.width  # plotly's widget sizes itself once, before JupyterLab lays it out
        except (ValueError, KeyError, OSError, ScorerError) as err:
            self.status.value = f"<span style='color:#b00'>{html.escape(str(err))}</span>"
            return time.perf_counter() - start
        drawn = (run, it, g)
        if self.figure is not None and same_structure(self.figure, fig):
            update_in_place(self.figure, fig, same_group=drawn == self._drawn)
        else:
            self.figure = go.FigureWidget(fig)
            for trace in self.figure.data:
                if trace.type == "heatmap":
                    trace.on_click(self._on_click)
            self.plot.children = (self.figure,)
        self._drawn = drawn
        self._fill_trajectories()
        took = time.perf_counter() - start
        self.status.value = (
            f"<span style='color:#555'>credit {1000 * (computed - start):.0f} ms, figure "
            f"{1000 * (took - (computed - start)):.0f} ms; colour limit |A| = {self.view.vmax:.3g} "
            f"(99% quantile over the shown panels)"
            + (f"; not shown: {', '.join(missing)} (these rollouts carry no oracle progress)" if missing else "")
            + "</span>"
        )
        return took

    def _fill_trajectories(self) -> None:
        view = self.view
        options = [(label, k) for k, label in enumerate(view.labels)]
        keep = (
            self.trajectory.value if self.trajectory.value is not None and self.trajectory.value < len(options) else 0
        )
        if list(self.trajectory.options) != options:
            with self._hold():
                self.trajectory.options = options
                self.trajectory.value = keep
            self._step = None
        self._show_text()

    def _on_click(self, trace, points, _state) -> None:
        if not points.point_inds:
            return
        k, t = (int(i) for i in points.point_inds[0])  # heat map points: (row, column)
        self._step = t
        if self.trajectory.value == k:
            self._show_text()
        else:
            self.trajectory.value = k

    def _show_text(self) -> None:
        if self._holding or self.view is None or self.trajectory.value is None:
            return
        self.text.value = trajectory_html(
            self.catalogue.batch(self.run.value, self.iteration.value),
            self.view,
            int(self.trajectory.value),
            self._step,
        )


def trajectory_html(batch, view: GroupView, k: int, highlight: int | None = None) -> str:
    """The side panel: trajectory k of `view`, one block per step (action, observation, next observation, each shown
    estimator's advantage, SCPO's match, q), step `highlight` marked."""
    traj = int(view.traj_ids[k])
    rows = np.flatnonzero(batch.traj_id == traj)
    r0 = rows[0]
    head = (
        f"<div style='font-size:13px'><b>{html.escape(view.labels[k])}</b> · task {html.escape(batch.task_id[r0])} "
        f"{html.escape(batch.task_type[r0])} · return {batch.episode_return[r0]:g}</div>"
    )
    blocks = []
    for t, r in enumerate(rows):
        adv = " · ".join(f"{m} <b>{a[k, t]:+.3f}</b>" for m, a in view.advantages.items())
        extra = [] if view.scpo_hover is None else [html.escape(view.scpo_hover[k, t])]
        if view.q is not None:
            extra.append(f"q {view.q[k, t]:.3f}")
        style = "background:#fff3c4;" if highlight == t else ""
        blocks.append(
            f"<div style='{style}border-top:1px solid #ddd;padding:3px 2px;font-size:12px;line-height:1.35'>"
            f"<b>t={t}</b> <code>{html.escape(batch.action[r])}</code>"
            f"{'' if batch.valid[r] else ' <i>(invalid)</i>'} · r={batch.reward[r]:g}<br>"
            f"<span style='color:#555'>obs:</span> {html.escape(batch.observation[r])}<br>"
            f"<span style='color:#555'>next:</span> {html.escape(batch.next_observation[r])}<br>{adv}"
            + "".join(f"<br><span style='color:#555'>{e}</span>" for e in extra)
            + "</div>"
        )
    return head + "".join(blocks)


def explore(
    rollouts,
    config=None,
    methods: Iterable[str] | None = None,
    *,
    run: str | None = None,
    iteration: int | None = None,
    group: int | None = None,
    width: int = 1000,
) -> CreditExplorer:
    """Open the credit explorer on `rollouts` (see `RolloutCatalogue.from_source`: a RolloutBatch, a rollout file, a
    run or rollouts/ folder, a folder of runs, a list of these or a {name: source} dict).

    config: a `scpo.config.Config` (its credit section and report.methods), a `CreditConfig`, or None (defaults).
    methods: the estimators (default: report.methods, else every registered one), HCAPO left out (it needs the policy).
    run / iteration / group: the first view (default: the first run, its latest iteration with a mixed group, the most
    informative group as `pick_group`). width: of the figure in pixels (the side panel takes the rest of the row)."""
    if config is None:
        credit, default_methods = CreditConfig(), available_methods()
    elif isinstance(config, CreditConfig):
        credit, default_methods = config, available_methods()
    elif hasattr(config, "credit"):
        credit, default_methods = config.credit, tuple(config.report.methods)
    else:
        raise TypeError(f"config must be a scpo Config, a CreditConfig or None, got {type(config).__name__}")
    catalogue = RolloutCatalogue.from_source(rollouts)
    return CreditExplorer(
        catalogue,
        credit,
        methods if methods is not None else default_methods,
        run=run,
        iteration=iteration,
        group=group,
        width=width,
    )

"""The explorer's plotly figure of one group (`GroupView`): a heat map per estimator on one shared diverging colour
axis (the static credit maps' layout, `credit_maps`), GiGPO's anchor-group sizes, the oracle progress q when the
rollouts carry it, and SCPO's monotone matches (algorithms.md SCPO step 4) as lines from a lost trajectory's step t to
the reference step j* it matched, coloured by the match score. Rows are trajectories in the same order in every panel
(trajectory k at y = k), columns are steps.

`update_in_place` moves a live `FigureWidget` to a new figure of the same structure (same group and panels: a new tau,
kappa, ...) by sending only the values that options change, which keeps a redraw small.
"""

from __future__ import annotations

import numpy as np

from scpo.analysis.credit_maps import TRAINED_WITH, panel_title
from scpo.analysis.explorer_data import GroupView

__all__ = ["group_figure", "same_structure", "update_in_place", "MATCH_BINS"]

MATCH_BINS = 8  # match lines are drawn in this many score bins (one trace each, one colour each)
_ROW_PX = 17  # pixels per trajectory row of a panel
_PANEL_PX = 70  # title, axis and spacing per panel
# a small explicit template: plotly's default one costs ~0.5 s to load on a kernel's first figure and ~10 kB per widget
_TEMPLATE = {
    "layout": {
        "font": {"color": "#2a3f5f"},
        "paper_bgcolor": "white",
        "plot_bgcolor": "#f2f2f2",
        "xaxis": {"gridcolor": "white", "zeroline": False, "ticks": "", "automargin": True, "title": {"standoff": 8}},
        "yaxis": {"gridcolor": "white", "zeroline": False, "ticks": "", "automargin": True, "title": {"standoff": 8}},
    }
}


def _panels(view: GroupView, methods: list[str]) -> list[str]:
    return [
        *methods,
        "anchor",
        *(["q"] if view.q is not None else []),
        *(["matches"] if view.matches is not None else []),
    ]


def _custom(scpo: np.ndarray, sign: np.ndarray | None) -> list:
    """An advantage panel's per-cell hover lines below A: SCPO's match, then (where the batch has q) whether this
    panel's credit has the sign q gives the step."""
    if sign is None:
        return scpo.tolist()
    rows = zip(scpo.tolist(), sign.tolist())
    return [[f"{a}<br>{b}" if a and b else a or b for a, b in zip(ra, rb)] for ra, rb in rows]


def _axis(row: int) -> str:
    return "" if row == 1 else str(row)


def group_figure(view: GroupView, methods: list[str] | None = None, title: str = "") -> dict:
    """The figure of `view` as a plotly figure dict (`go.Figure(d)` / `go.FigureWidget(d)` validate it once): panels in
    order trained with (if the rollouts carry it), methods, anchor, q (if any), matches (if SCPO), stacked; built as
    plain dicts because plotly's object API costs ~10x more per redraw."""
    methods = list(view.advantages) if methods is None else [m for m in methods if m in view.advantages]
    if TRAINED_WITH in view.advantages and TRAINED_WITH not in methods:
        methods = [TRAINED_WITH, *methods]
    panels = _panels(view, methods)
    titles = {
        **{m: panel_title(m) for m in methods},
        "anchor": "GiGPO anchor-group size (steps of the group sharing o_t; 1 = singleton, no step advantage)",
        "q": "oracle progress q(i,t)",
        "matches": "SCPO matches: lost trajectory's step t -> reference step j* (colour = match score)",
    }
    k, t = view.anchor.shape
    n = len(panels)
    panel_px = _ROW_PX * k + _PANEL_PX
    gap = 60 / (panel_px * n)  # x-axis title and the next panel's title
    h = (1 - (n - 1) * gap) / n
    x, y = list(range(t)), list(range(k))
    hover = view.hover.tolist()
    scpo = view.scpo_hover if view.scpo_hover is not None else np.full(view.hover.shape, "", dtype=object)
    data: list[dict] = []
    layout: dict = {}
    annotations = []
    for row, p in enumerate(panels, start=1):
        ax = _axis(row)
        top = 1 - (row - 1) * (h + gap)
        common = {
            "x": x,
            "y": y,
            "xaxis": f"x{ax}",
            "yaxis": f"y{ax}",
            "hoverongaps": False,
            "xgap": 1,
            "ygap": 1,
            "text": hover,
        }
        if p in view.advantages:
            data.append(
                {
                    "type": "heatmap",
                    "name": p,
                    "z": _nan_to_none(view.advantages[p]),
                    "customdata": _custom(scpo, None if view.sign_hover is None else view.sign_hover.get(p)),
                    "coloraxis": "coloraxis",
                    "hovertemplate": f"%{{text}}<br><b>{p}: A = %{{z:.3f}}</b><br>%{{customdata}}<extra></extra>",
                    **common,
                }
            )
        elif p == "anchor":
            data.append(
                {
                    "type": "heatmap",
                    "name": "anchor",
                    "z": _nan_to_none(view.anchor),
                    "coloraxis": "coloraxis2",
                    "hovertemplate": "%{text}<extra></extra>",
                    "textfont": {"size": 9},
                    **({"texttemplate": "%{z:.0f}"} if t <= 30 else {}),
                    **common,
                }
            )
        elif p == "q":
            data.append(
                {
                    "type": "heatmap",
                    "name": "q",
                    "z": _nan_to_none(view.q),
                    "coloraxis": "coloraxis3",
                    "hovertemplate": "%{text}<extra></extra>",
                    **common,
                }
            )
        else:
            data.extend({**trace, "xaxis": f"x{ax}", "yaxis": f"y{ax}"} for trace in _match_traces(view))
        layout[f"yaxis{ax}"] = {
            "domain": [max(0.0, top - h), top],
            "anchor": f"x{ax}",
            "tickvals": y,
            "ticktext": view.labels,
            "autorange": "reversed",
            "tickfont": {"size": 9},
            "title": {"text": "trajectory"},
        }
        layout[f"xaxis{ax}"] = {
            "domain": [0, 1],
            "anchor": f"y{ax}",
            "range": [-0.5, t - 0.5],
            "dtick": max(1, int(np.ceil(t / 25))),
            "title": {"text": "step t"},
        }
        annotations.append(
            {
                "text": titles[p],
                "x": 0,
                "y": top,
                "xref": "paper",
                "yref": "paper",
                "xanchor": "left",
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": 12},
            }
        )
        if p == "matches" and view.matches is not None and view.matches.empty:
            annotations.append(
                {
                    "text": "no SCPO matches in this group (SCPO shapes only groups with a won and a lost "
                    "trajectory, at scores >= tau)",
                    "xref": f"x{ax} domain",
                    "yref": f"y{ax} domain",
                    "x": 0.5,
                    "y": 0.5,
                    "showarrow": False,
                    "font": {"size": 11},
                    "bgcolor": "rgba(255,255,255,0.8)",
                }
            )
    layout.update(_colour_axes(view, panels, h, gap))
    layout.update(
        height=panel_px * n + 90,
        margin={"l": 10, "r": 10, "t": 70, "b": 30},
        showlegend=False,
        annotations=annotations,
        hoverlabel={"align": "left", "font": {"size": 11}},
        template=_TEMPLATE,
        title={
            "text": (title or f"group {view.group}") + "<br><sup>blue: positive credit, red: negative; empty: after "
            "the episode ended; hover a cell for its step, click it for the trajectory's text</sup>",
            "x": 0.01,
            "font": {"size": 14},
        },
    )
    return {"data": data, "layout": layout}


def _nan_to_none(matrix: np.ndarray) -> list:
    """Rows of floats with None for NaN (plotly's gap), as JSON would carry them."""
    return np.where(np.isnan(matrix), None, matrix).tolist()


def _colour_axes(view: GroupView, panels: list[str], h: float, gap: float) -> dict:
    """One colour axis per kind (advantage: shared by every estimator panel), its bar beside the kind's first panel."""

    def bar(panel: str, title: str) -> dict:
        top = 1 - panels.index(panel) * (h + gap)
        return {"title": {"text": title, "side": "right"}, "y": top - h / 2, "len": h, "thickness": 12}

    first_method = next(p for p in panels if p in view.advantages)
    out = {
        "coloraxis": {
            "colorscale": "RdBu",
            "cmin": -view.vmax,
            "cmax": view.vmax,
            "colorbar": bar(first_method, "A (shared scale)"),
        },
        "coloraxis2": {
            "colorscale": "Greens",
            "cmin": 0,
            "cmax": max(2.0, float(np.nanmax(view.anchor))),
            "colorbar": bar("anchor", "steps sharing o_t"),
        },
    }
    if "q" in panels:
        out["coloraxis3"] = {"colorscale": "Viridis", "colorbar": bar("q", "q")}
    if "matches" in panels:
        out["coloraxis4"] = {"colorscale": "Viridis", "cmin": 0, "cmax": 1, "colorbar": bar("matches", "match score")}
    return out


def _match_traces(view: GroupView) -> list[dict]:
    """Dots per step (black: won, grey: lost), MATCH_BINS line traces (one colour per score bin) and a marker per match
    at the line's middle carrying its hover text. Always the same number of traces (empty ones when nothing matched)."""
    from plotly.colors import sample_colorscale

    k = len(view.traj_ids)
    lengths = np.sum(np.isfinite(view.anchor), axis=1).astype(int)
    dots = []
    for name, keep, colour in (("won steps", view.won, "black"), ("lost steps", ~view.won, "grey")):
        xs = [s for i in range(k) if keep[i] for s in range(lengths[i])]
        ys = [i for i in range(k) if keep[i] for _ in range(lengths[i])]
        dots.append(
            {
                "type": "scatter",
                "x": xs,
                "y": ys,
                "mode": "markers",
                "name": name,
                "hoverinfo": "skip",
                "marker": {"size": 5, "color": colour},
            }
        )
    m = view.matches
    row_of = {int(tid): i for i, tid in enumerate(view.traj_ids)}
    if m is None or m.empty:
        x0 = x1 = y0 = y1 = score = credit = np.zeros(0)
    else:
        x0, x1 = m["step"].to_numpy(float), m["ref_step"].to_numpy(float)
        y0 = np.array([row_of[int(t)] for t in m["traj_id"]], dtype=float)
        y1 = np.array([row_of[int(t)] for t in m["ref_traj_id"]], dtype=float)
        score, credit = m["score"].to_numpy(float), m[_credit_column(m)].to_numpy(float)
    name = "credit" if m is None or m.empty else _credit_column(m)
    texts = [
        f"{view.labels[int(a)]} step {int(s)} -> reference {view.labels[int(b)]} step {int(r)}<br>"
        f"score {sc:.2f}, {name} {cr:+.3f}"
        for a, s, b, r, sc, cr in zip(y0, x0, y1, x1, score, credit)
    ]
    bins = np.minimum((score * MATCH_BINS).astype(int), MATCH_BINS - 1)
    colours = sample_colorscale("Viridis", [(b + 0.5) / MATCH_BINS for b in range(MATCH_BINS)])
    lines = []
    for b in range(MATCH_BINS):
        sel = bins == b
        gaps = np.full(int(sel.sum()), np.nan)
        lx = np.column_stack([x0[sel], x1[sel], gaps]).ravel()
        ly = np.column_stack([y0[sel], y1[sel], gaps]).ravel()
        lines.append(
            {
                "type": "scatter",
                "x": _nan_to_none(lx),
                "y": _nan_to_none(ly),
                "mode": "lines",
                "name": f"score bin {b}",
                "hoverinfo": "skip",
                "line": {"color": colours[b], "width": 1.5},
            }
        )
    mids = {
        "type": "scatter",
        "x": ((x0 + x1) / 2).tolist(),
        "y": ((y0 + y1) / 2).tolist(),
        "mode": "markers",
        "name": "matches",
        "text": texts,
        "hovertemplate": "%{text}<extra></extra>",
        "marker": {"size": 7, "color": score.tolist(), "coloraxis": "coloraxis4", "line": {"width": 0}},
    }
    return [*dots, *lines, mids]


def _credit_column(matches) -> str:
    """'credit' (what SCPO added to the advantage, mode "advantage"), else 'bonus' (mode "returns")."""
    return "credit" if "credit" in matches.columns else "bonus"


_DYNAMIC = {"heatmap": ("z", "customdata"), "scatter": ("x", "y", "text", "marker")}


def same_structure(widget, new: dict) -> bool:
    """True when the live figure `widget` has the traces of figure dict `new` (type, name, heat-map shape): `new` can
    replace it in place."""
    if len(widget.data) != len(new["data"]):
        return False
    for old, fresh in zip(widget.data, new["data"]):
        if old.type != fresh["type"] or old.name != fresh["name"]:
            return False
        if old.type == "heatmap" and np.shape(old.z) != np.shape(fresh["z"]):
            return False
    return True


def update_in_place(widget, new: dict, *, same_group: bool) -> None:
    """Give the live figure `widget` the values of figure dict `new` (same structure: `same_structure`) in one batched
    message to the browser: heat-map values and SCPO texts, match lines, colour ranges, annotations, title; when the
    group changed (`same_group` False) also the per-step hover texts and the trajectory labels."""
    layout = new["layout"]
    with widget.batch_update():
        for old, fresh in zip(widget.data, new["data"]):
            keys = _DYNAMIC.get(fresh["type"], ()) + (() if same_group else ("text",))
            old.update({key: fresh[key] for key in keys if key in fresh})
        for name in ("coloraxis", "coloraxis2", "coloraxis3", "coloraxis4"):
            if name in layout:
                widget.update_layout({name: {"cmin": layout[name].get("cmin"), "cmax": layout[name].get("cmax")}})
        if not same_group:
            for name, axis in layout.items():
                if name.startswith("yaxis"):
                    widget.layout[name].ticktext = axis["ticktext"]
        widget.layout.annotations = layout["annotations"]
        widget.layout.title = layout["title"]

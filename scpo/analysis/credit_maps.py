"""Credit maps: every estimator's per-step advantages on the same group of saved rollouts, side by side.

One panel per estimator, and first, when the rollouts carry them (an imported run: `scpo.importers`), the advantages
the run's trainer updated each step with ("trained with"): rows = the group's trajectories (label: index, won/lost,
length T), columns = step t, colour = A_{i,t} on one diverging scale shared by all panels (so magnitudes compare). Two
more panels: GiGPO's anchor-group size per step (how many steps of the group share the step's raw observation,
algorithms.md GiGPO step 3; 1 = singleton, no step advantage), and SCPO's monotone matches (algorithms.md SCPO step 4)
drawn as lines from a failed trajectory's step t to the reference step j* it matched, coloured by the match score.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from scpo.analysis.rollout_files import RolloutChoiceError, RolloutView, choose_view, mixed_groups
from scpo.batch import RolloutBatch
from scpo.config import Config

__all__ = [
    "TRAINED_WITH",
    "trained_with",
    "panel_title",
    "group_step_matrix",
    "trajectory_labels",
    "scpo_matches",
    "draw_credit_maps",
    "credit_map_title",
    "credit_map_figure",
]


TRAINED_WITH = "trained with"  # the panel of the advantages a run was trained with


def trained_with(batch: RolloutBatch) -> np.ndarray | None:
    """The advantage each step was updated with (the batch's `trained_advantage`) when it has a finite one, else
    None."""
    adv = batch.trained_advantage
    return adv if adv is not None and np.isfinite(adv).any() else None


def panel_title(name: str) -> str:
    """An advantage panel's title: an estimator's, or the trained-with panel's."""
    if name == TRAINED_WITH:
        return "trained with: the advantage A(i,t) the run's trainer updated the step with"
    return f"{name}: advantage A(i,t)"


def group_step_matrix(batch: RolloutBatch, group: int, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(matrix, traj_ids): matrix[k, t] = values of trajectory traj_ids[k] at step t, NaN past its end.

    Trajectories in order of traj_id. Raises ValueError naming the group when it has no rows."""
    rows = np.flatnonzero(batch.group_id == group)
    if len(rows) == 0:
        raise ValueError(f"group {group} has no rows; groups present: {np.unique(batch.group_id).tolist()}")
    traj_ids = np.unique(batch.traj_id[rows])
    matrix = np.full((len(traj_ids), int(batch.step[rows].max()) + 1), np.nan)
    k = np.searchsorted(traj_ids, batch.traj_id[rows])
    matrix[k, batch.step[rows]] = np.asarray(values, dtype=np.float64)[rows]
    return matrix, traj_ids


def trajectory_labels(batch: RolloutBatch, traj_ids: np.ndarray) -> list[str]:
    """'#3 won T=12' per trajectory (position within the group, outcome, length)."""
    first = {t: np.flatnonzero(batch.traj_id == t)[0] for t in traj_ids}
    return [
        f"#{k} {'won' if batch.won[first[t]] else 'lost'} T={batch.traj_len[first[t]]}" for k, t in enumerate(traj_ids)
    ]


def scpo_matches(batch: RolloutBatch, group: int, diagnostics: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """SCPO's matches in `group`, one row per credited failed step: traj_id, step, ref_traj_id, ref_step, score (s_t)
    and credit (what SCPO added to the step's advantage). Reads SCPO's per-row diagnostics 'scpo_ref_row' (row of the
    matched reference step, -1 when none), 'scpo_score' and 'scpo_credit'."""
    needed = ("scpo_ref_row", "scpo_score", "scpo_credit")
    absent = [k for k in needed if k not in diagnostics]
    if absent:
        raise KeyError(f"SCPO diagnostics lack {absent}; present: {sorted(diagnostics)}")
    ref_row = np.asarray(diagnostics["scpo_ref_row"], dtype=np.int64)
    rows = np.flatnonzero((batch.group_id == group) & (ref_row >= 0))
    return pd.DataFrame(
        {
            "traj_id": batch.traj_id[rows],
            "step": batch.step[rows],
            "ref_traj_id": batch.traj_id[ref_row[rows]],
            "ref_step": batch.step[ref_row[rows]],
            "score": np.asarray(diagnostics["scpo_score"], dtype=np.float64)[rows],
            "credit": np.asarray(diagnostics["scpo_credit"], dtype=np.float64)[rows],
        }
    )


def _heatmap(ax, matrix: np.ndarray, labels: list[str], title: str, **kwargs):
    import seaborn as sns

    with warnings.catch_warnings():  # seaborn 0.13 calls matplotlib's soon-deprecated Colormap.set_bad
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        sns.heatmap(
            matrix,
            ax=ax,
            mask=np.isnan(matrix),
            yticklabels=labels,
            xticklabels=_step_ticks(matrix.shape[1]),
            linewidths=0.3,
            linecolor="white",
            **kwargs,
        )
    ax.set_facecolor("#f2f2f2")
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_xlabel("step t")
    ax.set_ylabel("trajectory")
    ax.tick_params(axis="y", labelsize=7, rotation=0)
    ax.tick_params(axis="x", labelsize=7, rotation=0)


def _step_ticks(n_steps: int) -> list[str]:
    every = max(1, int(np.ceil(n_steps / 25)))
    return [str(t) if t % every == 0 else "" for t in range(n_steps)]


def _draw_matches(
    ax, batch: RolloutBatch, group: int, matches: pd.DataFrame, traj_ids: np.ndarray, labels: list[str]
) -> None:
    """Reference row on top, failed trajectories below; a line per match from (t, failed row) to (j*, reference row)."""
    import matplotlib.pyplot as plt

    ax.set_title(
        "SCPO matches: lost trajectory's step t -> reference step j* (colour = match score)", fontsize=10, loc="left"
    )
    ax.set_xlabel("step")
    if matches.empty:
        ax.text(
            0.5,
            0.5,
            "no SCPO matches in this group\n(SCPO shapes only groups with a won and a lost trajectory)",
            ha="center",
            va="center",
            transform=ax.transAxes,
            fontsize=9,
        )
        ax.set_xticks([])
        ax.set_yticks([])
        return
    refs = list(dict.fromkeys(int(t) for t in matches["ref_traj_id"]))
    lost = [t for t in traj_ids if t not in refs and not batch.won[np.flatnonzero(batch.traj_id == t)[0]]]
    order = [*refs, *lost]
    y_of = {t: -i for i, t in enumerate(order)}
    label_of = dict(zip(traj_ids, labels))
    cmap = plt.get_cmap("viridis")
    for t in order:
        n = int(batch.traj_len[np.flatnonzero(batch.traj_id == t)[0]])
        ax.scatter(np.arange(n), np.full(n, y_of[t]), s=12, color="black" if t in refs else "grey", zorder=3)
    for m in matches.itertuples():
        if m.traj_id not in y_of or m.ref_traj_id not in y_of:
            continue
        ax.plot([m.step, m.ref_step], [y_of[m.traj_id], y_of[m.ref_traj_id]], color=cmap(m.score), lw=1.2, alpha=0.8)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_yticks([y_of[t] for t in order])
    ax.set_yticklabels([("reference " if t in refs else "") + label_of.get(t, str(t)) for t in order], fontsize=7)
    sm = plt.cm.ScalarMappable(cmap=cmap, norm=plt.Normalize(0, 1))
    ax.figure.colorbar(sm, ax=ax, label="match score S[t, j*]")


def draw_credit_maps(
    batch: RolloutBatch,
    group: int,
    advantages: Mapping[str, np.ndarray],
    anchor_sizes: np.ndarray | None,
    matches: pd.DataFrame | None,
    out: Path,
    title: str = "",
) -> Path:
    """Draw the credit-map figure for `group` (see the module docstring) to `out` (PNG or SVG by suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(advantages)
    mats = {m: group_step_matrix(batch, group, a) for m, a in advantages.items()}
    traj_ids = next(iter(mats.values()))[1]
    labels = trajectory_labels(batch, traj_ids)
    finite = np.concatenate([np.abs(m[np.isfinite(m)]) for m, _ in mats.values()])
    vmax = float(np.quantile(finite, 0.99)) if len(finite) and np.quantile(finite, 0.99) > 0 else 1.0
    n_panels = len(methods) + (anchor_sizes is not None) + (matches is not None)
    ncols = 2
    nrows = int(np.ceil(n_panels / ncols))
    height = 0.28 * len(traj_ids) + 1.6
    fig, axes = plt.subplots(nrows, ncols, figsize=(15, height * nrows), squeeze=False, layout="constrained")
    axes = axes.ravel()
    for ax, m in zip(axes, methods):
        _heatmap(
            ax,
            mats[m][0],
            labels,
            panel_title(m),
            cmap="RdBu",
            center=0.0,
            vmin=-vmax,
            vmax=vmax,
            cbar_kws={"label": "A (shared scale)"},
        )
    i = len(methods)
    if anchor_sizes is not None:
        sizes, _ = group_step_matrix(batch, group, anchor_sizes)
        annot = sizes.shape[1] <= 30
        _heatmap(
            axes[i],
            sizes,
            labels,
            "GiGPO anchor-group size (1 = singleton: no step advantage)",
            cmap="Greens",
            vmin=0,
            annot=annot,
            fmt=".0f",
            annot_kws={"fontsize": 6},
            cbar_kws={"label": "steps sharing o_t"},
        )
        i += 1
    if matches is not None:
        _draw_matches(axes[i], batch, group, matches, traj_ids, labels)
        i += 1
    for ax in axes[i:]:
        ax.set_visible(False)
    fig.suptitle(
        (title or f"Credit maps, group {group}") + "\nblue: positive credit, red: negative; grey: after the "
        "episode ended",
        fontsize=12,
    )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return out


def credit_map_title(cfg: Config, view: RolloutView, label: str | None = None) -> str:
    """The credit map's title: which rollouts (`label`, default the source's run), iteration, group, and SCPO's
    settings."""
    return (
        f"Credit maps · {label or view.source}, iteration {view.iteration}, group {view.group} · SCPO revision "
        f"{cfg.credit.scpo.revision} ({cfg.credit.scpo.mode}), scorer {cfg.credit.scpo.scorer}"
    )


def credit_map_figure(
    source: str | Path,
    cfg: Config,
    *,
    iteration: int = -1,
    group: int = -1,
    out: str | Path = "credit_map.png",
    methods: tuple[str, ...] | None = None,
    label: str | None = None,
    refuse_blank: bool = False,
) -> tuple[Path, RolloutView, dict]:
    """Draw the credit maps of saved rollouts: `choose_view(source, iteration, group)`, every estimator of `methods`
    (default: report.methods) whose needs the rollouts meet (`scpo.credit.estimate`), after the advantages the
    run was trained with when the rollouts carry them (`trained_with`), one figure at `out`.
    Returns (figure path, the view drawn, {method: CreditResult}). Notebook 04 and `scpo credit-map` both draw
    through this. `refuse_blank`: a group on which every advantage is 0 (its siblings all won or all lost with equal
    rewards: nothing to tell apart) is a RolloutChoiceError saying so and naming the groups that are mixed, instead of
    a figure of zeros (`scpo credit-map`)."""
    from scpo.credit import estimate

    view = choose_view(source, iteration, group)
    batch, g = view.batch, view.group
    results = estimate(batch, methods or cfg.report.methods, cfg.credit, unmet="skip")
    anchor = results["gigpo"].diagnostics.get("anchor_group_size") if "gigpo" in results else None
    matches = scpo_matches(batch, g, results["scpo"].diagnostics) if "scpo" in results else None
    trained = trained_with(batch)
    advantages = {
        **({TRAINED_WITH: trained} if trained is not None else {}),
        **{m: r.advantages for m, r in results.items()},
    }
    if refuse_blank:
        _refuse_blank(view, advantages)
    path = draw_credit_maps(batch, g, advantages, anchor, matches, Path(out), credit_map_title(cfg, view, label))
    return path, view, results


def _refuse_blank(view: RolloutView, advantages: Mapping[str, np.ndarray]) -> None:
    """RolloutChoiceError when every advantage on the view's group is 0 (`credit_map_figure`'s `refuse_blank`)."""
    rows = view.batch.group_id == view.group
    if any(np.any(np.asarray(a)[rows] != 0) for a in advantages.values()):
        return
    outcome = "won" if view.batch.won[rows].all() else "lost"
    mixed = {i: mixed_groups(b).tolist() for i, b in view.batches.items() if len(mixed_groups(b))}
    where = (
        f"groups with won and lost siblings: iteration {view.iteration}: {mixed[view.iteration][:8]}"
        if view.iteration in mixed
        else f"saved iterations with such groups: {sorted(mixed)[:8]}"
        if mixed
        else f"no saved iteration of {view.source} has a group with won and lost siblings"
    )
    raise RolloutChoiceError(
        f"every advantage is 0 on group {view.group} of iteration {view.iteration} (its trajectories all {outcome}, "
        f"rewards equal): no credit to draw; {where}; choose one with --iteration / --group"
    )

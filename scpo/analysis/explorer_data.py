"""What the credit explorer shows, without any widget: which saved rollouts there are (runs x iterations), credit on
them recomputed per option set (cached), and the arrays of one group's drawing (`GroupView`).

Sources `RolloutCatalogue.from_source` accepts: a `RolloutBatch`; a rollout file (iter_XXXX.parquet / .jsonl or any
.parquet / .jsonl a user saved); a run folder (holding rollouts/) or its rollouts/ folder; a folder of runs (every
rollouts/ folder below it, named by its path, e.g. "alfworld/scpo/seed0"); a list of these, or a {name: source} dict.
Files are read when first shown and kept.
"""

from __future__ import annotations

import html
import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scpo.analysis.credit_maps import TRAINED_WITH, group_step_matrix, scpo_matches, trained_with, trajectory_labels
from scpo.analysis.fidelity_metrics import credit_sign
from scpo.analysis.rollout_files import iteration_files, iteration_of
from scpo.batch import RolloutBatch
from scpo.credit import CreditConfig, CreditResult, estimate, unmet_need
from scpo.credit.registry import method_spec

__all__ = [
    "RolloutCatalogue",
    "CreditCache",
    "GroupView",
    "group_table",
    "group_view",
    "oracle_progress",
    "shared_scale",
    "sign_text",
    "critic_text",
]

Source = RolloutBatch | str | Path
KEEP_BATCHES = 8  # loaded iterations kept in memory (least recently shown dropped first)
KEEP_RESULTS = 256  # credit results kept (one per run x iteration x method x option set)


def _remember(cache: OrderedDict, key, value, limit: int):
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > limit:
        cache.popitem(last=False)
    return value


@dataclass
class RolloutCatalogue:
    """runs[name][iteration] = a rollout file or an in-memory batch; `batch(run, iteration)` loads it and keeps the
    KEEP_BATCHES most recently used."""

    runs: dict[str, dict[int, Path | RolloutBatch]]
    _loaded: OrderedDict = field(default_factory=OrderedDict, repr=False)

    @classmethod
    def from_source(cls, source: Source | Iterable[Source] | Mapping[str, Source]) -> RolloutCatalogue:
        if isinstance(source, Mapping):
            runs = {str(name): _iterations(src) for name, src in source.items()}
        elif isinstance(source, (RolloutBatch, str, Path)):
            runs = _runs_of(source)
        else:
            runs = {}
            for src in source:
                for name, its in _runs_of(src).items():
                    runs[_unique(name, runs)] = its
        if not runs:
            raise ValueError(f"no saved rollouts in {source!r}")
        return cls(runs)

    def iterations(self, run: str) -> list[int]:
        return sorted(self._run(run))

    def batch(self, run: str, iteration: int) -> RolloutBatch:
        key = (run, int(iteration))
        if key in self._loaded:
            self._loaded.move_to_end(key)
            return self._loaded[key]
        its = self._run(run)
        if key[1] not in its:
            raise KeyError(f"run {run!r} has no iteration {iteration}; saved: {sorted(its)}")
        item = its[key[1]]
        return _remember(
            self._loaded, key, item if isinstance(item, RolloutBatch) else RolloutBatch.read(item), KEEP_BATCHES
        )

    def default_iteration(self, run: str) -> int:
        """The latest iteration holding a mixed group (won and lost siblings), else the latest (as notebook 04)."""
        from scpo.analysis.rollout_files import mixed_groups

        its = self.iterations(run)
        return next((i for i in reversed(its) if len(mixed_groups(self.batch(run, i)))), its[-1])

    def _run(self, run: str) -> dict[int, Path | RolloutBatch]:
        try:
            return self.runs[run]
        except KeyError:
            raise KeyError(f"unknown run {run!r}; runs: {', '.join(self.runs)}") from None


def _unique(name: str, taken: Mapping[str, Any]) -> str:
    out, k = name, 2
    while out in taken:
        out, k = f"{name} ({k})", k + 1
    return out


def _runs_of(source: Source) -> dict[str, dict[int, Path | RolloutBatch]]:
    """{run name: iterations} of one source (a folder of runs gives several)."""
    if isinstance(source, RolloutBatch):
        return {"batch": {0: source}}
    path = Path(source)
    if path.is_file():
        return {_run_name(path.parent.parent if path.parent.name == "rollouts" else path.parent): _iterations(path)}
    if not path.is_dir():
        raise FileNotFoundError(
            f"no rollouts at {path}: expected a rollout file, a run folder, a rollouts/ folder or a folder of runs"
        )
    if path.name == "rollouts" or (path / "rollouts").is_dir():
        return {_run_name(path.parent if path.name == "rollouts" else path): _iterations(path)}
    folders = sorted({p.parent for p in path.rglob("rollouts/iter_*") if p.parent.name == "rollouts"})
    if not folders:
        raise FileNotFoundError(f"{path} holds no run with rollouts/iter_XXXX.parquet files")
    runs: dict[str, dict[int, Path | RolloutBatch]] = {}
    for f in folders:
        runs[_unique(_run_name(f.parent, root=path), runs)] = _iterations(f)
    return runs


def _run_name(run_folder: Path, root: Path | None = None) -> str:
    """'alfworld/scpo/seed0' for <out_dir>/alfworld/scpo/seed0 (the trainer's layout: the last three parts), else the
    path below `root`, else the folder's name."""
    parts = run_folder.resolve().parts
    if len(parts) >= 3 and parts[-1].startswith("seed"):
        return "/".join(parts[-3:])
    if root is not None and run_folder != root:
        return run_folder.relative_to(root).as_posix()
    return run_folder.name


def _iterations(source: Source) -> dict[int, Path | RolloutBatch]:
    if isinstance(source, RolloutBatch):
        return {0: source}
    path = Path(source)
    if path.is_dir():
        return {iteration_of(f): f for f in iteration_files(path)}
    if not path.is_file():
        raise FileNotFoundError(f"no rollout file at {path}")
    try:
        return {iteration_of(path): path}
    except ValueError:  # a user's file not named iter_XXXX: iteration 0
        return {0: path}


def group_table(batch: RolloutBatch) -> pd.DataFrame:
    """One row per group: group, task_id, task_type, trajectories, won, lost, steps, mixed (won and lost siblings)."""
    first = np.r_[True, batch.traj_id[1:] != batch.traj_id[:-1]]
    df = pd.DataFrame(
        {
            "group": batch.group_id[first],
            "task_id": batch.task_id[first],
            "task_type": batch.task_type[first],
            "won": batch.won[first],
            "steps": batch.traj_len[first],
        }
    )
    out = df.groupby("group", sort=True).agg(
        task_id=("task_id", "first"),
        task_type=("task_type", "first"),
        trajectories=("won", "size"),
        won=("won", "sum"),
        steps=("steps", "sum"),
    )
    out["lost"] = out["trajectories"] - out["won"]
    out["mixed"] = (out["won"] > 0) & (out["lost"] > 0)
    return out.reset_index()[["group", "task_id", "task_type", "trajectories", "won", "lost", "steps", "mixed"]]


@dataclass
class CreditCache:
    """{method: CreditResult} per (run, iteration, options): a control change recomputes only what it changes.

    `options` are SCPO's (keys of `SCPOOptions`); a method is recomputed for new options only when it reads the scpo
    section (its registry spec's `sections`). Credit comes from `scpo.credit.estimate` (the environment's
    reference scale read from the batch); a method whose needs the batch does not meet (HCAPO without a policy, the
    oracle without oracle progress) is left out. The scorer is built once per (name, model) by the registry, so its
    pair cache survives every redraw."""

    config: CreditConfig
    _results: OrderedDict = field(default_factory=OrderedDict, repr=False)  # the KEEP_RESULTS most recent

    def results(
        self, catalogue: RolloutCatalogue, run: str, iteration: int, methods: Iterable[str], options: Mapping[str, Any]
    ) -> dict[str, CreditResult]:
        frozen = json.dumps(dict(options), sort_keys=True, default=str)
        batch = catalogue.batch(run, iteration)
        out = {}
        for m in methods:
            if unmet_need(m, batch) is not None:
                continue
            reads_scpo = "scpo" in method_spec(m).sections
            key = (run, int(iteration), m, frozen if reads_scpo else "")
            if key not in self._results:
                opts = {"scpo": dict(options)} if reads_scpo else None
                _remember(self._results, key, estimate(batch, [m], self.config, options=opts)[m], KEEP_RESULTS)
            self._results.move_to_end(key)
            out[m] = self._results[key]
        return out


def oracle_progress(batch: RolloutBatch) -> np.ndarray | None:
    """The batch's oracle progress column `q` (per row) when it has one with a finite value, else None."""
    q = getattr(batch, "q", None)
    if q is None:
        return None
    q = np.asarray(q, dtype=np.float64)
    return q if len(q) == batch.n_rows and np.isfinite(q).any() else None


def shared_scale(matrices: Iterable[np.ndarray]) -> float:
    """The colour limit of every advantage panel: the 99% quantile of |A| over their finite cells (1.0 when all are 0),
    the same rule as the static credit maps (`draw_credit_maps`)."""
    finite = [np.abs(m[np.isfinite(m)]) for m in matrices]
    finite = np.concatenate(finite) if finite else np.zeros(0)
    vmax = float(np.quantile(finite, 0.99)) if len(finite) else 0.0
    return vmax if vmax > 0 else 1.0


@dataclass
class GroupView:
    """Everything drawn for one group; matrices are (K trajectories, T steps), NaN past a trajectory's end.

    labels      : "#k won T=12" per trajectory (k = position in the group)
    won         : bool per trajectory
    advantages  : {method: A matrix}, led by "trained with" (`TRAINED_WITH`) when the rollouts carry the advantages
                  their trainer used
    anchor      : GiGPO anchor-group size per step (steps of the group sharing the raw observation), from the results
                  of gigpo, scpo or progpo_c (they report GiGPO's anchors; other methods report their own groupings)
    q           : oracle progress per step, or None when the batch has no `q` column
    hover       : per cell, the step's static text (trajectory, step, action, observation, next observation, anchor, q;
                  with a learned critic's values, the batch's critic_value column: V(s_t) and PPO's TD error delta_t)
    scpo_hover  : per cell, SCPO's match j* (and reference), score s_t and credit (what SCPO added to GiGPO's
                  advantage; revision 1's bonus where non-zero); "" off the grid, None without SCPO
    sign_hover  : {method: per cell, whether its credit has the sign q gives the step (`sign_text`)}; None without q
    matches     : SCPO's credited matches (`scpo_matches`), None without SCPO
    vmax        : the shared colour limit of the advantage panels
    """

    group: int
    traj_ids: np.ndarray
    labels: list[str]
    won: np.ndarray
    advantages: dict[str, np.ndarray]
    anchor: np.ndarray
    q: np.ndarray | None
    hover: np.ndarray
    scpo_hover: np.ndarray | None
    matches: pd.DataFrame | None
    sign_hover: dict[str, np.ndarray] | None
    vmax: float


WRONG_UP = "WRONG SIGN: A > 0 where q < 0 (a step away from the goal)"
WRONG_DOWN = "WRONG SIGN: A < 0 where q > 0 (a step of progress)"


def sign_text(advantages: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Per cell of one advantage panel, whether its credit has the sign that q gives the step
    (`scpo.analysis.fidelity_metrics.credit_sign`): WRONG_UP, WRONG_DOWN, "credit sign agrees with q", "A = 0: no
    credit to check" or "q = 0: no sign to check"; "" off the grid."""
    a, q = np.asarray(advantages, dtype=np.float64), np.asarray(q, dtype=np.float64)
    out = np.full(a.shape, "", dtype=object)
    on = ~np.isnan(a) & ~np.isnan(q)
    sign = credit_sign(a[on], q[on])
    text = np.where(
        sign == 1,
        WRONG_UP,
        np.where(
            sign == -1,
            WRONG_DOWN,
            np.where(a[on] == 0, "A = 0: no credit to check", np.where(q[on] == 0, "q = 0: no sign to check", "")),
        ),
    ).astype(object)
    text[text == ""] = "credit sign agrees with q"
    out[on] = text
    return out


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return html.escape(text if len(text) <= n else text[: n - 1] + "…")


_GIGPO_ANCHORS = ("gigpo", "scpo", "progpo_c")


def group_view(
    batch: RolloutBatch,
    group: int,
    results: Mapping[str, CreditResult],
    methods: Iterable[str] | None = None,
    *,
    text_chars: int = 160,
) -> GroupView:
    """The arrays drawn for `group` from the estimators' `results` on `batch` (see `GroupView`): advantage panels for
    `methods` (default: every result), after the trained-with panel when the batch carries the advantages its trainer
    used (`trained_with`), SCPO's matches when "scpo" is among them."""
    methods = list(results) if methods is None else [m for m in methods if m in results]
    if not methods:
        raise ValueError(f"group_view needs at least one estimator to draw; results hold {sorted(results)}")
    mats = {m: group_step_matrix(batch, group, results[m].advantages)[0] for m in methods}
    trained = trained_with(batch)
    if trained is not None:
        mats = {TRAINED_WITH: group_step_matrix(batch, group, trained)[0], **mats}
    anchor_of = next((results[m] for m in _GIGPO_ANCHORS if m in results), None)
    if anchor_of is None:
        raise ValueError(
            f"group_view needs one of {', '.join(_GIGPO_ANCHORS)} among the results {sorted(results)} "
            f"for GiGPO's anchor-group sizes"
        )
    anchor, traj_ids = group_step_matrix(batch, group, anchor_of.diagnostics["anchor_group_size"])
    labels = trajectory_labels(batch, traj_ids)
    q_rows = oracle_progress(batch)
    q = group_step_matrix(batch, group, q_rows)[0] if q_rows is not None else None
    critic = critic_text(batch, results.get("ppo"))

    rows = np.flatnonzero(batch.group_id == group)
    k = np.searchsorted(traj_ids, batch.traj_id[rows])
    t = batch.step[rows]
    hover = np.full(anchor.shape, "", dtype=object)
    for i, r in enumerate(rows):
        parts = [
            f"<b>{labels[k[i]]}</b>, step {t[i]}",
            f"action: {_clip(batch.action[r], text_chars)}" + ("" if batch.valid[r] else " <i>(invalid)</i>"),
            f"observation: {_clip(batch.observation[r], text_chars)}",
            f"next observation: {_clip(batch.next_observation[r], text_chars)}",
            f"GiGPO anchor size: {int(anchor[k[i], t[i]])}",
        ]
        if q is not None:
            parts.append(f"oracle progress q: {q[k[i], t[i]]:.3f}")
        if critic is not None:
            parts.append(critic[r])
        hover[k[i], t[i]] = "<br>".join(parts)

    scpo_hover, matches = None, None
    if "scpo" in methods:
        diag = results["scpo"].diagnostics
        matches = scpo_matches(batch, group, diag)
        scpo_hover = np.full(anchor.shape, "", dtype=object)
        label_of = dict(zip(traj_ids.tolist(), labels))
        mixed = _group_mixed(batch, group)
        best = diag.get("scpo_best_score", diag["scpo_score"])
        for i, r in enumerate(rows):
            ref = int(diag["scpo_ref_row"][r])
            if ref >= 0:
                ref_label = label_of.get(int(batch.traj_id[ref]), f"traj {batch.traj_id[ref]}").split(" ")[0]
                text = f"SCPO match: reference {ref_label} step {batch.step[ref]}, score {diag['scpo_score'][r]:.2f}"
                if "scpo_credit" in diag:
                    text += f", credit {diag['scpo_credit'][r]:+.3f}"
                if diag.get("scpo_bonus") is not None and diag["scpo_bonus"][r] != 0:
                    text += f", bonus {diag['scpo_bonus'][r]:.3f}"
            elif batch.won[r] or not mixed:
                text = "SCPO match: none (SCPO credits only lost trajectories of mixed groups)"
            else:
                text = f"SCPO match: none (best candidate score {best[r]:.2f})"
            scpo_hover[k[i], t[i]] = text
    won = np.zeros(len(traj_ids), dtype=bool)
    won[k] = batch.won[rows]
    return GroupView(
        group=int(group),
        traj_ids=traj_ids,
        labels=labels,
        won=won,
        advantages=mats,
        anchor=anchor,
        q=q,
        hover=hover,
        scpo_hover=scpo_hover,
        matches=matches,
        sign_hover=None if q is None else {m: sign_text(a, q) for m, a in mats.items()},
        vmax=shared_scale(mats.values()),
    )


def critic_text(batch: RolloutBatch, ppo: CreditResult | None = None) -> np.ndarray | None:
    """Per row, "critic V(s_t): v, TD error delta_t: d" where the batch has a learned critic's values (its
    critic_value column, saved by a PPO run); None without them. The TD error is PPO's (`scpo.credit.ppo.td_errors`,
    delta_t = r_t - pen_t + gamma V(s_{t+1}) (1 - done_t) - V(s_t)) from `ppo`'s result when given, else from PPO under
    the default credit options (gamma as params.yaml's credit.ppo)."""
    if batch.critic_value is None:
        return None
    if ppo is None:
        ppo = estimate(batch, ["ppo"], options={"ppo": {"whiten": "none"}})["ppo"]
    v, delta = batch.critic_value, ppo.diagnostics["td_error"]
    return np.array([f"critic V(s_t): {a:.3f}, TD error δ_t: {d:+.3f}" for a, d in zip(v, delta)], dtype=object)


def _group_mixed(batch: RolloutBatch, group: int) -> bool:
    won = batch.won[batch.group_id == group]
    return bool(won.any() and not won.all())

"""Dynamic sampling (DAPO, arXiv 2503.14476; verl-agent's `filter_groups`, its GiGPO_dynamic runs): roll out fresh
groups until enough groups with a learning signal are kept. Spec: docs/algorithms.md, "Dynamic sampling".

    for try k = 1, 2, ..., max_tries (while fewer than `target_groups` groups are kept):
        groups = collect(k - 1)
        k < max_tries: drop every group whose trajectories' episode returns R_i are all equal (all won, all failed,
                       or any other tie), keep the others whole
        k = max_tries: keep every group (the last try is unfiltered)

The kept groups of every try are returned in order, none cut: like verl-agent, the batch can exceed the target by up to
one try's groups. Credit is then computed on them as on any batch. The rule reads episode returns only, so it drops
all-won groups too, which GiGPO's step term could still have used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from scpo.batch import Trajectory

__all__ = ["DynamicSample", "dynamic_sample", "uniform_groups"]


@dataclass
class DynamicSample:
    """The kept trajectories (whole groups, in collection order) and the counters of the tries."""

    trajectories: list[Trajectory] = field(default_factory=list)
    tries: int = 0
    groups_collected: int = 0
    groups_dropped: int = 0

    @property
    def groups_kept(self) -> int:
        return self.groups_collected - self.groups_dropped

    def metrics(self) -> dict[str, float]:
        """The counters as metrics (`dynamic_sampling/...`)."""
        return {
            "dynamic_sampling/tries": float(self.tries),
            "dynamic_sampling/groups_collected": float(self.groups_collected),
            "dynamic_sampling/groups_dropped": float(self.groups_dropped),
            "dynamic_sampling/groups_kept": float(self.groups_kept),
        }


def _groups(trajectories: Sequence[Trajectory]) -> dict[str, list[Trajectory]]:
    """group uid -> its trajectories, in order of first appearance."""
    groups: dict[str, list[Trajectory]] = {}
    for traj in trajectories:
        groups.setdefault(traj.group_uid, []).append(traj)
    return groups


def uniform_groups(trajectories: Sequence[Trajectory]) -> set[str]:
    """The group uids whose trajectories all have the same episode return (the groups dynamic sampling drops)."""
    out = set()
    for uid, members in _groups(trajectories).items():
        returns = np.array([t.episode_return for t in members])
        if np.all(returns == returns[0]):
            out.add(uid)
    return out


def dynamic_sample(
    collect: Callable[[int], Sequence[Trajectory]], target_groups: int, max_tries: int = 10
) -> DynamicSample:
    """Call `collect(k)` (k = 0, 1, ...: one try's fresh groups) until `target_groups` groups are kept or `max_tries`
    tries are spent, dropping the groups of equal returns on every try but the last. A group uid met again in a later
    try is an error: each try must draw fresh groups (other tasks, or another seed)."""
    if target_groups < 1:
        raise ValueError(f"target_groups must be >= 1, got {target_groups}")
    if max_tries < 1:
        raise ValueError(f"max_tries must be >= 1, got {max_tries}")
    out = DynamicSample()
    kept: set[str] = set()
    for k in range(max_tries):
        if out.groups_kept >= target_groups:
            break
        trajectories = list(collect(k))
        out.tries = k + 1
        groups = _groups(trajectories)
        drop = uniform_groups(trajectories) if out.tries < max_tries else set()
        again = sorted(set(groups) & kept)
        if again:
            raise ValueError(
                f"try {out.tries} of dynamic sampling returned groups already in the batch ({', '.join(again)}): "
                "each try must draw fresh groups (other tasks, or another seed)"
            )
        out.groups_collected += len(groups)
        out.groups_dropped += len(drop)
        for uid, members in groups.items():
            if uid not in drop:
                kept.add(uid)
                out.trajectories += members
    return out

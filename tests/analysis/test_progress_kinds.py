"""experiments/learning_benchmark/progress_kinds.py: new progress, repairs, no change and undoing, hand-counted."""

from __future__ import annotations

import numpy as np

from helpers.checks import load_script


def test_a_plus_one_below_the_best_so_far_is_a_repair():
    kinds = load_script("experiments/learning_benchmark/progress_kinds.py").step_kinds
    # trajectory 0 in step order: +1 (new), -1, +1 (repair: back to 1), +1 (new: 2), 0, -1, -1, +1 (repair: 1 < 2)
    # trajectory 1, rows given out of step order: steps 0, 1, 2 = +1 (new), -inf (dead end, -10), +1 (repair)
    q = np.array([1, -1, 1, 1, 0, -1, -1, 1, 1, 1, -np.inf], dtype=float)
    traj = np.array([0] * 8 + [1, 1, 1])
    step = np.array([0, 1, 2, 3, 4, 5, 6, 7, 0, 2, 1])
    assert kinds(q, traj, step).tolist() == [
        "new progress", "undoes", "repair", "new progress", "nothing", "undoes", "undoes", "repair",
        "new progress", "repair", "undoes",
    ]  # fmt: skip

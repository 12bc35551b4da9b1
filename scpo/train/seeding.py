"""Seeds and threads: the trainer, evaluation and the experiments seed every random source the same way.

`iteration_seed(seed, it)` gives iteration `it` of a run its own seed, so a run resumed from a checkpoint continues
exactly as the uninterrupted run would have."""

from __future__ import annotations

import random

import numpy as np
import torch

from scpo.batch import stable_uid

__all__ = ["seed_everything", "iteration_seed", "set_threads"]


def seed_everything(seed: int) -> None:
    """Python's, numpy's and torch's global random state from `seed`."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def iteration_seed(seed: int, iteration: int) -> int:
    """A deterministic per-iteration seed (content hash, so seeds of different runs do not collide by arithmetic)."""
    return int(stable_uid("iteration", seed, iteration, length=8), 16)


def set_threads(torch_threads: int | None) -> None:
    """torch's CPU threads (`train.torch_threads`; one thread avoids oversubscription on shared cores; None: torch's
    default)."""
    if torch_threads:
        torch.set_num_threads(torch_threads)

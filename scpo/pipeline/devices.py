"""Which GPUs a stage's seeds or a sweep's points are spread over: each run gets one of its own through
CUDA_VISIBLE_DEVICES (`scpo.train.seed_pool`, `scpo.pipeline.sweep`); runs that would share a GPU are refused in one
line (`scpo.errors.PlacementError`). A run itself holds its GPU with `scpo.policy.placement.gpu_claim`."""

from __future__ import annotations

import os

from scpo.errors import PlacementError

__all__ = ["visible_gpus", "parallel_runs", "unique_gpus"]


def visible_gpus() -> list[str]:
    """The GPUs this process may hand out, as CUDA_VISIBLE_DEVICES entries: that variable's ids when it is set, else
    0 .. torch.cuda.device_count() - 1 (none on a machine without CUDA)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [x.strip() for x in env.split(",") if x.strip() and x.strip() != "-1"]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def parallel_runs(setting: int | str, gpus: list[str], what: str = "report.parallel_runs") -> int:
    """How many runs go side by side: `setting` (`report.parallel_runs`: a number, or "per_gpu" = one per visible GPU,
    1 without GPUs). With GPUs each run gets one of its own, so more runs than GPUs is refused in one line."""
    if setting == "per_gpu":
        return max(1, len(gpus))
    if gpus and int(setting) > len(gpus):
        raise PlacementError(
            f"{what}={setting} but {len(gpus)} GPU(s) are visible ({','.join(gpus)}): two runs, each a trainer with "
            f"its generation engine, would share a GPU; use {what}=per_gpu or at most {len(gpus)}"
        )
    return int(setting)


def unique_gpus(ids: list[str], what: str = "--gpus") -> list[str]:
    """`ids` if no id appears twice; PlacementError (one line) otherwise: two runs would share that GPU."""
    seen = [g for i, g in enumerate(ids) if g in ids[:i]]
    if seen:
        raise PlacementError(f"{what}={','.join(ids)} names GPU {seen[0]} twice: two runs would share it")
    return ids

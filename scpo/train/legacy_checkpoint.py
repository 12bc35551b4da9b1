"""`scpo convert-checkpoint`: rewrite old checkpoints' `optimizer.pt` / `rng.pt` (torch pickles) as the state files that
`scpo.train.checkpoint` reads, so that they can be resumed again.

This is the one place in scpo that runs an unpickler on a file, and only when a user asks for it on a checkpoint they
trust. It is torch's weights-only unpickler (`torch.load(weights_only=True)`), which builds nothing but tensors and
plain containers, with exactly the numpy globals an old `rng.pt` holds (numpy's legacy RNG state is a uint32 array)
allow-listed on top. A crafted file is refused by that loader rather than run, but pickle remains a larger attack
surface than safetensors + JSON, hence the opt-in and the warning.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from scpo.train.checkpoint import (
    LEGACY_FILES,
    OPTIMIZER_FILE,
    RNG_FILE,
    CheckpointError,
    read_training_state,
    write_training_state,
)

__all__ = ["WARNING", "legacy_checkpoints", "convert_checkpoint"]

WARNING = (
    "convert-checkpoint unpickles optimizer.pt and rng.pt (torch's weights-only loader plus numpy arrays): "
    "run it only on checkpoints from a source you trust"
)

# numpy's uint32 key array in a pickled np.random.get_state(): the array constructor, ndarray, dtype (numpy >= 2 and the
# numpy 1.x module name of the constructor)
_RECONSTRUCT = np._core.multiarray._reconstruct
_NUMPY_GLOBALS = [
    _RECONSTRUCT,
    (_RECONSTRUCT, "numpy.core.multiarray._reconstruct"),
    np.ndarray,
    np.dtype,
    type(np.dtype(np.uint32)),
]


def legacy_checkpoints(path: Path) -> list[Path]:
    """The checkpoints under `path` (a checkpoint folder, or a run folder with `checkpoints/iter_*`) that hold the old
    pickle files and no state files yet."""
    path = Path(path)
    candidates = [path] if any((path / n).exists() for n in LEGACY_FILES) else sorted(path.glob("checkpoints/iter_*"))
    return [
        c
        for c in candidates
        if (c / "optimizer.pt").exists()
        and (c / "rng.pt").exists()
        and not ((c / OPTIMIZER_FILE).exists() and (c / RNG_FILE).exists())
    ]


def _unpickle(path: Path):
    try:
        with torch.serialization.safe_globals(_NUMPY_GLOBALS):
            return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # the weights-only unpickler raises UnpicklingError, RuntimeError, ... with long messages
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise CheckpointError(f"{path} was refused by torch's weights-only loader, not converted: {reason}") from None


def _rng_from_legacy(old: dict) -> dict:
    """The old rng.pt held np.random.get_state()'s legacy tuple ('MT19937', key, pos, has_gauss, gauss)."""
    name, key, pos, has_gauss, gauss = old["numpy"]
    numpy_state = {
        "bit_generator": str(name),
        "state": {"key": np.asarray(key, dtype=np.uint32).tolist(), "pos": int(pos)},
        "has_gauss": int(has_gauss),
        "gauss": float(gauss),
    }
    return {"python": old["python"], "numpy": numpy_state, "torch": old["torch"], "cuda": list(old.get("cuda", []))}


def convert_checkpoint(ckpt: Path) -> Path:
    """Write `ckpt`'s optimizer.safetensors and rng.safetensors from its optimizer.pt and rng.pt, check that they read
    back to exactly the same state (tensors, dtypes, tuples), then delete the two pickles. Returns `ckpt`."""
    ckpt = Path(ckpt)
    optimizer_state, old_rng = _unpickle(ckpt / "optimizer.pt"), _unpickle(ckpt / "rng.pt")
    try:
        rng = _rng_from_legacy(old_rng)
    except (KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{ckpt / 'rng.pt'} is not an old scpo RNG state ({err}), not converted") from None
    try:
        write_training_state(ckpt, optimizer_state, rng)
        back = read_training_state(ckpt)
        if not _same((back.optimizer, back.rng), (optimizer_state, rng)):
            raise CheckpointError(f"{ckpt}: the converted state does not read back equal to the pickles (kept)")
    except (CheckpointError, TypeError, ValueError) as err:
        for name in (OPTIMIZER_FILE, RNG_FILE):
            (ckpt / name).unlink(missing_ok=True)
        raise CheckpointError(str(err).splitlines()[0]) from None
    for name in LEGACY_FILES:
        (ckpt / name).unlink()
    return ckpt


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b or (a != a and b != b)  # NaN (e.g. a float in param_groups) equals itself here

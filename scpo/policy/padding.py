"""Token lists -> padded id / mask tensors, the two layouts every batched forward pass here uses: prompts flush right
(left padding, as `generate` expects, so the last column is every prompt's last token) and answers flush left. Both are
`torch.nn.utils.rnn.pad_sequence`, widened to `width` when one is given."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.nn.utils.rnn import pad_sequence

__all__ = ["left_pad", "right_pad", "pad_rows"]


def pad_rows(rows: Sequence[torch.Tensor], value: float, width: int | None = None, side: str = "right") -> torch.Tensor:
    """1-D tensors -> [B, W]: `pad_sequence` with `value` on `side`, then widened to `width` (at least the longest
    row's length; ValueError otherwise)."""
    longest = max((len(r) for r in rows), default=0)
    width = longest if width is None else width
    if width < longest:
        raise ValueError(f"width {width} is shorter than the longest sequence ({longest} tokens)")
    if not rows:
        return torch.empty((0, width))
    out = pad_sequence(list(rows), batch_first=True, padding_value=value, padding_side=side)
    extra = width - out.shape[1]
    return torch.nn.functional.pad(out, (extra, 0) if side == "left" else (0, extra), value=value) if extra else out


def _ids_and_mask(seqs: Sequence[Sequence[int]], pad_id: int, width: int | None, side: str):
    ids = [torch.tensor(list(s), dtype=torch.long) for s in seqs]
    ones = [torch.ones(len(s), dtype=torch.long) for s in seqs]
    return pad_rows(ids, pad_id, width, side).long(), pad_rows(ones, 0, width, side).long()


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int, width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """-> ids [B, W] (long), attention [B, W] (long, 1 on tokens); each row's tokens end at column W - 1."""
    return _ids_and_mask(seqs, pad_id, width, "left")


def right_pad(
    seqs: Sequence[Sequence[int]], pad_id: int, width: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """-> ids [B, W] (long), mask [B, W] (long, 1 on tokens); each row's tokens start at column 0."""
    return _ids_and_mask(seqs, pad_id, width, "right")

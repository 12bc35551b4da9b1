"""Token lists -> padded id / mask tensors, the two layouts every batched forward pass here uses: prompts flush right
(left padding, as `generate` expects, so the last column is every prompt's last token) and answers flush left."""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = ["left_pad", "right_pad"]


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int, width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """-> ids [B, W] (long), attention [B, W] (long, 1 on tokens); each row's tokens end at column W - 1."""
    ids, mask = _padded(seqs, pad_id, width)
    for i, s in enumerate(seqs):
        if len(s):
            ids[i, ids.shape[1] - len(s) :] = torch.tensor(list(s), dtype=torch.long)
            mask[i, ids.shape[1] - len(s) :] = 1
    return ids, mask


def right_pad(
    seqs: Sequence[Sequence[int]], pad_id: int, width: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """-> ids [B, W] (long), mask [B, W] (long, 1 on tokens); each row's tokens start at column 0."""
    ids, mask = _padded(seqs, pad_id, width)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(list(s), dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


def _padded(seqs: Sequence[Sequence[int]], pad_id: int, width: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    longest = max((len(s) for s in seqs), default=0)
    width = longest if width is None else width
    if width < longest:
        raise ValueError(f"width {width} is shorter than the longest sequence ({longest} tokens)")
    return torch.full((len(seqs), width), pad_id, dtype=torch.long), torch.zeros((len(seqs), width), dtype=torch.long)

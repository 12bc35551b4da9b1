"""Every model load is complete or refused: a model folder whose weights lack a tensor its architecture has, or hold
one it does not have, is an `IncompleteModelError` naming the tensors, never a model with freshly initialised layers.

Two checks, one per moment:
- before loading (`tensor_names_problem`, cheap: no tensor is read): the tensor names in the folder's safetensors
  headers against the names of the architecture its config.json describes, built on PyTorch's `meta` device (no
  memory is allocated). Tied tensors (an output layer tied to the embedding) are one tensor under several names: any
  one of them present counts. Resume (`scpo.run.checkpoint.checkpoint_problem`) and `scpo eval` use it to fall back or
  refuse before anything runs.
- at loading (`check_loading_info`): transformers' own report (`from_pretrained(..., output_loading_info=True)`: its
  missing, unexpected and mismatched keys), so a Hub model or a `.bin` folder is held to the same rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from scpo.errors import ExpectedError

__all__ = ["IncompleteModelError", "tensor_names_problem", "check_loading_info", "names_line"]


class IncompleteModelError(ExpectedError, ValueError):
    """A model whose weights miss tensors of its architecture or hold tensors it does not have (one line)."""


def names_line(names: Iterable[str], limit: int = 4) -> str:
    """`a, b, c and 5 more`: the first `limit` names, sorted."""
    names = sorted(names)
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _problem_text(where: str, missing: Iterable[str], unexpected: Iterable[str], mismatched: Iterable[str] = ()) -> str:
    missing, unexpected, mismatched = sorted(missing), sorted(unexpected), sorted(mismatched)
    parts = []
    if missing:
        parts.append(f"lacks {len(missing)} tensor{'s' if len(missing) != 1 else ''} of its architecture "
                     f"({names_line(missing)})")  # fmt: skip
    if unexpected:
        parts.append(f"holds {len(unexpected)} tensor{'s' if len(unexpected) != 1 else ''} its architecture does not "
                     f"have ({names_line(unexpected)})")  # fmt: skip
    if mismatched:
        parts.append(f"has {len(mismatched)} tensor{'s' if len(mismatched) != 1 else ''} of the wrong shape "
                     f"({names_line(mismatched)})")  # fmt: skip
    return f"model {where} {' and '.join(parts)}: a partial or foreign model, refused"


def _file_tensor_names(model_dir: Path) -> set[str] | None:
    """The tensor names of every safetensors file in `model_dir` (None when it has none: a `.bin` folder)."""
    from safetensors import safe_open

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        return None
    names: set[str] = set()
    for path in files:
        with safe_open(path, framework="pt") as f:
            names.update(f.keys())
    return names


def _architecture_groups(model_dir: Path) -> list[list[str]]:
    """The architecture's tensors (its state_dict), each a list of the names it goes by (several when tied)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_dir)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    groups: dict[int, list[str]] = {}
    for name, tensor in model.state_dict(keep_vars=True).items():
        groups.setdefault(id(tensor), []).append(name)
    return list(groups.values())


def tensor_names_problem(model_dir: str | Path) -> str | None:
    """One line naming the tensors `model_dir`'s safetensors files lack or hold beyond its architecture (config.json),
    or None when they match (or when the folder holds no safetensors file: the load's own check applies then). The
    folder's config.json and headers must be readable (`scpo.run.checkpoint.model_problem` checks that first)."""
    model_dir = Path(model_dir)
    present = _file_tensor_names(model_dir)
    if present is None:
        return None
    groups = _architecture_groups(model_dir)
    known = {name for group in groups for name in group}
    missing = [group[0] for group in groups if not any(name in present for name in group)]
    unexpected = present - known
    return _problem_text(str(model_dir), missing, unexpected) if missing or unexpected else None


def check_loading_info(info: dict, source: str | Path) -> None:
    """IncompleteModelError naming the tensors when transformers' loading info (`output_loading_info=True`) reports
    missing, unexpected or mismatched keys."""
    missing = set(info.get("missing_keys") or ())
    unexpected = set(info.get("unexpected_keys") or ())
    mismatched = {m[0] if isinstance(m, (tuple, list)) else m for m in info.get("mismatched_keys") or ()}
    if missing or unexpected or mismatched:
        raise IncompleteModelError(_problem_text(str(source), missing, unexpected, mismatched))

"""A training run stops, in one line, the moment its numbers stop being numbers: `check_update` after each RL update
(the loss terms and gradient norm it returns, then every weight), `check_weights` before a model is saved. Called
before anything of that iteration is logged, saved or checkpointed, so no non-finite value reaches a file: the run
folder keeps the last good checkpoint to `--resume` from.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import torch

from scpo.errors import ExpectedError

__all__ = ["TrainingDiverged", "nonfinite_weights", "check_update", "check_weights"]


class TrainingDiverged(ExpectedError, RuntimeError):
    """A loss, gradient norm or weight that is NaN or infinite; the message names the iteration and the value."""


def nonfinite_weights(model: torch.nn.Module) -> list[str]:
    """Names of the parameters holding a NaN or an infinity (one device sync for all of them)."""
    params = [(name, p) for name, p in model.named_parameters()]
    if not params:
        return []
    finite = torch.stack([torch.isfinite(p.detach()).all() for _, p in params]).cpu()
    return [name for (name, _), ok in zip(params, finite.tolist()) if not ok]


Hint = str | Callable[[], str]


def _stop(where: str, what: str, hint: Hint) -> TrainingDiverged:
    hint = hint() if callable(hint) else hint
    return TrainingDiverged(f"{where}: {what}; stopped before anything of it was written{'; ' + hint if hint else ''}")


def check_update(iteration: int, stats: Mapping[str, float], model: torch.nn.Module, hint: Hint = "") -> None:
    """TrainingDiverged naming `iteration` and the first non-finite value: a loss term or the gradient norm of
    `stats` (`ppo_update`'s result), else a weight of `model`. `hint` (or a function giving it, called only then):
    what to do next."""
    bad = {k: v for k, v in stats.items() if not math.isfinite(float(v))}
    if bad:
        name, value = next(iter(bad.items()))
        label = "the gradient norm" if name == "grad_norm" else f"the loss term {name}"
        raise _stop(f"iteration {iteration}", f"{label} is {value}", hint)
    weights = nonfinite_weights(model)
    if weights:
        more = f" and {len(weights) - 1} more" if len(weights) > 1 else ""
        raise _stop(f"iteration {iteration}", f"the update made weight {weights[0]}{more} non-finite", hint)


def check_weights(model: torch.nn.Module, where: str, hint: Hint = "") -> None:
    """TrainingDiverged when a weight of `model` is not finite (`where`: e.g. 'SFT warm start')."""
    weights = nonfinite_weights(model)
    if weights:
        more = f" and {len(weights) - 1} more" if len(weights) > 1 else ""
        raise _stop(where, f"weight {weights[0]}{more} is not finite", hint)

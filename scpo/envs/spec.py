"""What an environment declares about itself: `EnvSpec` (its name, its package, its `make` factory, its options) and
`EnvOptions`, the fields every environment's section of params.yaml (`env.<name>`) has.

An environment package defines its options model (a subclass of `EnvOptions` that holds its defaults, once) and a
module-level `SPEC`; `scpo.envs.registry` lists the packages by name. The config builds `env.<name>` from the options
model, and the trainer, SFT and evaluation read the splits, the step limit and the factory options from it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from scpo.strict_model import StrictModel

__all__ = ["EnvOptions", "EnvSpec"]


class EnvOptions(StrictModel):
    """The fields every environment's options have; a subclass sets their defaults and adds the options of its
    `make_env` (e.g. ALFWorld's `engine`)."""

    max_steps: int = Field(ge=1, description="step limit of an episode")
    train_split: str = Field(description="the split RL and SFT draw their tasks from")
    eval_splits: tuple[str, ...] = Field(min_length=1, description="the splits evaluation reports")

    def factory_options(self) -> dict[str, Any]:
        """The fields a subclass adds, as keyword options of the package's `make_env`."""
        return {k: getattr(self, k) for k in type(self).model_fields if k not in EnvOptions.model_fields}


@dataclass(frozen=True)
class EnvSpec:
    """One registered environment and what it offers beyond the `EnvPackage` contract.

    name              : its name in the registry and in `env.name`
    factory           : builds one environment for `scpo.envs.make(name, **kwargs)`
    package           : the module implementing the `EnvPackage` contract (None: `make` only, not trainable)
    options           : its `EnvOptions` subclass, the `env.<name>` section of params.yaml (None when `package` is None)
    tokenizer_phrases : the prompt template's fixed text, made single tokens of the tiny policy's tokenizer
    tokenizer_lowercase : whether the tiny policy's tokenizer folds case (text whose case carries no meaning)
    oracle_progress   : "module:function" labelling a batch of its rollouts with the planner's oracle progress q_t,
                        called as `function(batch, data_root=...)` (None: no planner; the oracle estimator cannot run)
    tabular           : "module:function" giving a task's tabular model (`scpo.envs.tabular.TabularModel`), called as
                        `function(task_id, data_root=..., **options)` (None: its states cannot be enumerated; no exact
                        on-policy values)
    """

    name: str
    factory: Callable[..., Any]
    package: str | None = None
    options: type[EnvOptions] | None = None
    tokenizer_phrases: tuple[str, ...] = ()
    tokenizer_lowercase: bool = False
    oracle_progress: str | None = None
    tabular: str | None = None

    def __post_init__(self) -> None:
        if (self.package is None) != (self.options is None):
            raise ValueError(
                f"environment {self.name!r}: a trainable env declares both package and options, a "
                f"make-only env neither (got package={self.package!r}, options={self.options!r})"
            )

    @property
    def trainable(self) -> bool:
        return self.package is not None

    def label_progress(self, batch, data_root):
        """`batch` with its oracle_progress column, from the environment's planner (`oracle_progress`)."""
        if self.oracle_progress is None:
            raise ValueError(f"environment {self.name!r} has no planner: its rollouts get no oracle progress")
        module, _, attr = self.oracle_progress.partition(":")
        return getattr(importlib.import_module(module), attr)(batch, data_root=data_root)

    def tabular_model(self, task_id: str, data_root, **options):
        """The tabular model of `task_id` (`tabular`); ValueError when the environment declares none."""
        if self.tabular is None:
            raise ValueError(f"environment {self.name!r} declares no tabular model: its states cannot be enumerated")
        module, _, attr = self.tabular.partition(":")
        return getattr(importlib.import_module(module), attr)(task_id, data_root=data_root, **options)

    def load_package(self):
        """The package module (imported once by Python)."""
        if self.package is None:
            raise KeyError(f"environment {self.name!r} can be built with scpo.envs.make but has no package to train on")
        return importlib.import_module(self.package)

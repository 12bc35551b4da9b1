"""The one registry of environments: name -> the `EnvSpec` its package declares (`scpo.envs.spec`).

    scpo.envs.make("alfworld", task_id=..., data_root="data")   # one environment (tests, notebooks)
    env_settings(cfg)                                            # what the trainer, SFT and evaluation need of env.name
    with_oracle_progress(batch, data_root)                       # a batch labelled by its environment's planner

The config validates `env.name` against the trainable names and builds each `env.<name>` section from the spec's
options model, so adding an environment is: its package (the `EnvPackage` contract and a `SPEC`) and one line here.
Packages are imported when first asked for (`alfworld` / `textworld` load only when an ALFWorld env is built).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from scpo.envs.base import CONTRACT
from scpo.envs.spec import EnvSpec

__all__ = [
    "ENVIRONMENTS",
    "EnvSettings",
    "env_spec",
    "available",
    "trainable",
    "env_package",
    "env_settings",
    "make",
    "with_oracle_progress",
]

# name -> "module:attribute" of its EnvSpec
ENVIRONMENTS: dict[str, str] = {
    "alfworld": "scpo.envs.alfworld:SPEC",
    "webshop": "scpo.envs.webshop:SPEC",
    "webshop-original": "scpo.envs.webshop.original:SPEC",
    "corridor": "scpo.envs.corridor:SPEC",  # a data-free test environment (tests of the collector, trainer, resume)
    "sokoban": "scpo.envs.sokoban:SPEC",  # verl-agent's Sokoban, data-free, with an exact solver
}


def env_spec(name: str) -> EnvSpec:
    """The spec of environment `name`; KeyError listing the registry for an unknown name."""
    try:
        entry = ENVIRONMENTS[name]
    except KeyError:
        raise KeyError(f"unknown environment {name!r}; available: {', '.join(available())}") from None
    module, _, attr = entry.partition(":")
    spec = getattr(importlib.import_module(module), attr)
    if spec.name != name:
        raise ValueError(f"registry entry {name!r} points at {entry}, whose spec is named {spec.name!r}")
    return spec


def available() -> list[str]:
    """Every registered name (`make` builds any of them)."""
    return sorted(ENVIRONMENTS)


def trainable() -> list[str]:
    """The names with an environment package: what `env.name` and `report.envs` accept."""
    return [name for name in available() if env_spec(name).trainable]


def env_package(name: str) -> ModuleType:
    """The environment package of `name`; TypeError naming the functions of the contract it lacks."""
    module = env_spec(name).load_package()
    missing = [f for f in CONTRACT if not callable(getattr(module, f, None))]
    if missing:
        raise TypeError(f"environment package {module.__name__!r} lacks {missing} of the contract {list(CONTRACT)}")
    return module


def make(name: str, **options: Any):
    """Build one environment `name` with `options` (the spec's factory)."""
    return env_spec(name).factory(**options)


@dataclass(frozen=True)
class EnvSettings:
    """The configured environment, everything the collector, SFT, the trainer and evaluation read of it: its package,
    data root, step limit, splits and factory options (its `env.<name>` section), the prompt's history length
    (`env.history_length`) and the tokenizer hints its spec declares (`EnvSpec.tokenizer_phrases`,
    `tokenizer_lowercase`)."""

    name: str
    package: ModuleType
    data_root: str
    max_steps: int
    train_split: str
    eval_splits: tuple[str, ...]
    options: dict[str, Any]
    history_length: int = 2
    tokenizer_phrases: tuple[str, ...] = ()
    tokenizer_lowercase: bool = False

    def play_options(self) -> dict[str, Any]:
        """How an episode of it is played, as the collector's keyword arguments: data root, step limit, history
        length and factory options (the sampling temperature is the caller's)."""
        return {
            "data_root": self.data_root,
            "max_steps": self.max_steps,
            "history_length": self.history_length,
            "env_options": self.options,
        }


def env_settings(cfg) -> EnvSettings:
    """The `EnvSettings` of `cfg.env.name`, from its `env.<name>` section (validated by its spec's options model),
    `env.history_length` and its spec."""
    name = cfg.env.name
    opts = getattr(cfg.env, name)
    spec = env_spec(name)
    return EnvSettings(
        name,
        env_package(name),
        cfg.data.root,
        opts.max_steps,
        opts.train_split,
        tuple(opts.eval_splits),
        opts.factory_options(),
        cfg.env.history_length,
        spec.tokenizer_phrases,
        spec.tokenizer_lowercase,
    )


def with_oracle_progress(batch, data_root):
    """`batch` with its `oracle_progress` column, labelled by the planner its environment declares
    (`EnvSpec.oracle_progress`); ValueError naming the environment when it declares none."""
    if batch.oracle_progress is not None:
        return batch
    name = batch.env
    spec = env_spec(name) if name else None
    if spec is None or spec.oracle_progress is None:
        raise ValueError(
            f"oracle progress needs an environment with a planner (EnvSpec.oracle_progress); the batch's "
            f"environment {name!r} declares none"
        )
    return spec.label_progress(batch, data_root)

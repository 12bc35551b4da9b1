"""Running credit methods on a batch: the one entry point of the trainer, the analyses, the testbeds and the explorer.

    results = estimate(batch, ["gigpo", "scpo", "hcapo"], cfg.credit, hindsight_logprob=scores)  # {method: result}
    res = compute_advantages("scpo", batch, cfg.credit, tau=0.8)                                  # one method

Both go through the same checks, in this order: the batch's rows (`grouping.check_rows`) and its rewards and returns
(finite: `grouping.check_finite`); the config resolved for the batch's environment (`RolloutBatch.env`:
`CreditOptions.for_env`, e.g. `norm.scale_by_env`) with the options applied to the method's sections
(`resolve_config`); what the method's spec (`scpo.credit.spec.MethodSpec`) needs besides the batch: its columns (the
planner's oracle progress, the policy's Monte-Carlo values) and the policy's scores (`hindsight_logprob`, computed by
the caller that has the policy: `scpo.policy.hindsight`); then the frozen scorer its spec asks for (built once per
name and model: `default_scorer`) unless a scorer object is given. A scorer given by name is the method's `scorer`
option. A need that is not met is one ValueError naming it, or, in `estimate` with `unmet="skip"`, the method is left
out (analyses of saved rollouts, which have no policy).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from pydantic import ValidationError

from scpo.batch import RolloutBatch
from scpo.credit.grouping import check_finite, check_rows, shared_codes
from scpo.credit.options import CreditOptions
from scpo.credit.registry import CreditConfig, method_spec
from scpo.credit.result import CreditResult
from scpo.credit.spec import COLUMNS, MethodSpec

__all__ = ["estimate", "compute_advantages", "resolve_config", "unmet_need", "default_scorer", "credit_options"]

_TOP_LEVEL_OPTIONS = ("success_reward",)


def resolve_config(method: str, config: CreditConfig | None = None, **options: Any) -> CreditConfig:
    """`config` (default: CreditConfig()) with `options` applied to the method's sections and validated: a keyword
    option sets the first field of that name in the sections the method reads (or `success_reward`); an unknown
    option is a ValueError listing the allowed names."""
    spec = method_spec(method)
    cfg = config if config is not None else CreditConfig()
    if not options:
        return cfg
    data = cfg.model_dump()
    for key, value in options.items():
        section = next((s for s in spec.sections if key in type(getattr(cfg, s)).model_fields), None)
        if section is not None:
            data[section][key] = value
        elif key in _TOP_LEVEL_OPTIONS:
            data[key] = value
        else:
            allowed = sorted({f for s in spec.sections for f in type(getattr(cfg, s)).model_fields})
            raise ValueError(
                f"unknown option {key!r} for credit method {method!r}; allowed: "
                f"{', '.join(sorted({*allowed, *_TOP_LEVEL_OPTIONS}))}"
            )
    try:
        return CreditConfig.model_validate(data)
    except ValidationError as err:
        msgs = "; ".join(f"{'.'.join(map(str, e['loc']))} = {e.get('input')!r}: {e['msg']}" for e in err.errors())
        raise ValueError(f"invalid option for credit method {method!r}: {msgs}") from None


@lru_cache(maxsize=8)
def default_scorer(name: str, model: str | None):
    """One scorer per (name, model) per process, so its pair cache survives across iterations."""
    from scpo.scorers import make_scorer

    return make_scorer(name, model=model)


def unmet_need(spec: MethodSpec | str, batch: RolloutBatch, hindsight_logprob=None) -> str | None:
    """What the method needs that neither the batch nor `hindsight_logprob` provides (None: nothing)."""
    spec = method_spec(spec) if isinstance(spec, str) else spec
    for column in spec.columns:
        if getattr(batch, column) is None:
            return COLUMNS[column]
    if spec.policy_scores and hindsight_logprob is None:
        return (
            "the policy's hindsight scores per row (hindsight_logprob=...: the trainer computes it with the policy, "
            "scpo.policy.hindsight.hindsight_logprob, from the batch's prompts and answer token ids)"
        )
    return None


def credit_options(config) -> CreditOptions:
    """The credit options of `config`: a `CreditConfig`, the project's `Config` (its `credit` section), or None (the
    defaults); TypeError otherwise."""
    if config is None:
        return CreditConfig()
    config = getattr(config, "credit", config)
    if not isinstance(config, CreditOptions):
        raise TypeError(f"config must be a CreditConfig or the project's Config, got {type(config).__name__}")
    return config


def _run(
    spec: MethodSpec,
    batch: RolloutBatch,
    config: CreditOptions,
    scorer,
    hindsight_logprob: np.ndarray | None,
    options: dict[str, Any],
) -> CreditResult:
    """One method on `batch` after the checks of the module docstring (its need already met)."""
    if isinstance(scorer, str):  # a scorer's name is the method's `scorer` option (SCPO's), not a scorer object
        if "scorer" in options:
            raise ValueError(f"credit method {spec.name!r}: the scorer {scorer!r} and the scorer option too")
        options, scorer = {**options, "scorer": scorer}, None
    elif scorer is not None and "scorer" in options:
        raise ValueError(f"credit method {spec.name!r}: a scorer object and the scorer option {options['scorer']!r}")
    cfg = resolve_config(spec.name, config.for_env(batch.env), **options)
    if scorer is None and (need := spec.scorer(cfg)) is not None:
        scorer = default_scorer(*need)
    with shared_codes():
        return spec.fn(batch, cfg, scorer=scorer, hindsight_logprob=hindsight_logprob if spec.policy_scores else None)


def _check_batch(batch: RolloutBatch) -> None:
    if not isinstance(batch, RolloutBatch):
        raise TypeError(f"batch must be a RolloutBatch, got {type(batch).__name__}")
    check_rows(batch.traj_id, batch.step)
    check_finite({"reward": batch.reward, "episode_return": batch.episode_return}, batch.traj_id)


def estimate(
    batch: RolloutBatch,
    methods: Iterable[str],
    config=None,
    *,
    scorer=None,
    hindsight_logprob: np.ndarray | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
    unmet: Literal["raise", "skip"] = "raise",
) -> dict[str, CreditResult]:
    """{method: CreditResult} of every method in `methods` on `batch` (module docstring), under `config` (the credit
    options, or the project's Config: `credit_options`). `options` sets fields of
    option sections for the methods that read them: `{"scpo": {"tau": 0.8}}` changes SCPO (and nothing that does not
    read `credit.scpo`); `scorer` (an object) replaces every method's configured scorer."""
    if unmet not in ("raise", "skip"):
        raise ValueError(f"unmet={unmet!r} is not one of 'raise', 'skip'")
    _check_batch(batch)
    options = dict(options or {})
    out: dict[str, CreditResult] = {}
    for m in dict.fromkeys(methods):
        spec = method_spec(m)
        need = unmet_need(spec, batch, hindsight_logprob)
        if need is not None:
            if unmet == "skip":
                continue
            raise ValueError(f"credit method {m!r} needs {need}")
        opts = {k: v for section in spec.sections for k, v in options.get(section, {}).items()}
        out[m] = _run(spec, batch, credit_options(config), scorer, hindsight_logprob, opts)
    return out


def compute_advantages(
    method: str,
    batch: RolloutBatch,
    config=None,
    *,
    scorer=None,
    hindsight_logprob: np.ndarray | None = None,
    **options: Any,
) -> CreditResult:
    """Per-step advantages of one method on `batch` (see `CreditResult`), with keyword options for its sections:
    `estimate(batch, [method], config, ...)[method]` with the options given by name. Pure: reads the batch, returns
    new arrays. A NaN or infinite reward or episode return is a ValueError naming its rows, for every method; the
    other float inputs are checked by the methods that read them (HCAPO's `hindsight_logprob`, the oracle's progress,
    which may be -inf: a dead end)."""
    spec = method_spec(method)
    _check_batch(batch)
    need = unmet_need(spec, batch, hindsight_logprob)
    if need is not None:
        raise ValueError(f"credit method {method!r} needs {need}")
    return _run(spec, batch, credit_options(config), scorer, hindsight_logprob, options)

"""The tabular model of an environment whose states can be enumerated (the corridor; Sokoban): what the exact on-policy
values (`scpo.rollout.exact_values`) need to enumerate every state a policy can reach and to rebuild the prompt the
policy sees there (docs/algorithms.md, "Exact on-policy ground truth").

A `TabularModel` is one task's environment as a deterministic finite model, a structural protocol (any object with
these members; plain functions fit it through a small dataclass):

    goal                      the task line, as `info["goal"]` of the environment's reset
    initial() -> s            the state after reset (hashable)
    admissible(s) -> [str]    what the policy chooses among in s, in the environment's listing order
                              (`info["admissible_commands"]`, or `info["choice_commands"]` where the env has them)
    step(s, a) -> (s', r, done, won)   the environment's step: the reward it returns, `done` when the episode ends
                              whatever the step budget (a win; a terminal loss), `won` as `info["won"]`
    observation(s) -> str     the observation the environment returns on reaching s (the raw text of the prompt)

The step budget is not part of the state: the environment ends an episode also after `max_steps` steps, which the
dynamic programme counts itself (it works over (state, steps left)). `check_replay` plays a list of commands in the
model and in the environment side by side and raises at the first difference (observation, reward, done, won,
admissible commands), so an environment's model is tested against the environment itself. An environment declares its
model in its `EnvSpec` (`tabular`: "module:function", called as `function(task_id, data_root=..., **options)`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, Protocol, runtime_checkable

__all__ = ["TabularModel", "check_replay"]


@runtime_checkable
class TabularModel(Protocol):
    """One task's environment as a deterministic finite model (module docstring)."""

    goal: str

    def initial(self) -> Hashable: ...

    def admissible(self, state: Any) -> list[str]: ...

    def step(self, state: Any, action: str) -> tuple[Hashable, float, bool, bool]: ...

    def observation(self, state: Any) -> str: ...


def check_replay(model: TabularModel, env, actions: Sequence[str]) -> list[Hashable]:
    """Play `actions` from reset in `model` and in `env` (a `TextEnv` of the same task) side by side -> the model's
    states visited (the initial one first). ValueError at the first step where they differ: observation, reward,
    done (the environment's done is the model's or the step budget `env.max_steps` reached), won, or the admissible
    commands of the state reached. Actions after the episode ends are not played."""
    obs, info = env.reset()
    state = model.initial()
    _same("goal", 0, model.goal, info.get("goal", ""))
    _same("observation", 0, model.observation(state), obs)
    _same("admissible commands", 0, model.admissible(state), _choices(info))
    states = [state]
    for t, action in enumerate(actions):
        obs, reward, done, info = env.step(action)
        state, m_reward, m_done, m_won = model.step(state, action)
        states.append(state)
        _same("observation", t + 1, model.observation(state), obs)
        _same("reward", t + 1, m_reward, reward)
        _same("won", t + 1, m_won, bool(info.get("won", False)))
        _same("done", t + 1, m_done or t + 1 >= env.max_steps, bool(done))
        if done:
            break
        _same("admissible commands", t + 1, model.admissible(state), _choices(info))
    return states


def _choices(info: dict) -> list[str]:
    return list(info.get("choice_commands") or info.get("admissible_commands", []))


def _same(what: str, t: int, model_value, env_value) -> None:
    if model_value != env_value:
        raise ValueError(
            f"after {t} steps the tabular model's {what} is {model_value!r}, the environment's {env_value!r}"
        )

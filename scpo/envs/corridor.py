"""`corridor`: a deterministic key-door text game, a registered test environment that needs no data, so the collector,
SFT, trainer, evaluation and resume tests run in seconds without ALFWorld or WebShop (`env.name: corridor`).
It has an exact planner (`optimal_cost`, `label_progress`), so the oracle estimator trains on it as well: a
positive control of the learning benchmark, where ground-truth credit is the agent's own (the state is in the
observation).

Task `corridor-<kind>-<length>-<key>-<i>`: rooms 0..length-1, the agent starts in room 0; `walk`: reach the last room
and `open door`; `key`: also `take key` in room <key> first. Reward 10.0 on success, else 0.0. It follows the
`EnvPackage` contract (`scpo.envs.base`) and declares its `SPEC` like ALFWorld and WebShop do.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
from pydantic import Field

from scpo.envs.prompting import extract_action, history_items, history_window
from scpo.envs.spec import EnvOptions, EnvSpec

__all__ = [
    "SPLITS",
    "list_tasks",
    "make_env",
    "task_type",
    "expert_actions",
    "build_prompt",
    "project_action",
    "CorridorEnv",
    "CorridorOptions",
    "optimal_cost",
    "label_progress",
    "CorridorState",
    "CorridorModel",
    "tabular_model",
    "PROMPT_TEMPLATE",
    "SPEC",
]

SPLITS = {
    "train": range(0, 24),
    "valid_seen": range(24, 32),
    "valid_unseen": range(32, 40),
    # longer corridors (5-8 rooms), where a policy that walks at random rarely reaches the door in time: the learning
    # benchmark's positive control (experiments/learning_benchmark, "corridor")
    "train_long": range(40, 64),
    "valid_long": range(64, 80),
}
PROMPT_TEMPLATE = (
    "You are an agent in a corridor. Your task is to: {goal}\n"
    "Step {step}. {history}Current observation: {observation}\n"
    "Admissible actions: {admissible}\n"
    "Think step by step inside <think> </think>, then give one admissible action inside <action> </action>."
)
HISTORY_ITEM = "[Observation: {observation} Action: {action}] "
SPLIT_NAMES = tuple(SPLITS)
DEFAULT_MAX_STEPS = 10
MAX_ACTION_CHARS = 100  # an inadmissible action is kept to this many characters


def _task(i: int) -> str:
    length = 2 + i % 3 if i < SPLITS["train_long"].start else 5 + (i // 2) % 4
    kind = "key" if i % 2 else "walk"
    return f"corridor-{kind}-{length}-{(i // 2) % length if kind == 'key' else 0}"


def list_tasks(split: str, data_root: str | Path = "data", limit: int | None = None) -> list[str]:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    tasks = sorted({_task(i) + f"-{i}" for i in SPLITS[split]})
    return tasks[:limit] if limit else tasks


def _parse(task_id: str) -> tuple[str, int, int]:
    parts = task_id.split("-")
    if len(parts) != 5 or parts[0] != "corridor" or parts[1] not in ("walk", "key"):
        raise ValueError(f"not a corridor task id: {task_id!r}")
    return parts[1], int(parts[2]), int(parts[3])


def task_type(task_id: str, data_root: str | Path = "data") -> str:
    return _parse(task_id)[0]


def expert_actions(task_id: str, data_root: str | Path = "data") -> list[str]:
    kind, length, key = _parse(task_id)
    if kind == "walk":
        return ["go east"] * (length - 1) + ["open door"]
    return ["go east"] * key + ["take key"] + ["go east"] * (length - 1 - key) + ["open door"]


class CorridorEnv:
    def __init__(self, task_id: str, max_steps: int | None = None):
        self.task_id = task_id
        self.kind, self.length, self.key = _parse(task_id)
        self.max_steps = max_steps or DEFAULT_MAX_STEPS
        self.goal = "open the door at the end" + (" with the key" if self.kind == "key" else "")

    def _obs(self) -> str:
        text = f"You are in room {self.pos} of {self.length}."
        if self.kind == "key" and self.pos == self.key and not self.has_key:
            text += " You see a key here."
        if self.pos == self.length - 1:
            text += " A door is to the east."
        return text

    def _admissible(self) -> list[str]:
        acts = ["look"]
        if self.pos < self.length - 1:
            acts.append("go east")
        if self.pos > 0:
            acts.append("go west")
        if self.kind == "key" and self.pos == self.key and not self.has_key:
            acts.append("take key")
        if self.pos == self.length - 1:
            acts.append("open door")
        return acts

    def _info(self) -> dict[str, Any]:
        return {
            "admissible_commands": self._admissible(),
            "won": self.won,
            "task_score": float(self.won),
            "task_type": self.kind,
            "goal": self.goal,
        }

    def reset(self):
        self.pos, self.has_key, self.won, self.t = 0, False, False, 0
        return self._obs(), self._info()

    def step(self, action: str):
        self.t += 1
        obs = None
        if action not in self._admissible():
            obs = "Nothing happens."
        elif action == "go east":
            self.pos += 1
        elif action == "go west":
            self.pos -= 1
        elif action == "take key":
            self.has_key = True
            obs = "You take the key."
        elif action == "open door":
            if self.kind == "walk" or self.has_key:
                self.won = True
                obs = "The door opens. You win."
            else:
                obs = "The door is locked."
        done = self.won or self.t >= self.max_steps
        return obs or self._obs(), 10.0 if self.won else 0.0, done, self._info()


def optimal_cost(env: CorridorEnv) -> int:
    """V*(s): the fewest commands from `env`'s state to a win (each command costs 1; 0 once won).

    walk, or key held:  (length - 1 - pos) + 1                       go east to the door, open it
    key not held:       |key - pos| + 1 + (length - 1 - key) + 1     to the key, take it, to the door, open it
    """
    if env.won:
        return 0
    if env.kind == "key" and not env.has_key:
        return abs(env.key - env.pos) + 1 + (env.length - 1 - env.key) + 1
    return env.length - 1 - env.pos + 1


def label_progress(batch, data_root: str | Path = "data"):
    """`batch` (corridor rollouts) with its oracle_progress column q_t = V*(s_t) - V*(s_{t+1}) (`optimal_cost`),
    replaying each trajectory's commands from reset: 1 on a step of an optimal path (east toward the goal, take key,
    the winning open door), 0 on a step that changes nothing (look, a locked door, an inadmissible command), -1 on a
    step away. ValueError if a replayed observation differs from the saved one."""
    q = np.zeros(batch.n_rows)
    for rows in batch.trajectory_rows():
        env = CorridorEnv(str(batch.task_id[rows[0]]), max_steps=10_000)
        env.reset()
        v = optimal_cost(env)
        for r in rows:
            obs, _, _, _ = env.step(str(batch.action[r]))
            if obs != batch.next_observation[r]:
                raise ValueError(
                    f"replay of {batch.task_id[rows[0]]} (trajectory {batch.traj_uid[r]}, step {batch.step[r]}) gave "
                    f"{obs!r}, the saved rollout has {str(batch.next_observation[r])!r}"
                )
            v_next = optimal_cost(env)
            q[r], v = v - v_next, v_next
    return batch.with_column("oracle_progress", q)


class CorridorState(NamedTuple):
    """A corridor state of the tabular model: the room, the key held, won, and the message the last command printed
    in place of the room's description ("" when it printed the room)."""

    pos: int
    has_key: bool
    won: bool
    message: str


class CorridorModel:
    """The corridor of one task as a `scpo.envs.tabular.TabularModel`: the rules of `CorridorEnv.step` as a pure
    function of a `CorridorState` (tests/envs/test_corridor_tabular.py replays random episodes in both)."""

    def __init__(self, task_id: str):
        self.kind, self.length, self.key = _parse(task_id)
        self.goal = CorridorEnv(task_id).goal

    def initial(self) -> CorridorState:
        return CorridorState(0, False, False, "")

    def admissible(self, s: CorridorState) -> list[str]:
        key_here = self.kind == "key" and s.pos == self.key and not s.has_key
        return [
            "look",
            *(["go east"] if s.pos < self.length - 1 else []),
            *(["go west"] if s.pos > 0 else []),
            *(["take key"] if key_here else []),
            *(["open door"] if s.pos == self.length - 1 else []),
        ]

    def observation(self, s: CorridorState) -> str:
        if s.message:
            return s.message
        text = f"You are in room {s.pos} of {self.length}."
        if self.kind == "key" and s.pos == self.key and not s.has_key:
            text += " You see a key here."
        return text + (" A door is to the east." if s.pos == self.length - 1 else "")

    def step(self, s: CorridorState, action: str) -> tuple[CorridorState, float, bool, bool]:
        """-> (next state, reward, done, won); done only on a win (the step budget is the caller's)."""
        pos, has_key, won, message = s.pos, s.has_key, s.won, ""
        if action not in self.admissible(s):
            message = "Nothing happens."
        elif action in ("go east", "go west"):
            pos += 1 if action == "go east" else -1
        elif action == "take key":
            has_key, message = True, "You take the key."
        elif action == "open door":
            won = self.kind == "walk" or has_key
            message = "The door opens. You win." if won else "The door is locked."
        return CorridorState(pos, has_key, won, message), 10.0 if won else 0.0, won, won


def tabular_model(task_id: str, data_root: str | Path = "data", **options) -> CorridorModel:
    """The tabular model of `task_id` (`EnvSpec.tabular`)."""
    return CorridorModel(task_id)


def make_env(task_id: str, data_root: str | Path = "data", max_steps: int | None = None, **options) -> CorridorEnv:
    return CorridorEnv(task_id, max_steps=max_steps)


def build_prompt(
    goal: str,
    observation: str,
    admissible: list[str],
    history: list[tuple[str, str]],
    step: int,
    history_length: int = 2,
) -> str:
    hist = history_items(history_window(history, history_length), step, HISTORY_ITEM)
    return PROMPT_TEMPLATE.format(
        goal=goal,
        step=step,
        history=f"History: {hist}\n" if hist else "",
        observation=observation,
        admissible=", ".join(admissible),
    )


def project_action(text: object, admissible: list[str]) -> tuple[str, bool]:
    """The last `<action>...</action>` if admissible -> (action, True); anything else -> (a no-op string, False)."""
    action = extract_action(text, MAX_ACTION_CHARS)
    if action is None:
        return "invalid action", False
    return action, action in admissible


class CorridorOptions(EnvOptions):
    """`env.corridor` in params.yaml."""

    max_steps: int = Field(DEFAULT_MAX_STEPS, ge=1)
    train_split: Literal[SPLIT_NAMES] = "train"
    eval_splits: tuple[Literal[SPLIT_NAMES], ...] = Field(("valid_seen", "valid_unseen"), min_length=1)


SPEC = EnvSpec(
    name="corridor",
    factory=make_env,
    package=__name__,
    options=CorridorOptions,
    oracle_progress="scpo.envs.corridor:label_progress",
    tabular="scpo.envs.corridor:tabular_model",
)

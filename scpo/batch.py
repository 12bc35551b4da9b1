"""The one data model every part of scpo speaks: Step, Trajectory, RolloutBatch.

Flow: environments + policy produce `Trajectory` objects (lists of `Step`); `RolloutBatch.from_trajectories` turns a
list of them into the batch, the one artefact of an iteration (one row per step, numpy arrays): the credit estimators,
the update, the metrics, HCAPO's hindsight scores and the explorer all read it. Besides the environment's columns it
carries the policy's view of each step (the prompt text and the prompt, answer and candidate token ids), so saved
rollouts can be re-scored and re-trained on without replaying an environment. `to_parquet` / `read` persist a batch.

Ids are deterministic: a group is (task_id, seed), a trajectory is (task_id, seed, index); their uids are content
hashes, never uuid4, so the same rollouts always get the same ids.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Step", "Trajectory", "RolloutBatch", "stable_uid", "rows_by_trajectory"]


def stable_uid(*parts: object, length: int = 16) -> str:
    """Deterministic id: the first `length` hex digits of sha1 over the parts joined by '|'."""
    text = "|".join(str(p) for p in parts)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:length]


def rows_by_trajectory(traj_id: np.ndarray, step: np.ndarray) -> list[np.ndarray]:
    """The row indices of each trajectory in step order, trajectories by ascending `traj_id`; [] for no rows."""
    order = np.lexsort((step, traj_id))
    bounds = np.flatnonzero(np.diff(traj_id[order])) + 1
    return np.split(order, bounds) if len(order) else []


@dataclass
class Step:
    """One agent turn: it saw `observation`, answered `response`, which projected to `action`.

    `observation` / `next_observation` are the raw environment texts (no prompt, no history): GiGPO's anchor states.
    `valid` is False when the response lacked the required format or the action was not admissible (invalid penalty).
    `prompt` is the full text the policy saw; `prompt_ids` / `response_ids` its tokens and the answer's (EOS
    included), `candidate_ids` every answer an admissible-choice sampler chose among (None for free generation), and
    `choice_logprob` the sampler's log pi(k | x) of the answer it drew among them.
    `extras` holds anything else a producer wants to keep in memory (not saved).
    """

    observation: str
    action: str
    reward: float
    next_observation: str
    valid: bool = True
    done: bool = False
    response: str = ""
    prompt: str = ""
    admissible: tuple[str, ...] = ()
    prompt_ids: list[int] | None = None
    response_ids: list[int] | None = None
    candidate_ids: list[list[int]] | None = None
    choice_logprob: float | None = None
    sampler_logprobs: list[float] | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    oracle_progress: float | None = None  # q_t = V*(s_t) - V*(s_{t+1}) where a planner knows V* (ALFWorld fast engine)
    policy_value: float | None = None  # V^pi(s_t) estimated by Monte-Carlo continuations (scpo.rollout.branches)
    exact_value: float | None = None  # P(win from s_t within the steps left | pi), exact (scpo.rollout.exact_values)
    critic_value: float | None = None  # V(s_t) of a learned critic before it trained on this step (scpo.train.critic)
    state_description: str | None = None  # the env's description of the state acted on (info "state_description")
    next_state_description: str | None = None  # ... and of the state the step led to
    trained_advantage: float | None = None  # the advantage a trainer updated this step with (imported runs)


@dataclass
class Trajectory:
    """One episode of one task. `index` is its position in the group (0..N-1)."""

    task_id: str
    seed: int
    index: int
    steps: list[Step]
    won: bool = False
    task_score: float = 0.0
    task_type: str = ""
    env_name: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def group_uid(self) -> str:
        return stable_uid("group", self.env_name, self.task_id, self.seed)

    @property
    def traj_uid(self) -> str:
        return stable_uid("traj", self.env_name, self.task_id, self.seed, self.index)

    @property
    def episode_return(self) -> float:
        """R_i: the sum of environment rewards."""
        return float(sum(s.reward for s in self.steps))

    def __len__(self) -> int:
        return len(self.steps)


_STR_COLUMNS = (
    "observation",
    "action",
    "next_observation",
    "response",
    "group_uid",
    "traj_uid",
    "task_id",
    "task_type",
    "env_name",
)
_NUM_COLUMNS = {
    "group_id": np.int64,
    "traj_id": np.int64,
    "step": np.int64,
    "traj_len": np.int64,
    "seed": np.int64,
    "reward": np.float64,
    "episode_return": np.float64,
    "task_score": np.float64,
    "valid": np.bool_,
    "done": np.bool_,
    "won": np.bool_,
}
# columns a batch may lack (None when absent, in memory and in a file): name -> dtype
_OPTIONAL_COLUMNS = {
    "oracle_progress": np.float64,
    "policy_value": np.float64,
    "exact_value": np.float64,
    "critic_value": np.float64,
    "state_description": object,
    "next_state_description": object,
    "trained_advantage": np.float64,
}
# the policy's view of each step (ragged, object arrays), present when the rollouts came from a policy: name -> what
# each row holds (or None): a str, a float, a list of ints, a list of int lists, a list of floats
_POLICY_COLUMNS = {
    "prompt": "str",
    "prompt_ids": "ints",
    "response_ids": "ints",
    "candidate_ids": "int_lists",
    "choice_logprob": "float",
    "sampler_logprobs": "floats",
}


@dataclass
class RolloutBatch:
    """Columnar view of many trajectories: one row per step, every column a numpy array of length `n_rows`.

    Columns
    -------
    group_id, traj_id : int64   dense codes (0..G-1, 0..N_total-1) in order of first appearance; rows of one trajectory
                                are contiguous and ordered by `step`.
    step              : int64   t, 0-based position in the trajectory.
    traj_len          : int64   T_i of the row's trajectory.
    reward            : float64 r_t, the environment reward of this step.
    episode_return    : float64 R_i of the row's trajectory (repeated on each of its rows).
    task_score        : float64 the task's raw score in [0, 1] (WebShop), repeated per row.
    valid, done, won  : bool
    observation, action, next_observation, response : object (str)
    group_uid, traj_uid, task_id, task_type, env_name : object (str), deterministic ids and labels
    seed              : int64
    oracle_progress   : float64 or None (optional) q_t = V*(s_t) - V*(s_{t+1}) from an optimal planner with full
                        knowledge (scpo.envs.alfworld.planner); None when the rollouts carry no planner labels
    policy_value      : float64 or None (optional) V^pi(s_t), the mean return of Monte-Carlo continuations of the
                        policy from the state acted on (scpo.rollout.branches); None when not estimated
    exact_value       : float64 or None (optional) V^pi_t(s_t), the probability that the policy wins from the state
                        acted on within the steps left, by dynamic programming over the enumerated states
                        (scpo.rollout.exact_values); None where the states cannot be enumerated
    critic_value      : float64 or None (optional) V(s_t) of the run's learned critic (PPO: scpo.train.critic), as
                        it was before it trained on this batch; None without a critic
    prompt            : object (str) or None (optional) the text the policy saw
    prompt_ids, response_ids : object (list[int]) or None (optional) its tokens; the answer's tokens (empty: no answer)
    candidate_ids     : object (list[list[int]] per row, None where the answer was generated freely) or None
    choice_logprob    : object (float per row, None where the answer was generated freely) or None: the sampler's
                        log pi(k | x) of the candidate it drew, at the rollout temperature
    sampler_logprobs  : object (list[float] per row, None where the engine gives none) or None: the sampler's
                        log-prob of each answer token (vLLM), for `train.rollout_correction`
    state_description, next_state_description : object (str) or None (optional) the environment's descriptions of
                        the state acted on and of the next one (`info["state_description"]`, `scpo.envs.base`); None
                        when the environment gives none
    trained_advantage : float64 or None (optional) the advantage the run's trainer updated the step with (its mean
                        over the answer's tokens), as saved by an importer (`scpo.importers`); NaN where the
                        answer had no token; None when the rollouts do not carry it
    """

    group_id: np.ndarray
    traj_id: np.ndarray
    step: np.ndarray
    traj_len: np.ndarray
    reward: np.ndarray
    episode_return: np.ndarray
    task_score: np.ndarray
    valid: np.ndarray
    done: np.ndarray
    won: np.ndarray
    seed: np.ndarray
    observation: np.ndarray
    action: np.ndarray
    next_observation: np.ndarray
    response: np.ndarray
    group_uid: np.ndarray
    traj_uid: np.ndarray
    task_id: np.ndarray
    task_type: np.ndarray
    env_name: np.ndarray
    oracle_progress: np.ndarray | None = None
    policy_value: np.ndarray | None = None
    exact_value: np.ndarray | None = None
    critic_value: np.ndarray | None = None
    state_description: np.ndarray | None = None
    next_state_description: np.ndarray | None = None
    trained_advantage: np.ndarray | None = None
    prompt: np.ndarray | None = None
    prompt_ids: np.ndarray | None = None
    response_ids: np.ndarray | None = None
    candidate_ids: np.ndarray | None = None
    choice_logprob: np.ndarray | None = None
    sampler_logprobs: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.step)
        for name in (*_NUM_COLUMNS, *_STR_COLUMNS):
            col = getattr(self, name)
            if len(col) != n:
                raise ValueError(f"RolloutBatch column {name!r} has {len(col)} rows, expected {n} (rows of 'step')")
        for name, dtype in _OPTIONAL_COLUMNS.items():
            col = getattr(self, name)
            if col is not None:
                col = np.asarray(col, dtype=dtype)
                if len(col) != n:
                    raise ValueError(f"RolloutBatch column {name!r} has {len(col)} rows, expected {n} (rows of 'step')")
                setattr(self, name, col)
        for name in _POLICY_COLUMNS:
            col = getattr(self, name)
            if col is not None:
                if len(col) != n:
                    raise ValueError(f"RolloutBatch column {name!r} has {len(col)} rows, expected {n} (rows of 'step')")
                setattr(self, name, _object_column(col))

    # ---------------------------------------------------------------- construction
    @classmethod
    def from_trajectories(cls, trajectories: Sequence[Trajectory]) -> RolloutBatch:
        """Flatten trajectories into rows. Group codes follow first appearance of (env_name, task_id, seed)."""
        cols: dict[str, list] = {k: [] for k in (*_NUM_COLUMNS, *_STR_COLUMNS)}
        optional: dict[str, list] = {k: [] for k in _OPTIONAL_COLUMNS}
        policy_view: dict[str, list] = {k: [] for k in _POLICY_COLUMNS}
        group_codes: dict[str, int] = {}
        for t_code, traj in enumerate(trajectories):
            if not traj.steps:
                raise ValueError(f"trajectory {traj.traj_uid} (task {traj.task_id!r}, index {traj.index}) has no steps")
            g_uid, t_uid = traj.group_uid, traj.traj_uid  # content hashes: once per trajectory
            g_code = group_codes.setdefault(g_uid, len(group_codes))
            ret = traj.episode_return
            for t, s in enumerate(traj.steps):
                cols["group_id"].append(g_code)
                cols["traj_id"].append(t_code)
                cols["step"].append(t)
                cols["traj_len"].append(len(traj.steps))
                cols["seed"].append(traj.seed)
                cols["reward"].append(s.reward)
                cols["episode_return"].append(ret)
                cols["task_score"].append(traj.task_score)
                cols["valid"].append(s.valid)
                cols["done"].append(s.done)
                cols["won"].append(traj.won)
                cols["observation"].append(s.observation)
                cols["action"].append(s.action)
                cols["next_observation"].append(s.next_observation)
                cols["response"].append(s.response)
                cols["group_uid"].append(g_uid)
                cols["traj_uid"].append(t_uid)
                cols["task_id"].append(traj.task_id)
                cols["task_type"].append(traj.task_type)
                cols["env_name"].append(traj.env_name)
                for name, values in optional.items():
                    values.append(getattr(s, name))
                for k in _POLICY_COLUMNS:
                    policy_view[k].append(getattr(s, k))
        return cls(
            **_to_arrays(cols),
            **{k: _optional_column(k, v) for k, v in optional.items()},
            **_policy_view(policy_view),
        )

    @classmethod
    def from_columns(cls, **columns: Iterable) -> RolloutBatch:
        """Build from plain columns (tests, synthetic batches). Required: group_id, traj_id, step, reward.

        Missing columns get defaults: valid/done True-ish from position, strings empty, episode_return = per-trajectory
        sum. Rows must be grouped by trajectory and ordered by step.
        """
        required = ("group_id", "traj_id", "step", "reward")
        missing = [k for k in required if k not in columns]
        if missing:
            raise ValueError(f"RolloutBatch.from_columns needs columns {missing}")
        known = (*_NUM_COLUMNS, *_STR_COLUMNS, *_OPTIONAL_COLUMNS, *_POLICY_COLUMNS)
        unknown = set(columns) - set(known)
        if unknown:
            raise ValueError(f"unknown RolloutBatch columns {sorted(unknown)}; known: {sorted(known)}")
        optional = {k: columns[k] for k in (*_OPTIONAL_COLUMNS, *_POLICY_COLUMNS) if columns.get(k) is not None}
        cols = {k: list(v) for k, v in columns.items() if k not in (*_OPTIONAL_COLUMNS, *_POLICY_COLUMNS)}
        n = len(cols["step"])
        traj = np.asarray(cols["traj_id"], dtype=np.int64)
        reward = np.asarray(cols["reward"], dtype=np.float64)
        uniq, inverse, counts = np.unique(traj, return_inverse=True, return_counts=True)
        if "episode_return" not in cols:
            cols["episode_return"] = np.bincount(inverse, weights=reward, minlength=len(uniq))[inverse]
        if "traj_len" not in cols:
            cols["traj_len"] = counts[inverse]
        if "done" not in cols:
            cols["done"] = np.asarray(cols["step"]) == np.asarray(cols["traj_len"]) - 1
        defaults = {"task_score": 0.0, "valid": True, "won": None, "seed": 0}
        for k, v in defaults.items():
            if k not in cols:
                cols[k] = (np.asarray(cols["episode_return"]) > 0) if k == "won" else [v] * n
        for k in _STR_COLUMNS:
            if k not in cols:
                if k == "group_uid":
                    cols[k] = [f"g{g}" for g in cols["group_id"]]
                elif k == "traj_uid":
                    cols[k] = [f"t{t}" for t in cols["traj_id"]]
                else:
                    cols[k] = [""] * n
        return cls(**_to_arrays(cols), **optional)

    # ---------------------------------------------------------------- views
    @property
    def n_rows(self) -> int:
        return len(self.step)

    @property
    def q(self) -> np.ndarray | None:
        """The oracle progress column (`oracle_progress`) under its short name."""
        return self.oracle_progress

    def __len__(self) -> int:
        return self.n_rows

    @property
    def env(self) -> str | None:
        """The environment the rollouts came from (the `env_name` column), None when it is empty or mixed."""
        names = {str(n) for n in np.unique(self.env_name)} - {""} if self.n_rows else set()
        return names.pop() if len(names) == 1 else None

    @property
    def n_groups(self) -> int:
        return len(np.unique(self.group_id))

    @property
    def n_trajectories(self) -> int:
        return len(np.unique(self.traj_id))

    def columns(self) -> dict[str, np.ndarray]:
        """Every column, the optional ones only when present."""
        out = {k: getattr(self, k) for k in (*_NUM_COLUMNS, *_STR_COLUMNS)}
        out.update(
            {k: getattr(self, k) for k in (*_OPTIONAL_COLUMNS, *_POLICY_COLUMNS) if getattr(self, k) is not None}
        )
        return out

    @property
    def has_prompts(self) -> bool:
        """Whether the batch carries the prompt text of every step."""
        return self.prompt is not None

    @property
    def has_tokens(self) -> bool:
        """Whether the batch carries every step's prompt and answer token ids (rollouts of a policy)."""
        return self.prompt_ids is not None and self.response_ids is not None

    def trajectory_rows(self) -> list[np.ndarray]:
        """The row indices of each trajectory in step order, by trajectory code (`rows_by_trajectory`; in a batch
        that keeps the column invariant, consecutive runs of rows)."""
        return rows_by_trajectory(self.traj_id, self.step)

    def final_observation(self) -> np.ndarray:
        """Per row, the last next_observation of its trajectory (object array of str)."""
        last = np.r_[np.flatnonzero(np.diff(self.traj_id)), self.n_rows - 1]
        per_traj = self.next_observation[last]
        return per_traj[np.repeat(np.arange(len(last)), np.diff(np.r_[-1, last]))]

    def with_column(self, name: str, values) -> RolloutBatch:
        """A copy with the optional column `name` (e.g. oracle_progress, policy_value) set to `values`."""
        if name not in _OPTIONAL_COLUMNS:
            raise ValueError(f"{name!r} is not an optional column; those are {', '.join(_OPTIONAL_COLUMNS)}")
        return RolloutBatch(**{**self.columns(), name: np.asarray(values, dtype=_OPTIONAL_COLUMNS[name])})

    def select(self, mask: np.ndarray) -> RolloutBatch:
        """Rows where `mask` is True (keep whole trajectories if you want valid credit)."""
        return RolloutBatch(**{k: v[mask] for k, v in self.columns().items()})

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame(self.columns())

    # ---------------------------------------------------------------- persistence
    def to_parquet(self, path: str | Path) -> Path:
        """Write one parquet file (columns as above). Written to a temp name then renamed: never half a file."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        self.to_pandas().to_parquet(tmp, index=False)
        tmp.replace(path)
        return path

    def to_jsonl(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for row in self.to_pandas().to_dict(orient="records"):
                fh.write(json.dumps(row, default=_json_default) + "\n")
        tmp.replace(path)
        return path

    @classmethod
    def read(cls, path: str | Path) -> RolloutBatch:
        """Load a batch saved by `to_parquet` (.parquet) or `to_jsonl` (.jsonl)."""
        import pandas as pd

        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"no rollout file at {path}")
        if path.suffix == ".parquet":
            df = pd.read_parquet(path)
        elif path.suffix == ".jsonl":
            df = pd.read_json(path, lines=True, dtype=False)
        else:
            raise ValueError(f"unknown rollout file type {path.suffix!r} for {path}; expected .parquet or .jsonl")
        missing = [k for k in (*_NUM_COLUMNS, *_STR_COLUMNS) if k not in df.columns]
        if missing:
            raise ValueError(f"{path} is not a saved RolloutBatch: missing columns {missing}")
        optional = {k: df[k].to_numpy(dtype=dtype) for k, dtype in _OPTIONAL_COLUMNS.items() if k in df.columns}
        view = {k: [_from_stored(v, kind) for v in df[k].tolist()] for k, kind in _POLICY_COLUMNS.items() if k in df}
        return cls(
            **_to_arrays({k: df[k].tolist() for k in (*_NUM_COLUMNS, *_STR_COLUMNS)}),
            **optional,
            **view,
        )

    def to_trajectories(self) -> list[Trajectory]:
        """Inverse of `from_trajectories` for the persisted fields (admissible sets and extras are not kept)."""
        out: list[Trajectory] = []
        for rows in self.trajectory_rows():
            r0 = rows[0]
            q, v, sd, nsd = self.oracle_progress, self.policy_value, self.state_description, self.next_state_description
            trained = self.trained_advantage
            steps = [
                Step(
                    observation=self.observation[r],
                    action=self.action[r],
                    reward=float(self.reward[r]),
                    next_observation=self.next_observation[r],
                    valid=bool(self.valid[r]),
                    done=bool(self.done[r]),
                    response=self.response[r],
                    oracle_progress=None if q is None else float(q[r]),
                    policy_value=None if v is None else float(v[r]),
                    exact_value=None if self.exact_value is None else float(self.exact_value[r]),
                    critic_value=None if self.critic_value is None else float(self.critic_value[r]),
                    state_description=None if sd is None else str(sd[r]),
                    next_state_description=None if nsd is None else str(nsd[r]),
                    trained_advantage=None if trained is None else float(trained[r]),
                    **{k: getattr(self, k)[r] for k in _POLICY_COLUMNS if getattr(self, k) is not None},
                )
                for r in rows
            ]
            out.append(
                Trajectory(
                    task_id=self.task_id[r0],
                    seed=int(self.seed[r0]),
                    index=0,
                    steps=steps,
                    won=bool(self.won[r0]),
                    task_score=float(self.task_score[r0]),
                    task_type=self.task_type[r0],
                    env_name=self.env_name[r0],
                )
            )
        # index = position within the group, in order of trajectory code
        seen: dict[tuple, int] = {}
        for traj in out:
            key = (traj.env_name, traj.task_id, traj.seed)
            traj.index = seen.get(key, 0)
            seen[key] = traj.index + 1
        return out


def _to_arrays(cols: dict[str, list]) -> dict[str, np.ndarray]:
    out = {}
    for k, v in cols.items():
        if k in _NUM_COLUMNS:
            out[k] = np.asarray(v, dtype=_NUM_COLUMNS[k])
        else:
            arr = np.empty(len(v), dtype=object)
            arr[:] = [str(x) for x in v]
            out[k] = arr
    return out


def _optional_column(name: str, values: list) -> np.ndarray | None:
    """An optional column from one value per step: None when no step has one; every step or none must."""
    given = [v is not None for v in values]
    if not any(given):
        return None
    if not all(given):
        raise ValueError(f"{given.count(False)} of {len(values)} steps lack {name}; label all or none")
    if _OPTIONAL_COLUMNS[name] is object:
        out = np.empty(len(values), dtype=object)
        out[:] = [str(v) for v in values]
        return out
    return np.asarray(values, dtype=_OPTIONAL_COLUMNS[name])


def _object_column(values) -> np.ndarray:
    """A ragged column as a 1-D object array (one Python value per row, however nested)."""
    if isinstance(values, np.ndarray) and values.dtype == object and values.ndim == 1:
        return values
    arr = np.empty(len(values), dtype=object)
    arr[:] = list(values)
    return arr


def _policy_view(view: dict[str, list]) -> dict[str, np.ndarray | None]:
    """The policy columns of `from_trajectories`: `prompt` when every step has one; the token ids when every step has
    them, with candidate_ids (None on the rows of freely generated answers); else None."""
    out: dict[str, np.ndarray | None] = dict.fromkeys(_POLICY_COLUMNS)
    if view["prompt"] and all(view["prompt"]):
        out["prompt"] = _object_column(view["prompt"])
    if view["prompt_ids"] and all(v is not None for k in ("prompt_ids", "response_ids") for v in view[k]):
        keys = ("prompt_ids", "response_ids", "candidate_ids", "choice_logprob", "sampler_logprobs")
        out.update({k: _object_column(view[k]) for k in keys})
    return out


def _from_stored(value, kind: str):
    """A ragged value read back from parquet / JSON (numpy arrays, lists or None) as plain Python values."""
    if value is None:
        return None
    if kind in ("str", "float"):
        return None if isinstance(value, float) and value != value else value  # parquet reads a missing float as NaN
    if kind == "ints":
        return [int(x) for x in value]
    if kind == "floats":
        return [float(x) for x in value]
    return [[int(x) for x in c] for c in value]


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    if hasattr(o, "__dict__"):
        return asdict(o)
    raise TypeError(f"cannot serialise {type(o).__name__}")

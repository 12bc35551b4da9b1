"""A batch of text environments stepped together (the rollout collector's view of many envs).

Generic over environment packages: it holds any objects with `reset() -> (obs, info)` and
`step(action) -> (obs, reward, done, info)`. Environments that finished are skipped: their slot in `step` takes `None`
and returns `None`, so the caller keeps one list index per env for the whole episode.

    vec = VectorEnv.from_tasks(scpo.envs.alfworld.make_env, task_ids, repeats=8, max_steps=50)
    first = vec.reset_all()                       # [(obs, info), ...]
    results = vec.step(["go to desk 1", ...])     # [(obs, reward, done, info) | None, ...]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["VectorEnv"]

StepResult = tuple[str, float, bool, dict[str, Any]]


class VectorEnv:
    """Many envs, reset together and stepped with one action (or None) each."""

    def __init__(self, envs: Sequence[Any]):
        if not envs:
            raise ValueError("VectorEnv needs at least one environment")
        self.envs = list(envs)
        self.dones = [True] * len(self.envs)

    @classmethod
    def from_tasks(
        cls, make_env: Callable[..., Any], task_ids: Sequence[str], repeats: int = 1, **options: Any
    ) -> VectorEnv:
        """`repeats` copies of each task's env, task-major: [t0, t0, ..., t1, t1, ...] (a GRPO group is contiguous)."""
        if repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {repeats}")
        return cls([make_env(t, **options) for t in task_ids for _ in range(repeats)])

    def __len__(self) -> int:
        return len(self.envs)

    @property
    def all_done(self) -> bool:
        return all(self.dones)

    def reset_all(self) -> list[tuple[str, dict[str, Any]]]:
        out = [env.reset() for env in self.envs]
        self.dones = [False] * len(self.envs)
        return out

    def step(self, actions: Sequence[str | None]) -> list[StepResult | None]:
        """One step of every env that is still running; `actions[i]` must be None exactly when env i is done."""
        if len(actions) != len(self.envs):
            raise ValueError(f"got {len(actions)} actions for {len(self.envs)} envs")
        for i, action in enumerate(actions):  # validate all before stepping any, so a bad call changes nothing
            if action is None and not self.dones[i]:
                raise ValueError(f"env {i} is still running but got action None")
            if action is not None and self.dones[i]:
                raise ValueError(f"env {i} is done (or not reset) but got action {action!r}; pass None")
        results: list[StepResult | None] = []
        for i, (env, action) in enumerate(zip(self.envs, actions)):
            if action is None:
                results.append(None)
                continue
            obs, reward, done, info = env.step(action)
            self.dones[i] = bool(done)
            results.append((obs, reward, bool(done), info))
        return results

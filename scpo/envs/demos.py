"""Expert demonstrations: each task's expert actions (ALFWorld's walkthrough, WebShop's expert policy) replayed from
reset through the environment package, every step recorded as the prompt the collector would build and the answer
`<action>a</action>` (the behaviour-cloning warm start's data; the tiny policy's tokenizer corpus)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from scpo.envs.base import EnvPackage
from scpo.envs.prompting import action_answer

__all__ = ["Demo", "demo_tasks", "expert_demonstrations"]


@dataclass
class Demo:
    task_id: str
    prompt: str
    response: str


def demo_tasks(split: Sequence[str], n_demos: int, seed: int) -> list[str]:
    """The `n_demos` tasks of `split` whose demonstrations a run uses, drawn with `seed`, in the split's order."""
    rng = np.random.default_rng([seed, 7])
    return [split[i] for i in sorted(rng.permutation(len(split))[:n_demos])]


def expert_demonstrations(
    env_pkg: EnvPackage,
    task_ids: Sequence[str],
    *,
    data_root: str = "data",
    max_steps: int | None = None,
    history_length: int = 2,
    env_options: dict | None = None,
    progress: bool = True,
) -> tuple[list[Demo], dict[str, float]]:
    """Replay each task's expert actions in the environment built with `env_options` (its package's factory options,
    e.g. ALFWorld's `engine`); keep the steps of replays that win. Returns (demos, stats)."""
    demos: list[Demo] = []
    won = 0
    for task_id in tqdm(task_ids, desc="expert demos", disable=not progress, leave=False):
        actions = env_pkg.expert_actions(task_id, data_root=data_root)
        env = env_pkg.make_env(
            task_id, data_root=data_root, max_steps=max(max_steps or 0, len(actions) + 1), **(env_options or {})
        )
        obs, info = env.reset()
        goal, history, steps = str(info.get("goal", "")), [], []
        for t, action in enumerate(actions):
            prompt = env_pkg.build_prompt(
                goal, obs, list(info.get("admissible_commands", [])), history, t, history_length=history_length
            )
            steps.append(Demo(task_id, prompt, action_answer(action)))
            history.append((obs, action))
            obs, _, done, info = env.step(action)
            if done:
                break
        if info.get("won"):
            won += 1
            demos.extend(steps[:max_steps] if max_steps else steps)
    return demos, {"n_tasks": float(len(task_ids)), "n_won": float(won), "n_steps": float(len(demos))}

"""The multi-turn collector: N rollouts per task (same seed), every live environment of the iteration batched through
one generation call per turn; the environments are held by `scpo.envs.vector.VectorEnv` (None for finished ones).

    per turn: prompt_i = build_prompt(goal, obs_i, admissible_i, history_i[-H:], t) -> engine.generate(all live prompts)
              -> (action_i, valid_i) = project_action(text_i, admissible_i) -> env_i.step(action_i)

An environment that describes its states (`info["state_description"]`, `scpo.envs.base.STATE_DESCRIPTION`) gets
that text recorded on each step, for the state acted on and for the next one.

An invalid answer (no tags, garbage, very long text) is never an error: `project_action` maps it to a string the env
treats as a no-op, the step is recorded with `valid=False`, and the credit estimators subtract the invalid-action
penalty.

Prompts and validity follow the engine's path (`prompt_style`): an engine that generates free text (vLLM, or the
transformers engine with `rollout.action_choice: generate`) gets verl-agent's own templates and projection
(`style="verl_agent"`, in the environments that have it: ALFWorld, WebShop); the admissible-choice engine of the tiny
CPU policy keeps this package's ("scpo").
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from tqdm.auto import tqdm

from scpo.batch import Step, Trajectory
from scpo.envs.base import STATE_DESCRIPTION, EnvPackage
from scpo.envs.vector import VectorEnv
from scpo.rollout.generation import Generation, GenerationEngine

__all__ = ["RolloutTiming", "collect_rollouts", "generate_turn", "prompt_style", "style_kwargs"]


def prompt_style(env_pkg: EnvPackage, engine: GenerationEngine) -> str:
    """The prompt style of `engine`'s path (its `prompt_style`, "scpo" when it has none) where `env_pkg`'s
    `build_prompt` takes one, else "scpo"."""
    import inspect

    style = getattr(engine, "prompt_style", "scpo")
    return style if "style" in inspect.signature(env_pkg.build_prompt).parameters else "scpo"


def style_kwargs(style: str) -> dict:
    """The keyword `build_prompt` / `project_action` get: none for "scpo" (every environment's default)."""
    return {} if style == "scpo" else {"style": style}


@dataclass
class RolloutTiming:
    """Wall seconds spent in environments (reset + step) and in generation, and the number of generated answers."""

    env_s: float = 0.0
    gen_s: float = 0.0
    n_generations: int = 0
    n_turns: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Episode:
    task_id: str
    index: int
    obs: str = ""
    info: dict = field(default_factory=dict)
    goal: str = ""
    history: list[tuple[str, str]] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    done: bool = False


def collect_rollouts(
    env_pkg: EnvPackage,
    task_ids: Sequence[str],
    group_size: int,
    engine: GenerationEngine,
    *,
    env_name: str,
    seed: int = 0,
    data_root: str = "data",
    max_steps: int | None = None,
    history_length: int = 2,
    temperature: float = 1.0,
    top_p: float = 1.0,
    env_options: dict | None = None,
    progress: bool = True,
    desc: str = "rollouts",
) -> tuple[list[Trajectory], RolloutTiming]:
    """Play `group_size` episodes of every task in `task_ids`; returns trajectories (task-major, index-minor) +
    timings."""
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    timing = RolloutTiming()
    t0 = time.perf_counter()
    make = partial(env_pkg.make_env, data_root=data_root, max_steps=max_steps, **(env_options or {}))
    vec = VectorEnv.from_tasks(make, task_ids, repeats=group_size)
    episodes = [_Episode(task_id=t, index=i) for t in task_ids for i in range(group_size)]
    for ep, (obs, info) in zip(episodes, vec.reset_all()):
        ep.obs, ep.info, ep.goal = obs, info, str(info.get("goal", ""))
    timing.env_s += time.perf_counter() - t0
    limit = max_steps or max(int(getattr(env, "max_steps", 50)) for env in vec.envs)
    styled = style_kwargs(prompt_style(env_pkg, engine))

    # one bar unit per (episode, turn) slot: a live episode's step advances it by 1, an episode ending early adds
    # its unplayed turns, so the bar moves every turn and ends exactly at its total, also when every episode runs to
    # the step limit
    bar = tqdm(total=len(episodes) * limit, desc=desc, unit="step", disable=not progress, leave=False)
    bar.set_postfix_str(f"0/{len(episodes)} episodes done", refresh=False)
    for turn in range(limit):
        live = [k for k, ep in enumerate(episodes) if not ep.done]
        if not live:
            break
        timing.n_turns += 1
        prompts, gens = generate_turn(
            env_pkg,
            engine,
            [episodes[k] for k in live],
            [turn] * len(live),
            history_length=history_length,
            temperature=temperature,
            top_p=top_p,
            timing=timing,
        )

        t0 = time.perf_counter()
        actions: list[str | None] = [None] * len(episodes)
        valid: dict[int, bool] = {}
        for k, gen in zip(live, gens):
            actions[k], valid[k] = env_pkg.project_action(
                gen.text, list(episodes[k].info.get("admissible_commands", [])), **styled
            )
        results = vec.step(actions)
        for k, prompt, gen in zip(live, prompts, gens):
            ep = episodes[k]
            obs, reward, done, info = results[k]
            done = bool(done) or turn + 1 >= limit
            ep.steps.append(
                Step(
                    observation=ep.obs,
                    action=actions[k],
                    reward=float(reward),
                    next_observation=obs,
                    valid=bool(valid[k]),
                    done=done,
                    response=gen.text,
                    prompt=prompt,
                    admissible=tuple(ep.info.get("admissible_commands", [])),
                    prompt_ids=list(gen.prompt_ids),
                    response_ids=list(gen.response_ids),
                    candidate_ids=_candidates(gen),
                    choice_logprob=getattr(gen, "choice_logprob", None),
                    sampler_logprobs=_sampler_logprobs(gen),
                    state_description=ep.info.get(STATE_DESCRIPTION),
                    next_state_description=info.get(STATE_DESCRIPTION),
                )
            )
            ep.history.append((ep.obs, actions[k]))
            ep.obs, ep.info, ep.done = obs, info, done
        finished = [k for k in live if episodes[k].done]
        bar.set_postfix_str(f"{sum(ep.done for ep in episodes)}/{len(episodes)} episodes done", refresh=False)
        bar.update(len(live) + len(finished) * (limit - turn - 1))
        timing.env_s += time.perf_counter() - t0
    bar.update(bar.total - bar.n)  # episodes cut by the step limit: nothing left to play
    bar.refresh()
    bar.close()

    trajectories = []
    for ep in episodes:
        info = ep.info
        task_type = info["task_type"] if "task_type" in info else env_pkg.task_type(ep.task_id, data_root=data_root)
        trajectories.append(
            Trajectory(
                task_id=ep.task_id,
                seed=seed,
                index=ep.index,
                steps=ep.steps,
                won=bool(info.get("won", False)),
                task_score=float(info.get("task_score", 0.0)),
                task_type=str(task_type),
                env_name=env_name,
            )
        )
    return trajectories, timing


def generate_turn(
    env_pkg: EnvPackage,
    engine: GenerationEngine,
    players: Sequence[Any],
    turns: Sequence[int],
    *,
    history_length: int,
    temperature: float,
    top_p: float,
    timing: RolloutTiming,
) -> tuple[list[str], list[Generation]]:
    """One turn of every live episode in `players` (objects with goal, obs, info and history), each at its own turn
    number -> (prompts, generations), all in one generation call; its seconds and answers are added to `timing`. The
    collector's episodes and the Monte-Carlo branches (`scpo.rollout.branches`) both play through it."""
    admissible = [list(p.info.get("admissible_commands", [])) for p in players]
    styled = style_kwargs(prompt_style(env_pkg, engine))
    prompts = [
        env_pkg.build_prompt(p.goal, p.obs, adm, p.history, turn, history_length=history_length, **styled)
        for p, adm, turn in zip(players, admissible, turns)
    ]
    t0 = time.perf_counter()
    # what an admissible-choice engine chooses among: the env's `choice_commands` when it has them (WebShop: the
    # search placeholder replaced by candidate searches), else the admissible commands
    choices = [list(p.info.get("choice_commands") or adm) for p, adm in zip(players, admissible)]
    gens = engine.generate(prompts, temperature=temperature, top_p=top_p, admissible=choices)
    timing.gen_s += time.perf_counter() - t0
    timing.n_generations += len(gens)
    return prompts, gens


def _sampler_logprobs(gen: Generation) -> list[float] | None:
    """The sampler's log-prob of each answer token, when the engine gives them (vLLM)."""
    lps = getattr(gen, "sampler_logprobs", None)
    return None if lps is None else [float(x) for x in lps]


def _candidates(gen: Generation) -> list[list[int]] | None:
    """The ids of every answer an admissible-choice sampler chose among (None for a freely generated answer)."""
    cands = getattr(gen, "candidate_ids", None)
    return None if cands is None else [list(c) for c in cands]

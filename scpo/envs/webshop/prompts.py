"""verl-agent style WebShop prompts and the projection from model text to a WebShop action.

The templates follow verl-agent's `WEBSHOP_TEMPLATE_NO_HIS` / `WEBSHOP_TEMPLATE` (agent_system/environments/prompts/
webshop.py): the task, the step count, the last `history_length` (observation, action) pairs, the current observation,
the admissible actions one per line, and the `<think>...</think><action>...</action>` answer format. As verl-agent does,
the observation's "[WebShop [SEP] ]Instruction: [SEP] <goal> [SEP]" header is dropped from the prompt (the task line has
it).

`style="verl_agent"` (free-text generation: the gpu profile) is verl-agent's text and rules exactly: its templates
verbatim ("e-commerce environment" with its non-breaking hyphen), each page part after the goal quoted ('Back to Search'
[SEP] 'Page 1 ...': `format_obs`), every admissible action on a line of its own ending in a comma, a prompt over 13,000
characters shown without its history, and its projection (`scpo.envs.prompting.verl_agent_projection`: an answer
without `<think>...</think>` is invalid, a missing action tag leaves the answer's last 20 characters as the action).
"""

from __future__ import annotations

import re

from scpo.envs.prompting import (
    PROMPT_STYLES,
    history_items,
    history_window,
    project_answer,
    template_phrases,
    verl_agent_projection,
)
from scpo.envs.webshop.env import SEARCH_TEMPLATE

__all__ = [
    "PROMPT_NO_HISTORY",
    "PROMPT_WITH_HISTORY",
    "HISTORY_ITEM",
    "ANSWER_FORMAT",
    "PROMPT_PHRASES",
    "build_prompt",
    "project_action",
    "strip_header",
    "MAX_ACTION_CHARS",
    "VERL_AGENT_NO_HISTORY",
    "VERL_AGENT_WITH_HISTORY",
    "verl_agent_observation",
]

ANSWER_FORMAT = (
    "Now it's your turn to take one action for the current step.\n"
    "You should first reason step-by-step about the current situation, then think carefully which admissible action "
    "best advances the shopping goal. This reasoning process MUST be enclosed within <think> </think> tags.\n"
    "Once you've finished your reasoning, you should choose an admissible action for current step and present it "
    "within <action> </action> tags."
)

PROMPT_NO_HISTORY = (
    "You are an expert autonomous agent operating in the WebShop e-commerce platform.\n"
    "Your task is to: {goal}.\n"
    "Your current observation is: {observation}.\n"
    "Your admissible actions of the current situation are: \n[\n{admissible}\n].\n\n" + ANSWER_FORMAT
)

PROMPT_WITH_HISTORY = (
    "You are an expert autonomous agent operating in the WebShop e-commerce platform.\n"
    "Your task is to: {goal}.\n"
    "Prior to this step, you have already taken {step} step(s). Below are the most recent {n_history} observations "
    "and the corresponding actions you took: {history}\n"
    "You are now at step {current_step} and your current observation is: {observation}.\n"
    "Your admissible actions of the current situation are: \n[\n{admissible}\n].\n\n" + ANSWER_FORMAT
)

HISTORY_ITEM = "\n[Observation {index}: '{observation}', Action {index}: '{action}']"

_VERL_AGENT_ANSWER = (
    "Now it's your turn to take one action for the current step.\n"
    "You should first reason step-by-step about the current situation, then think carefully which admissible action "
    "best advances the shopping goal. This reasoning process MUST be enclosed within <think> </think> tags. \n"
    "Once you've finished your reasoning, you should choose an admissible action for current step and present it "
    "within <action> </action> tags.\n"
)
VERL_AGENT_NO_HISTORY = (
    "\nYou are an expert autonomous agent operating in the WebShop e\u2011commerce environment. \n"
    "Your task is to: {goal}.\n"
    "Your current observation is: {observation}.\n"
    "Your admissible actions of the current situation are: \n[\n{admissible}\n].\n\n" + _VERL_AGENT_ANSWER
)
VERL_AGENT_WITH_HISTORY = (
    "\nYou are an expert autonomous agent operating in the WebShop e\u2011commerce environment.\n"
    "Your task is to: {goal}.\n"
    "Prior to this step, you have already taken {step} step(s). Below are the most recent {n_history} observations "
    "and the corresponding actions you took: {history}\n"
    "You are now at step {current_step} and your current observation is: {observation}.\n"
    "Your admissible actions of the current situation are: \n[\n{admissible}\n].\n\n" + _VERL_AGENT_ANSWER
)
VERL_AGENT_MAX_CHARS = 13_000  # verl-agent: a longer prompt is shown without its history

# the templates' fixed text (the tiny policy's tokenizer keeps each piece as one token)
PROMPT_PHRASES = template_phrases(PROMPT_NO_HISTORY, PROMPT_WITH_HISTORY, HISTORY_ITEM)
MAX_ACTION_CHARS = 300  # a projected action is never longer than this (a search query is free text)
_HEADER = re.compile(r"^(?:WebShop \[SEP\] )?Instruction: \[SEP\] .*? \[SEP\] ", re.DOTALL)
_SEARCH = re.compile(r"^search\[(.+)\]$", re.DOTALL)


def strip_header(observation: str) -> str:
    """Drop the page's '[WebShop [SEP] ]Instruction: [SEP] <goal> [SEP] ' prefix (the search page has 'WebShop')."""
    return _HEADER.sub("", observation, count=1)


def verl_agent_observation(observation: str, goal: str) -> str:
    """verl-agent's `format_obs`: the page's parts after the goal, each quoted, joined by " [SEP] " (the page as it is
    when the goal is not one of its parts)."""
    parts = observation.split(" [SEP] ")
    if goal not in parts:
        return observation
    return " [SEP] ".join(f"'{p}'" for p in parts[parts.index(goal) + 1 :])


def _verl_agent_prompt(goal, observation, admissible, recent, step) -> str:
    shown = "\n".join(f"'{a}'," for a in admissible)
    observation = verl_agent_observation(observation, goal)
    plain = VERL_AGENT_NO_HISTORY.format(goal=goal, observation=observation, admissible=shown)
    if step == 0 or not recent:
        return plain
    # one item per line, the first right after the sentence
    text = history_items(recent, step, HISTORY_ITEM, lambda obs: verl_agent_observation(obs, goal), one_per_line=True)
    prompt = VERL_AGENT_WITH_HISTORY.format(
        goal=goal,
        step=step,
        n_history=len(recent),
        history=text,
        current_step=step + 1,
        observation=observation,
        admissible=shown,
    )
    return plain if len(prompt) > VERL_AGENT_MAX_CHARS else prompt


def build_prompt(
    goal: str,
    observation: str,
    admissible: list[str],
    history: list[tuple[str, str]],
    step: int,
    history_length: int = 2,
    style: str = "scpo",
) -> str:
    """The policy's prompt at `step` (0-based count of steps already taken). `history` holds (observation, action) pairs
    of the earlier steps, oldest first; the last `history_length` of them are shown. `style`: module docstring."""
    recent = history_window(history, history_length)
    if style not in PROMPT_STYLES:
        raise ValueError(f"style={style!r} is not one of {', '.join(PROMPT_STYLES)}")
    if style == "verl_agent":
        return _verl_agent_prompt(goal, observation, admissible, recent, step)
    shown_admissible = ",\n".join(f"'{a}'" for a in admissible)
    observation = strip_header(observation)
    if step == 0 or not recent:
        return PROMPT_NO_HISTORY.format(goal=goal, observation=observation, admissible=shown_admissible)
    text = history_items(recent, step, HISTORY_ITEM, strip_header)
    return PROMPT_WITH_HISTORY.format(
        goal=goal,
        step=step,
        n_history=len(recent),
        history=text,
        current_step=step + 1,
        observation=observation,
        admissible=shown_admissible,
    )


def _admissible(action: str, admissible: list[str]) -> bool:
    if action == SEARCH_TEMPLATE:  # the placeholder itself is not a query
        return False
    if action in admissible:
        return True
    m = _SEARCH.match(action)
    return bool(m and m.group(1).strip()) and SEARCH_TEMPLATE in admissible


def project_action(text: object, admissible: list[str], style: str = "scpo") -> tuple[str, bool]:
    """Model text -> (action, valid). Pure; never raises.

    The action is the content of the last `<action>...</action>` tag, lowercased with whitespace collapsed (as
    verl-agent's webshop_projection). `valid` is True when it is one of the admissible `click[...]` commands, or any
    `search[<query>]` with a non-empty query while the search bar is shown (`search[<your query>]` is admissible).
    Otherwise valid is False and the action (possibly "") is a string the env treats as an inadmissible no-op.
    `style="verl_agent"`: verl-agent's projection instead (module docstring).
    """
    if style == "verl_agent":
        return verl_agent_projection(text, tail=20, reject_cjk=False, max_chars=MAX_ACTION_CHARS)
    return project_answer(text, admissible, MAX_ACTION_CHARS, _admissible)

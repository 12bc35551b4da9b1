"""verl-agent style ALFWorld prompts and the projection from model text to an action.

The templates follow verl-agent's `ALFWORLD_TEMPLATE_NO_HIS` / `ALFWORLD_TEMPLATE` (agent_system/environments/prompts/
alfworld.py): the task, the step count, the last `history_length` (observation, action) pairs, the current observation,
the admissible actions (without "help", as verl-agent does) and the `<think>...</think><action>...</action>` answer
format.

`style="verl_agent"` (free-text generation: the gpu profile) is verl-agent's text and rules exactly: its templates
verbatim (no task line before the first step, whose observation already ends with it), the admissible commands one per
line (joined by "\n "), and its projection (`scpo.envs.prompting.verl_agent_projection`: an answer without
`<think>...</think>` or with CJK characters is invalid, a missing action tag leaves the answer's last 30 characters as
the action, in the history too). `style="scpo"` (the admissible-choice path of the tiny CPU policy) keeps this
package's: the task line always, the commands comma-separated, valid = an admissible action in the last tag.
"""

from __future__ import annotations

from scpo.envs.prompting import (
    PROMPT_STYLES,
    history_items,
    history_window,
    project_answer,
    template_phrases,
    verl_agent_projection,
)

__all__ = [
    "PROMPT_NO_HISTORY",
    "PROMPT_WITH_HISTORY",
    "HISTORY_ITEM",
    "ANSWER_FORMAT",
    "PROMPT_PHRASES",
    "build_prompt",
    "project_action",
    "MAX_ACTION_CHARS",
    "VERL_AGENT_NO_HISTORY",
    "VERL_AGENT_WITH_HISTORY",
]

ANSWER_FORMAT = (
    "Now it's your turn to take an action.\n"
    "You should first reason step-by-step about the current situation. This reasoning process MUST be enclosed within "
    "<think> </think> tags.\n"
    "Once you've finished your reasoning, you should choose an admissible action for current step and present it "
    "within <action> </action> tags."
)

PROMPT_NO_HISTORY = (
    "You are an expert agent operating in the ALFRED Embodied Environment.\n"
    "Your task is to: {goal}\n"
    "Your current observation is: {observation}\n"
    "Your admissible actions of the current situation are: [{admissible}].\n\n" + ANSWER_FORMAT
)

PROMPT_WITH_HISTORY = (
    "You are an expert agent operating in the ALFRED Embodied Environment. Your task is to: {goal}\n"
    "Prior to this step, you have already taken {step} step(s). Below are the most recent {n_history} observations "
    "and the corresponding actions you took: {history}\n"
    "You are now at step {current_step} and your current observation is: {observation}\n"
    "Your admissible actions of the current situation are: [{admissible}].\n\n" + ANSWER_FORMAT
)

HISTORY_ITEM = "\n[Observation {index}: '{observation}', Action {index}: '{action}']"

_VERL_AGENT_ANSWER = (
    "Now it's your turn to take an action.\n"
    "You should first reason step-by-step about the current situation. This reasoning process MUST be enclosed within "
    "<think> </think> tags. \n"
    "Once you've finished your reasoning, you should choose an admissible action for current step and present it "
    "within <action> </action> tags.\n"
)
VERL_AGENT_NO_HISTORY = (
    "\nYou are an expert agent operating in the ALFRED Embodied Environment.\n"
    "Your current observation is: {observation}\n"
    "Your admissible actions of the current situation are: [{admissible}].\n\n" + _VERL_AGENT_ANSWER
)
VERL_AGENT_WITH_HISTORY = (
    "\nYou are an expert agent operating in the ALFRED Embodied Environment. Your task is to: {goal}\n"
    "Prior to this step, you have already taken {step} step(s). Below are the most recent {n_history} observations "
    "and the corresponding actions you took: {history}\n"
    "You are now at step {current_step} and your current observation is: {observation}\n"
    "Your admissible actions of the current situation are: [{admissible}].\n\n" + _VERL_AGENT_ANSWER
)

# the templates' fixed text (the tiny policy's tokenizer keeps each piece as one token)
PROMPT_PHRASES = template_phrases(PROMPT_NO_HISTORY, PROMPT_WITH_HISTORY, HISTORY_ITEM)
MAX_ACTION_CHARS = 200  # a projected action is never longer than this (keeps garbage text from flooding the env)


def _quote(command: str) -> str:
    return "'" + command + "'"


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
    verl = style == "verl_agent"
    shown_admissible = ("\n " if verl else ", ").join(_quote(a) for a in admissible if a != "help")
    if step == 0 or not recent:
        if verl:
            return VERL_AGENT_NO_HISTORY.format(observation=observation, admissible=shown_admissible)
        return PROMPT_NO_HISTORY.format(goal=goal, observation=observation, admissible=shown_admissible)
    text = history_items(recent, step, HISTORY_ITEM, one_per_line=verl)  # verl-agent: one per line
    return (VERL_AGENT_WITH_HISTORY if verl else PROMPT_WITH_HISTORY).format(
        goal=goal,
        step=step,
        n_history=len(recent),
        history=text,
        current_step=step + 1,
        observation=observation,
        admissible=shown_admissible,
    )


def project_action(text: object, admissible: list[str], style: str = "scpo") -> tuple[str, bool]:
    """Model text -> (action, valid). Pure; never raises.

    The action is the content of the last `<action>...</action>` tag, lower-cased with whitespace collapsed (ALFWorld
    commands are lower-case). `valid` is False when the tag is missing or the action is not admissible; the action is
    then still a plain string (at most MAX_ACTION_CHARS) that the env treats as a no-op ("Nothing happens.").
    `style="verl_agent"`: verl-agent's projection instead (module docstring).
    """
    if style == "verl_agent":
        return verl_agent_projection(text, tail=30, reject_cjk=True, max_chars=MAX_ACTION_CHARS)
    return project_answer(text, admissible, MAX_ACTION_CHARS)

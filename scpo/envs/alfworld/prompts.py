"""verl-agent style ALFWorld prompts and the projection from model text to an action.

The templates follow verl-agent's `ALFWORLD_TEMPLATE_NO_HIS` / `ALFWORLD_TEMPLATE` (agent_system/environments/prompts/
alfworld.py): the task, the step count, the last `history_length` (observation, action) pairs, the current observation,
the admissible actions (without "help", as verl-agent does) and the `<think>...</think><action>...</action>` answer
format.
"""

from __future__ import annotations

from scpo.envs.prompting import history_items, history_window, project_answer, template_phrases

__all__ = [
    "PROMPT_NO_HISTORY",
    "PROMPT_WITH_HISTORY",
    "HISTORY_ITEM",
    "ANSWER_FORMAT",
    "PROMPT_PHRASES",
    "build_prompt",
    "project_action",
    "MAX_ACTION_CHARS",
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
) -> str:
    """The policy's prompt at `step` (0-based count of steps already taken). `history` holds (observation, action) pairs
    of the earlier steps, oldest first; the last `history_length` of them are shown."""
    recent = history_window(history, history_length)
    shown_admissible = ", ".join(_quote(a) for a in admissible if a != "help")
    if step == 0 or not recent:
        return PROMPT_NO_HISTORY.format(goal=goal, observation=observation, admissible=shown_admissible)
    text = history_items(recent, step, HISTORY_ITEM)
    return PROMPT_WITH_HISTORY.format(
        goal=goal,
        step=step,
        n_history=len(recent),
        history=text,
        current_step=step + 1,
        observation=observation,
        admissible=shown_admissible,
    )


def project_action(text: object, admissible: list[str]) -> tuple[str, bool]:
    """Model text -> (action, valid). Pure; never raises.

    The action is the content of the last `<action>...</action>` tag, lower-cased with whitespace collapsed (ALFWorld
    commands are lower-case). `valid` is False when the tag is missing or the action is not admissible; the action is
    then still a plain string (at most MAX_ACTION_CHARS) that the env treats as a no-op ("Nothing happens.").
    """
    return project_answer(text, admissible, MAX_ACTION_CHARS)

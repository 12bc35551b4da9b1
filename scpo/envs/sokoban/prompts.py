"""verl-agent's Sokoban prompts and the projection from model text to a move.

The templates are verl-agent's `SOKOBAN_TEMPLATE_NO_HIS` (no history: the first step, or `env.history_length: 0`)
and `SOKOBAN_TEMPLATE` (agent_system/environments/prompts/sokoban.py), word for word, its spelling included; the
history is its `SimpleMemory.fetch` text, `[Observation k: '<grid>', Action k: '<Move>']` lines, the move capitalised
as its `SokobanEnvironmentManager.ACTION_LOOKUP` names it. The admissible moves are listed from the environment's
`admissible_commands` in the quoted-list form the template hard-codes (`["up", "down", "left", "right"]`). With
`history_length: 0` the prompt is a function of the grid alone, which is the whole state.

The projection is verl-agent's `sokoban_projection`: the text of the `<action>` tag, lower-cased, names the first of
up / down / left / right / still it contains (`"<action>Push it up</action>"` -> up). Two deliberate differences
(docs/environments.md, "Sokoban"): the tag is read by the suite's one reader of the answer format (the last tag;
verl-agent takes the first), and `<think>` tags are not required (the suite's answers may be the action alone). An
answer that names no move, or names "still", plays NO_OP and is invalid (verl-agent counts "still" valid).
"""

from __future__ import annotations

from scpo.envs.prompting import extract_action, history_items, history_window, template_phrases
from scpo.envs.sokoban.room import ACTIONS, NO_OP

__all__ = [
    "PROMPT_NO_HISTORY",
    "PROMPT_WITH_HISTORY",
    "HISTORY_ITEM",
    "PROMPT_PHRASES",
    "build_prompt",
    "project_action",
    "MAX_ACTION_CHARS",
]

_HEAD = (
    "\nYou are an expert agent operating in the Sokoban environment.\n\n"
    "# Symbols and Their Meaning\n"
    "- Walls (`#`): These block movement. You can't move through or push anything into walls.\n"
    "- Floor (`_`): Open spaces where you can walk and move boxes.\n"
    "- Targets (`O`): The spots where boxes need to go.\n"
    "- Boxes (`X`): These are what you need to push onto the targets.\n"
    "- Player (`P`): That's you! You'll move around the grid to push boxes.\n"
    "- Box on Target (`√`): A box successfully placed on a target.\n"
    "- Player on Target (`S`): You standing on a target.\n\n"
    "# Your Goal\n"
    "Your goal is to push all the boxes (`X`) onto the target spots (`O`). Once all boxes are on the targets, you win!"
    "\n\n"
    "# Rules\n"
    "You can only push boxes. You can't pull them, so plan ahead to avoid getting stuck.\n"
    "You can't walk through or push boxes into walls (`#`).\n"
    "To avoid traps, do not push boxes into corners or against walls where they can't be moved again.\n\n"
    "# Current Step\n"
)
_TAIL = (
    "Your admissible actions are [{admissible}].\n\n"
    "Now it's your turn to make a move (choose ONE action only for the current step).\n"
    "You should first reason step-by-step about the current situation — observe the positions of boxes and targets, "
    "plan a path to push a box toward a target, and avoid traps like corners or walls. This reasoning process MUST be "
    "enclosed within <think> </think> tags. \n"
    "Once you've finished your reasoning, you should choose an admissible action for current step and present it "
    "within <action> </action> tags.\n"
)
PROMPT_NO_HISTORY = _HEAD + "Your current observation is:\n{observation}\n" + _TAIL
PROMPT_WITH_HISTORY = (
    _HEAD
    # "observaitons": verl-agent's spelling, kept so that the text is the one its agents read
    + "Prior to this step, you have already taken {step} step(s). Below are the most recent {n_history} observaitons "
    "and the corresponding actions you took: {history}\n"
    "You are now at step {current_step} and your current observation is:\n{observation}\n" + _TAIL
)
HISTORY_ITEM = "[Observation {index}: '{observation}', Action {index}: '{action}']"

PROMPT_PHRASES = template_phrases(PROMPT_NO_HISTORY, PROMPT_WITH_HISTORY, HISTORY_ITEM)
MAX_ACTION_CHARS = 100  # the tag's text is read up to this many characters
_NAMED = (*ACTIONS, NO_OP)  # the words the projection looks for, in verl-agent's order


def _move_name(action: str) -> str:
    """verl-agent's name of a played move in the history: Up / Down / Left / Right, Still for anything else."""
    return action.capitalize() if action in ACTIONS else NO_OP.capitalize()


def build_prompt(
    goal: str,
    observation: str,
    admissible: list[str],
    history: list[tuple[str, str]],
    step: int,
    history_length: int = 2,
) -> str:
    """The policy's prompt at `step` (0-based count of the steps taken): the grid `observation`, the last
    `history_length` (grid, move) pairs of `history` (oldest first), the admissible moves. `goal` is the template's
    own goal text, so it is not repeated."""
    shown = ", ".join(f'"{a}"' for a in admissible)
    recent = [(obs, _move_name(act)) for obs, act in history_window(history, history_length)]
    if step == 0 or not recent:
        return PROMPT_NO_HISTORY.format(observation=observation, admissible=shown)
    text = history_items(recent, step, HISTORY_ITEM, one_per_line=True)
    return PROMPT_WITH_HISTORY.format(
        step=step,
        n_history=len(recent),
        history=text,
        current_step=step + 1,
        observation=observation,
        admissible=shown,
    )


def project_action(text: object, admissible: list[str]) -> tuple[str, bool]:
    """Model text -> (move, valid); pure, never raises. The move is the first of up / down / left / right / still
    that the `<action>` tag's text contains, if it is admissible -> (move, True); anything else (no tag, no such word,
    "still", a move not in `admissible`) -> (NO_OP, False), so an invalid answer never moves anything."""
    try:
        content = extract_action(text, MAX_ACTION_CHARS)
        if content is None:
            return NO_OP, False
        move = next((word for word in _NAMED if word in content), NO_OP)
        if move == NO_OP or move not in set(admissible or ()):
            return NO_OP, False
        return move, True
    except Exception:
        return NO_OP, False

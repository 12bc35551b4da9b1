"""What every environment's prompt shares, once: the answer format (its tags, `ANSWER_TAGS`; an action-only answer,
`action_answer`: SFT targets, the admissible-choice sampler's candidates), reading the action back (`extract_action`,
`project_answer`), the window of history a prompt shows (`history_window`, `history_items`), and the fixed phrases of
a prompt template (the tiny policy's tokenizer keeps each one as a single token).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = [
    "ANSWER_TAGS",
    "ACTION_ANSWER",
    "action_answer",
    "extract_action",
    "project_answer",
    "history_window",
    "history_items",
    "template_phrases",
]

ANSWER_TAGS = ("<think>", "</think>", "<action>", "</action>")  # the answer format every env's prompt asks for
THINK_OPEN, THINK_CLOSE, ACTION_OPEN, ACTION_CLOSE = ANSWER_TAGS
ACTION_ANSWER = ACTION_OPEN + "{action}" + ACTION_CLOSE  # an answer without reasoning: "<action>go to desk 1</action>"

_ACTION_TAG = re.compile(re.escape(ACTION_OPEN) + r"(.*?)" + re.escape(ACTION_CLOSE), re.DOTALL | re.IGNORECASE)
_SPACES = re.compile(r"\s+")
_FIELD = re.compile(r"\{[a-z_]+\}")


def action_answer(action: str) -> str:
    """The answer that gives `action` without reasoning: `<action>{action}</action>`."""
    return ACTION_ANSWER.format(action=action)


def extract_action(text: object, max_chars: int) -> str | None:
    """The content of the last `<action>...</action>` tag of `text`, lower-cased, whitespace collapsed, at most
    `max_chars` characters; None when there is no tag. Never raises (non-strings count as text)."""
    text = text if isinstance(text, str) else ("" if text is None else str(text))
    matches = _ACTION_TAG.findall(text)
    if not matches:
        return None
    return _SPACES.sub(" ", matches[-1][: 10 * max_chars]).strip().lower()[:max_chars]


def project_answer(
    text: object,
    admissible: Sequence[str] | None,
    max_chars: int,
    is_admissible: Callable[[str, list[str]], bool] | None = None,
) -> tuple[str, bool]:
    """Model text -> (action, valid); never raises. The action is `extract_action`'s; valid when it is admissible
    (`is_admissible(action, admissible)`, default: one of `admissible`). No tag, or anything that fails, gives
    ("", False): a string the environment treats as an inadmissible no-op."""
    try:
        action = extract_action(text, max_chars)
        if action is None:
            return "", False
        commands = list(admissible or ())
        return action, is_admissible(action, commands) if is_admissible else action in set(commands)
    except Exception:
        return "", False


def history_window(history: Sequence[tuple[str, str]], history_length: int) -> list[tuple[str, str]]:
    """The (observation, action) pairs a prompt shows: the last `history_length` of `history` (oldest first), none for
    a length of 0; ValueError for a negative one."""
    if history_length < 0:
        raise ValueError(f"history_length must be >= 0, got {history_length}")
    return list(history[-history_length:]) if history_length > 0 else []


def history_items(
    window: Sequence[tuple[str, str]], step: int, item: str, observation: Callable[[str], str] = str
) -> str:
    """The window's pairs, each formatted by `item` with {index} (its 1-based step number: the window ends at step
    `step`), {observation} (through `observation`) and {action}, joined."""
    first = step - len(window) + 1
    return "".join(
        item.format(index=first + k, observation=observation(o), action=a) for k, (o, a) in enumerate(window)
    )


def template_phrases(*templates: str, min_words: int = 3, keep_apart: tuple[str, ...] = ANSWER_TAGS) -> tuple[str, ...]:
    """The literal text between the `{field}` placeholders of `templates`, cut also at each string of `keep_apart`
    (tokens with a meaning of their own: by default the answer tags), keeping pieces of at least `min_words` words;
    sorted, unique.
    Example: "You are an agent. Your task is to: {goal}\n" -> ("You are an agent. Your task is to: ",)."""
    pieces = [p for t in templates for p in _FIELD.split(t)]
    for sep in keep_apart:
        pieces = [q for p in pieces for q in p.split(sep)]
    return tuple(sorted({p for p in pieces if len(p.split()) >= min_words}))

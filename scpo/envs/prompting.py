"""What every environment's prompt shares, once: the answer format (its tags, `ANSWER_TAGS`; an action-only answer,
`action_answer`: SFT targets, the admissible-choice sampler's candidates), reading the action back (`extract_action`,
`project_answer`; verl-agent's own projection, `verl_agent_projection`, for the `verl_agent` prompt style), the window
of history a prompt shows (`history_window`, `history_items`), and the fixed phrases of a prompt template (the tiny
policy's tokenizer keeps each one as a single token).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

__all__ = [
    "ANSWER_TAGS",
    "ACTION_ANSWER",
    "PROMPT_STYLES",
    "action_answer",
    "extract_action",
    "project_answer",
    "history_window",
    "history_items",
    "template_phrases",
    "verl_agent_projection",
]

# "scpo": this package's prompts and validity (every profile's admissible-choice path); "verl_agent": verl-agent's own
# templates and projection, for free-text generation (the gpu profile): docs/gpu.md, the recipe table
PROMPT_STYLES = ("scpo", "verl_agent")

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
    window: Sequence[tuple[str, str]],
    step: int,
    item: str,
    observation: Callable[[str], str] = str,
    *,
    one_per_line: bool = False,
) -> str:
    """The window's pairs, each formatted by `item` with {index} (its 1-based step number: the window ends at step
    `step`), {observation} (through `observation`) and {action}, joined as they are (each item brings its own line
    break), or `one_per_line` (verl-agent's: each item's leading line breaks dropped, the items joined by newlines)."""
    first = step - len(window) + 1
    items = [item.format(index=first + k, observation=observation(o), action=a) for k, (o, a) in enumerate(window)]
    return "\n".join(i.lstrip("\n") for i in items) if one_per_line else "".join(items)


def template_phrases(*templates: str, min_words: int = 3, keep_apart: tuple[str, ...] = ANSWER_TAGS) -> tuple[str, ...]:
    """The literal text between the `{field}` placeholders of `templates`, cut also at each string of `keep_apart`
    (tokens with a meaning of their own: by default the answer tags), keeping pieces of at least `min_words` words;
    sorted, unique.
    Example: "You are an agent. Your task is to: {goal}\n" -> ("You are an agent. Your task is to: ",)."""
    pieces = [p for t in templates for p in _FIELD.split(t)]
    for sep in keep_apart:
        pieces = [q for p in pieces for q in p.split(sep)]
    return tuple(sorted({p for p in pieces if len(p.split()) >= min_words}))


_CJK = re.compile(r"[\u4e00-\u9fff]")


def verl_agent_projection(text: object, tail: int, reject_cjk: bool, max_chars: int) -> tuple[str, bool]:
    """verl-agent's projection of an answer (`alfworld_projection`, `webshop_projection`): lower-cased, the text
    between the first `<action>` and the first `</action>`, stripped; without both tags the answer's last `tail`
    characters are the action (what the environment gets and the history shows) and it is invalid. Valid also needs
    `<think>` and `</think>` in the answer, and (`reject_cjk`, ALFWorld) no CJK character. Admissibility is not
    checked (the environment answers an inadmissible command with no effect). At most `max_chars` characters; never
    raises."""
    text = text if isinstance(text, str) else ("" if text is None else str(text))
    lower = text.lower()
    start, end = lower.find(ACTION_OPEN), lower.find(ACTION_CLOSE)
    if start == -1 or end == -1:
        return lower[-tail:][:max_chars], False
    action = lower[start + len(ACTION_OPEN) : end].strip()[:max_chars]
    valid = THINK_OPEN in text and THINK_CLOSE in text and not (reject_cjk and _CJK.search(text))
    return action, bool(valid)

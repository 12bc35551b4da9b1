"""`PolicyLike`: what the engines, the trainer, SFT and the hindsight scorer need of a policy (`scpo.policy.Policy`
implements it; a stand-in for tests only has to match it)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

__all__ = ["PolicyLike"]


class PolicyLike(Protocol):
    """A causal LM (`model`, a transformers model), its `tokenizer`, and how a prompt becomes token ids."""

    model: Any
    tokenizer: Any
    profile: str

    @property
    def device(self) -> Any: ...

    def format_prompt(self, prompt: str) -> str:
        """The text actually tokenised for `prompt` (chat template or raw)."""

    def encode_prompts(
        self, prompts: Sequence[str], max_prompt_tokens: int, overflow: str = "truncate_left"
    ) -> list[list[int]]:
        """Token ids of each formatted prompt, keeping the last `max_prompt_tokens` (or an error: `overflow`)."""

    def save(self, path: str | Path) -> Path:
        """Weights, tokenizer and metadata under `path`."""

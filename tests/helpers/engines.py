"""Stand-ins for a model in collector tests: each prompt answered by a function of its text."""

from __future__ import annotations

from scpo.rollout.generation import Generation


class ScriptedEngine:
    """Answers each prompt with `answer(prompt)` (a stand-in for a model); `calls` records each batch's size."""

    def __init__(self, answer):
        self.answer = answer
        self.calls: list[int] = []

    def generate(self, prompts, temperature, top_p=1.0, admissible=None):
        self.calls.append(len(prompts))
        return [Generation(text=self.answer(p), prompt_ids=[1, 2], response_ids=[3]) for p in prompts]

    def sync_weights(self, policy):
        pass

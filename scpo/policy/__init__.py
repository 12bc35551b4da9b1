"""Policies: model profiles (`tiny`, `smollm2-135m`, Hub names / local paths), saving and loading; `PolicyLike`, the
interface the rest of the package relies on."""

from scpo.policy.interface import PolicyLike
from scpo.policy.profiles import Policy, PromptTooLongError, create_policy, load_policy, resolve_model_dir

__all__ = ["Policy", "PolicyLike", "PromptTooLongError", "create_policy", "load_policy", "resolve_model_dir"]

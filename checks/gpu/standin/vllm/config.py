"""Stand-in for `vllm.config.set_current_vllm_config` / `get_current_vllm_config` (see the package docstring)."""

from __future__ import annotations

from contextlib import contextmanager

_current = None


@contextmanager
def set_current_vllm_config(vllm_config, check_compile: bool = False, prefix: str | None = None):
    global _current
    previous, _current = _current, vllm_config
    try:
        yield
    finally:
        _current = previous


def get_current_vllm_config():
    return _current

"""Worker processes for work run side by side on the CPU: forked from a server that has imported the heavy modules once.

A `spawn`ed worker is a fresh interpreter: it imports torch, transformers and the trainer before its first job, about
5 s of one core each. With `forkserver`, a process starts one server, which imports `preload` once; every worker is
forked from that server with those modules imported and no thread running. Workers are never forked from the caller
itself: a Jupyter kernel and torch hold threads. On two cores, a stage's three seeds (this process plus two workers)
finish 3.5-6 s sooner than with spawned workers (`benchmarks/seed_lanes.py`, `docs/pipeline.md`).

What a worker inherits: the caller's `sys.path`, working folder and `__main__` (as with `spawn`), and the caller's
environment variables as they are when the pool is made (`_start_worker` sets them). The server is started once per
process, by its first pool, and keeps that pool's `preload`; variables read when a module is imported (torch reads
OMP_NUM_THREADS and ATEN_CPU_CAPABILITY) take the server's values, which a pipeline stage, a fresh process, sets
before anything starts.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

__all__ = ["MODEL_MODULES", "worker_context", "worker_executor"]

# The tiny and SmolLM2 profiles' model class (transformers imports a model's module on first use)
MODEL_MODULES = ("transformers.models.llama.modeling_llama",)


def worker_context(preload: Sequence[str] = ()) -> multiprocessing.context.BaseContext:
    """The forkserver context whose server imports `preload` and `MODEL_MODULES` (when this process starts it)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([*preload, *MODEL_MODULES])
    return context


def worker_executor(
    max_workers: int, preload: Sequence[str] = (), initializer: Callable | None = None, initargs: tuple = ()
) -> ProcessPoolExecutor:
    """A `ProcessPoolExecutor` of forked workers (`worker_context`) with this process's environment variables."""
    return ProcessPoolExecutor(
        max_workers=max_workers,
        mp_context=worker_context(preload),
        initializer=_start_worker,
        initargs=(dict(os.environ), initializer, initargs),
    )


def _start_worker(environ: dict[str, str], initializer: Callable | None, initargs: tuple) -> None:
    """A worker's first step: the caller's environment variables, then the caller's own initializer."""
    os.environ.clear()
    os.environ.update(environ)
    if initializer is not None:
        initializer(*initargs)

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

A worker ends with the process that made its pool (`exit_with_caller`): killed, or exited without shutting the pool
down. Its parent is the fork server, which lives as long as any worker does, so nothing else would stop it; it would
finish its job, writing into a run folder that a re-run of the stage may already be writing, and then wait for the
next job forever.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor

__all__ = ["MODEL_MODULES", "exit_with_caller", "worker_context", "worker_executor"]

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
    """A worker's first step: a watch on the caller (`exit_with_caller`), the caller's environment variables, then the
    caller's own initializer."""
    exit_with_caller()
    os.environ.clear()
    os.environ.update(environ)
    if initializer is not None:
        initializer(*initargs)


def exit_with_caller() -> None:
    """In a worker process: end it at once (SIGKILL to itself: no cleanup, no further write) when the process that
    started it ends. A daemon thread waits on `multiprocessing.parent_process().sentinel`, the worker's end of the pipe
    its caller sent it through; the caller keeps the other end open until it has joined the worker, so while the worker
    runs the pipe reads as closed only once the caller is gone (exited without shutting the pool down, or killed).
    Nothing happens outside a multiprocessing worker."""
    caller = multiprocessing.parent_process()
    if caller is None:
        return

    def watch() -> None:
        multiprocessing.connection.wait([caller.sentinel])
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="exit-with-caller", daemon=True).start()

"""Shell commands run at once, each in its own process group: one DVC stage that keeps several cores busy (DVC runs
its stages one at a time, and the two single-threaded SFT warm starts would leave a core idle for 10 minutes).

    python -m scpo.pipeline.side_by_side --label alfworld "papermill ..." --label webshop "papermill ..."

Each command runs under `sh -c`; its output lines are passed through prefixed with `[label] `. The exit status is 0
when every command exited 0. When one fails, the others are stopped at once (their whole process group: a Papermill
command's kernel too), one line names the command that failed and its exit status, and the status is that
command's. An interrupt (Ctrl-C, or SIGTERM from DVC) stops every command the same way.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

__all__ = ["parse_commands", "run_side_by_side"]


def _relay(stream, label: str, out, lock: threading.Lock) -> None:
    for line in iter(stream.readline, ""):
        with lock:
            out.write(f"[{label}] {line}" if line.endswith("\n") else f"[{label}] {line}\n")
            out.flush()
    stream.close()


def _signal_group(p: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(p.pid, sig)


def _stop(procs: Sequence[subprocess.Popen]) -> None:
    """SIGTERM to every running command's process group, SIGKILL after 10 s to what is left."""
    running = [p for p in procs if p.poll() is None]
    for p in running:
        _signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for p in running:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _signal_group(p, signal.SIGKILL)
            p.wait()


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def run_side_by_side(commands: Sequence[tuple[str, str]], out=None, poll_s: float = 0.1) -> int:
    """Run every (label, shell command) at once; -> 0, or the exit status of the first command that failed
    (module docstring). Output goes to `out` (default: stdout), each line prefixed with its command's label."""
    out = sys.stdout if out is None else out
    labels = [label for label, _ in commands]
    if not commands:
        raise ValueError("side_by_side: no command given")
    if len(set(labels)) != len(labels):
        raise ValueError(f"side_by_side: labels must differ, got {labels}")
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            out.write(line + "\n")
            out.flush()

    on_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupted) if on_main else None
    procs: list[subprocess.Popen] = []
    relays: list[threading.Thread] = []
    try:
        for label, command in commands:
            # its own process group (start_new_session): stopped as a whole, a Papermill kernel included
            p = subprocess.Popen(
                ["sh", "-c", command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                start_new_session=True,
            )  # fmt: skip
            procs.append(p)
            relays.append(threading.Thread(target=_relay, args=(p.stdout, label, out, lock), daemon=True))
            relays[-1].start()
        while True:
            codes = [p.poll() for p in procs]
            failed = [i for i, c in enumerate(codes) if c not in (None, 0)]
            if failed or all(c == 0 for c in codes):
                break
            time.sleep(poll_s)
        if not failed:
            for t in relays:
                t.join(timeout=5)
            return 0
        first = failed[0]
        others = [label for label, p in zip(labels, procs) if p.poll() is None]
        _stop(procs)
        for t in relays:
            t.join(timeout=5)
        code = procs[first].returncode
        stopped = f"; stopped {', '.join(others)}" if others else ""
        say(f"side_by_side: {labels[first]} failed with exit status {code}{stopped}")
        return code if code > 0 else 128 - code  # killed by signal N: 128 + N, as a shell reports it
    except KeyboardInterrupt:
        _stop(procs)
        say(f"side_by_side: interrupted; stopped {', '.join(labels[: len(procs)])}")
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


USAGE = "usage: python -m scpo.pipeline.side_by_side [--label NAME] COMMAND [[--label NAME] COMMAND ...]"


def parse_commands(argv: Sequence[str]) -> list[tuple[str, str]]:
    """[(label, command)] from `[--label NAME] COMMAND ...` (an unlabelled command is labelled by its position);
    ValueError (one line) on a dangling --label or no command."""
    commands: list[tuple[str, str]] = []
    label = None
    tokens = list(argv)
    i = 0
    while i < len(tokens):
        if tokens[i] == "--label":
            if i + 1 >= len(tokens):
                raise ValueError("side_by_side: --label needs a name")
            label = tokens[i + 1]
            i += 2
            continue
        commands.append((label or str(len(commands) + 1), tokens[i]))
        label = None
        i += 1
    if label is not None:
        raise ValueError(f"side_by_side: --label {label} is not followed by a command")
    if not commands:
        raise ValueError("side_by_side: no command given")
    return commands


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv[:1]):
        print(USAGE + "\n\n" + __doc__)
        return 0
    try:
        return run_side_by_side(parse_commands(argv))
    except ValueError as err:
        print(f"{err}\n{USAGE}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

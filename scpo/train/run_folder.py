"""A run folder's guards: one writer at a time, and nothing in it replaced unless asked for.

Modes of a training command on `<run>`:
- fresh (default): `<run>` must be absent or empty; a folder holding anything is refused in one line saying what it
  holds and the two ways on (`--resume`, `--overwrite`);
- overwrite: the run's own entries (`RUN_ENTRIES`: provenance.json, checkpoints/, model/, ...) are removed, but only
  after every check of the new run passed (config, data, model) and the lock is held; a folder that holds anything
  else (a notes file, another run, a `.git`), is the current directory or holds it, or holds `data.root`, is refused
  in one line with nothing removed (`scpo.pipeline.safe_replace`);
- resume: handled by the trainer (a checkpoint must exist and match the config).

A run folder is never created inside another run folder (whose `--overwrite` would then remove it), and `--out`
naming a file, or a folder that cannot be written, is one line too.

`RunLock` is an exclusive lock on the folder: `fcntl.flock` on `<run>/.scpo.lock`, a file holding the holder's pid,
host, command and start time. A second writer fails at once, naming the holder. The kernel releases a flock when its
process dies, so a lock left by a killed run (SIGKILL, out of memory) is taken over, with one line naming the dead pid;
a clean exit removes the file. Written by hand rather than with `filelock`, which truncates the lock file on every
attempt and so loses the holder's pid that the error message names. POSIX only (Linux, macOS).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path

from scpo.errors import RunFolderError, write_problem
from scpo.pipeline.safe_replace import check_replaceable, enclosing_run, remove_own_entries

__all__ = [
    "RunLock",
    "LOCK_FILE",
    "RUN_ENTRIES",
    "folder_contents",
    "check_fresh",
    "check_not_in_use",
    "check_out_folder",
    "check_overwritable",
    "clear_run_folder",
    "describe_run",
]

LOCK_FILE = ".scpo.lock"
# what a training run writes into its folder (scpo.train.run, rl_loop, sft; `scpo eval`'s default --out is eval/)
RUN_ENTRIES = frozenset(
    {
        LOCK_FILE,
        "provenance.json",
        "summary.json",
        "manifest.json",
        "history.csv",
        "dvclive",
        "checkpoints",
        "rollouts",
        "model",
        "init_model",
        "eval",
    }
)


def _run_entry(name: str) -> bool:
    return name in RUN_ENTRIES


def folder_contents(run_dir: Path) -> list[str]:
    """Names in `run_dir` (the lock file left out); [] when it does not exist."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        return []
    return sorted(p.name for p in run_dir.iterdir() if p.name != LOCK_FILE)


def describe_run(run_dir: Path) -> str:
    """What a non-empty run folder holds, in a few words: a finished run, or an unfinished one and its checkpoints."""
    run_dir = Path(run_dir)
    names = folder_contents(run_dir)
    ckpts = (
        sorted(p.name for p in (run_dir / "checkpoints").glob("iter_*") if (p / "state.json").exists())
        if (run_dir / "checkpoints").is_dir()
        else []
    )
    if "summary.json" in names:
        what = "a finished run (summary.json)"
    elif ckpts:
        what = f"an unfinished run (checkpoints up to {ckpts[-1]})"
    else:
        what = "files"
    shown = ", ".join(n + ("/" if (run_dir / n).is_dir() else "") for n in names[:5])
    return f"{what}: {shown}{', ...' if len(names) > 5 else ''}"


def check_fresh(run_dir: Path, resumable: bool = True) -> None:
    """RunFolderError unless `run_dir` is absent or empty (a fresh run never writes into another run's folder)."""
    if folder_contents(run_dir):
        ways = "continue it with --resume, replace it with --overwrite" if resumable else "replace it with --overwrite"
        raise RunFolderError(
            f"run folder {run_dir} is not empty, it holds {describe_run(run_dir)}; {ways}, or choose another --out"
        )


def check_out_folder(run_dir: Path) -> None:
    """RunFolderError when `run_dir` is a file, or lies inside another run folder (whose `--overwrite` would remove
    it)."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunFolderError(f"--out {run_dir} is a file, not a folder; choose a folder for the run")
    outer = enclosing_run(run_dir)
    if outer is not None:
        raise RunFolderError(
            f"--out {run_dir} is inside the run folder {outer} (replacing that run would remove this one); "
            "choose a folder outside it"
        )


def check_overwritable(run_dir: Path, protected: dict[str, str | Path | None] | None = None) -> None:
    """`scpo.pipeline.safe_replace.check_replaceable` for a run folder: ReplaceError (one line, nothing removed)
    unless `run_dir` holds only a run's own entries (`RUN_ENTRIES`) and none of `protected`."""
    check_replaceable(run_dir, _run_entry, "run", protected)


def check_not_in_use(run_dir: Path) -> None:
    """RunFolderError naming the holder when another process holds `run_dir`'s lock (read-only: nothing is created)."""
    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise RunFolderError(
            f"run folder {run_dir} is in use by {_holder_text(_read_holder(fd))}; wait for it to "
            "finish or stop it, or choose another --out"
        ) from None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def clear_run_folder(run_dir: Path, protected: dict[str, str | Path | None] | None = None) -> list[str]:
    """Remove a run's own entries from `run_dir` but the lock file (`--overwrite`, called with the lock held), after
    `check_overwritable` passed again; return the names removed."""
    check_overwritable(run_dir, protected)
    return remove_own_entries(run_dir, _run_entry, keep=(LOCK_FILE,))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


class RunLock:
    """`with RunLock(run_dir) as lock:` holds the folder's lock (see the module docstring); `lock.note` is the line
    to show when a stale lock was taken over (else None)."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self.note: str | None = None
        self._fd: int | None = None
        self._created = False

    def acquire(self) -> RunLock:
        self._created = not self.run_dir.exists()
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644))
        except OSError as err:
            problem = write_problem(err, self.run_dir) or f"cannot create {self.path}: {err.strerror or err}"
            raise RunFolderError(f"{problem}; choose another --out") from None
        tries = 5  # a reader's momentary shared lock (`check_not_in_use`) is not a writer: try again briefly
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                tries -= 1
                if tries > 0 and not holder.get("pid"):
                    time.sleep(0.1)
                    continue
                raise RunFolderError(
                    f"run folder {self.run_dir} is in use by {_holder_text(holder)}; wait for it to "
                    f"finish or stop it, or choose another --out"
                ) from None
            # the file may have been removed (a clean release) between our open and our lock: then lock the new one
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        previous = _read_holder(fd)
        if previous.get("pid"):
            state = "is no longer running" if not _pid_alive(int(previous["pid"])) else "no longer holds it"
            self.note = f"run folder {self.run_dir}: took over the lock left by {_holder_text(previous)}, which {state}"
        me = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": " ".join(sys.argv)[:300],
            "since": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode(), 0)
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # before unlocking: a waiting opener re-checks the inode (acquire)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        if self._created:  # a folder this lock created and nothing filled (a command that failed) is not left behind
            with contextlib.suppress(OSError):
                self.run_dir.rmdir()

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _read_holder(fd: int) -> dict:
    try:
        raw = os.pread(fd, 4096, 0)
        data = json.loads(raw.decode()) if raw.strip() else {}
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _holder_text(holder: dict) -> str:
    if not holder.get("pid"):
        return "another process (its pid is not recorded yet)"
    host = holder.get("host")
    where = f" on {host}" if host and host != socket.gethostname() else ""
    return f"pid {holder['pid']}{where} (`{holder.get('command', '?')}`, since {holder.get('since', '?')})"

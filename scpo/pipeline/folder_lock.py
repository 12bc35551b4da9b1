"""`RunLock`: one writer at a time in a folder: a run folder, an evaluation's --out, a sweep's --out.

An exclusive lock on the folder: `fcntl.flock` on `<run>/.scpo.lock`, a file holding the holder's pid, host, command
and start time. A second writer fails at once, naming the holder. The kernel releases a flock when its process dies, so
a lock left by a killed run (SIGKILL, out of memory) is taken over, with one line naming the dead pid; a clean exit
removes the file, and a folder the lock created that nothing filled (a command that failed). POSIX only (Linux, macOS).

Written by hand rather than with `filelock`: its `UnixFileLock` (4.x) keeps the lock file on release so that waiters
share one inode, and knows nothing of the holder; a run folder must end without the file (it is no result, and a
folder a failed command created must not be left behind) and the error must name the holder, so the removal, the
inode check that makes removal safe (`acquire`) and the holder record would still be written here around it.
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

__all__ = ["RunLock", "LOCK_FILE", "check_not_in_use"]

LOCK_FILE = ".scpo.lock"


def check_not_in_use(run_dir: Path, what: str = "run folder") -> None:
    """RunFolderError naming the holder when another process holds `run_dir`'s lock (read-only: nothing is created);
    `what` names the folder in the message ("run folder", "sweep folder")."""
    path = Path(run_dir) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):  # no lock, or no folder (a file: the caller's checks say so)
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise RunFolderError(
            f"{what} {run_dir} is in use by {_holder_text(_read_holder(fd))}; wait for it to "
            "finish or stop it, or choose another --out"
        ) from None
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


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
    to show when a stale lock was taken over (else None); `what` names the folder in messages."""

    def __init__(self, run_dir: Path, what: str = "run folder"):
        self.run_dir = Path(run_dir)
        self.what = what
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
                    f"{self.what} {self.run_dir} is in use by {_holder_text(holder)}; wait for it to "
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
            self.note = (
                f"{self.what} {self.run_dir}: took over the lock left by {_holder_text(previous)}, which {state}"
            )
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

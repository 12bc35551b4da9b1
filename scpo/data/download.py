"""Verified, resumable downloads of public data files.

The transfer is gdown's (`gdown.download`: Google Drive links and plain HTTP(S), `resume=True` keeps unfinished bytes in
a `<name>XXXXXXXX.part` file and continues them with an HTTP Range request on the next call). Around it, written here:
1. each file goes to `<dest>/.partial/<name>` first, never to its final name;
2. it is checked there: its size and sha256 against the recorded ones (or, for a file committed to a public git
   repository, its git blob id, sha1("blob <size>\\0" + bytes)), and it must parse as JSON;
3. only then is it renamed onto `<dest>/<name>` (`os.replace`, atomic on one file system).
So a file under its final name is always complete and verified; a file that fails a check is deleted and every URL tried
is named, with what went wrong, in one line (`DataError`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from scpo.data.errors import DataError

__all__ = ["RemoteFile", "DownloadFailed", "fetch", "check_file", "sha256_of", "git_blob_id", "one_line"]

PARTIAL = ".partial"


@dataclass(frozen=True)
class RemoteFile:
    """One public file: where to get it (URLs tried in order) and what it must be."""

    name: str
    urls: tuple[str, ...]
    size: int | None = None  # bytes; None: not recorded (we have no copy to measure)
    sha256: str | None = None
    git_blob: str | None = None  # git blob id of the same bytes in a public repository
    note: str = ""

    def describe(self) -> str:
        size = f"{self.size:,} bytes" if self.size is not None else "size not recorded"
        check = (
            "sha256 checked" if self.sha256 else "git blob id checked" if self.git_blob else "checked: parses as JSON"
        )
        return f"{self.name} ({size}, {check})"


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def git_blob_id(path: Path) -> str:
    """The id git gives a file's bytes: sha1(b"blob <size>\\0" + bytes)."""
    h = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_file(path: Path, remote: RemoteFile) -> str | None:
    """None when `path` is the file `remote` describes; otherwise what is wrong, in a few words."""
    size = path.stat().st_size
    if remote.size is not None and size != remote.size:
        return f"{size:,} bytes, expected {remote.size:,}"
    if remote.sha256 and (got := sha256_of(path)) != remote.sha256:
        return f"sha256 {got[:12]}..., expected {remote.sha256[:12]}..."
    if remote.git_blob and (got := git_blob_id(path)) != remote.git_blob:
        return f"git blob id {got[:12]}..., expected {remote.git_blob[:12]}..."
    if remote.name.endswith(".json"):
        try:
            json.loads(path.read_bytes())
        except (ValueError, UnicodeDecodeError) as err:
            return f"not valid JSON ({one_line(err)})"
    return None


def one_line(err: BaseException, limit: int = 160) -> str:
    """An exception as `Type: first line of its message`, at most `limit` characters."""
    text = str(err).strip().splitlines()
    msg = f"{type(err).__name__}: {text[0]}" if text else type(err).__name__
    return msg if len(msg) <= limit else msg[: limit - 3] + "..."


def _partials(staging: Path, name: str) -> list[Path]:
    return [p for p in staging.glob(f"{name}*.part") if len(p.name) == len(name) + 8 + len(".part")]


def _download(url: str, target: Path, quiet: bool, timeout: float) -> None:
    """One gdown transfer into `target`, continuing a partial file left by an earlier one (retries are fetch's)."""
    import gdown

    gdown.download(url, str(target), quiet=quiet, resume=True, timeout=timeout, use_cookies=False)


class DownloadFailed(DataError):
    """No URL gave a verified file; `offline` when every URL failed to connect (no network)."""

    def __init__(self, message: str, offline: bool):
        super().__init__(message)
        self.offline = offline


def _reason(url: str, err: BaseException) -> tuple[str, bool]:
    """A failed transfer in a few words, and whether it was a failure to connect at all."""
    import requests

    cause = err
    while cause is not None and not isinstance(cause, requests.RequestException):
        cause = cause.__cause__
    if isinstance(cause, requests.ConnectionError) and "incomplete" not in str(err).lower():
        return f"{url}: cannot connect ({type(cause).__name__})", True
    if isinstance(cause, requests.HTTPError) and cause.response is not None:
        return f"{url}: HTTP {cause.response.status_code}", False
    return f"{url}: {one_line(err)}", False


def fetch(remote: RemoteFile, dest: str | Path, quiet: bool = False, retries: int = 2, timeout: float = 30.0) -> Path:
    """`dest/<name>`, downloaded and verified (see the module docstring); a file already there is checked, not fetched.

    Resumable: an interrupted transfer leaves its bytes in `dest/.partial/`; it is continued up to `retries` times at
    once, and the next call continues from them too. A URL that cannot be connected to is not retried (no network).
    Raises DownloadFailed (a DataError, one line) when no URL gives a file that passes the checks.
    """
    import requests
    from gdown.exceptions import DownloadError

    dest = Path(dest)
    final = dest / remote.name
    if final.is_file() and check_file(final, remote) is None:
        return final
    staging = dest / PARTIAL
    staging.mkdir(parents=True, exist_ok=True)
    target = staging / remote.name
    failures, offline = [], True
    for url in remote.urls:
        attempts, restarted = 0, False
        while True:
            try:
                _download(url, target, quiet, timeout)
            except (requests.RequestException, DownloadError, OSError) as err:
                if "byte range" in str(err) and not restarted:  # the server cannot resume: start this file afresh
                    restarted = True
                    for p in _partials(staging, remote.name):
                        p.unlink()
                    continue
                if "incomplete" in str(err).lower() and attempts < retries:  # cut short: resume from the kept bytes
                    attempts += 1
                    continue
                reason, no_connection = _reason(url, err)  # no retry when it cannot even connect: no network
                failures.append(reason)
                offline &= no_connection
                break
            offline = False
            problem = check_file(target, remote)
            if problem is None:
                os.replace(target, final)
                if not any(staging.iterdir()):
                    staging.rmdir()
                return final
            target.unlink()
            failures.append(f"{url}: {problem}, deleted")
            break
    if not any(staging.iterdir()):  # nothing to resume
        staging.rmdir()
    raise DownloadFailed(f"could not download {remote.describe()}: " + "; ".join(failures), offline)

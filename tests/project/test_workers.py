"""scpo.workers: workers are forked from a server that imported the preloaded modules once, run with the
caller's environment variables as they are when the pool is made, and then the caller's own initializer; a worker
ends with its caller."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from scpo.workers import worker_executor


def _worker_view(name: str) -> dict:
    return {"pid": os.getpid(), "value": os.environ.get(name), "ready": os.environ.get("SCPO_TEST_INITIALIZED")}


def _initialize(flag: str) -> None:
    os.environ["SCPO_TEST_INITIALIZED"] = flag + ":" + os.environ.get("SCPO_TEST_WORKER_VALUE", "")


def test_workers_get_the_callers_environment_then_its_initializer(monkeypatch):
    # the server outlives the first pool: the second pool's workers see "second", the third's none
    for value in ("first", "second", None):
        if value is None:
            monkeypatch.delenv("SCPO_TEST_WORKER_VALUE")
        else:
            monkeypatch.setenv("SCPO_TEST_WORKER_VALUE", value)
        with worker_executor(2, initializer=_initialize, initargs=("executor",)) as pool:
            views = list(pool.map(_worker_view, ["SCPO_TEST_WORKER_VALUE"] * 3))
        assert {v["value"] for v in views} == {value}
        assert {v["ready"] for v in views} == {f"executor:{value or ''}"}
        assert os.getpid() not in {v["pid"] for v in views}


def test_workers_start_with_the_preloaded_modules_imported(tmp_path):
    """In a fresh process (the server is started once per process, by its first pool): a module of `preload` is
    imported in the worker before its job runs, one that is not is not, and the caller has imported neither."""
    script = tmp_path / "preload_check.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys

            from scpo.workers import worker_executor


            def imported(names):
                return [name in sys.modules for name in names]


            if __name__ == "__main__":
                names = ["email.mime.text", "xml.dom.minidom"]
                with worker_executor(1, preload=["email.mime.text"]) as pool:
                    print(pool.submit(imported, names).result(), imported(names))
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=os.getcwd())
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "[True, False] [False, False]"


def test_a_worker_ends_when_its_caller_is_killed(tmp_path):
    """The caller is killed (SIGKILL: no cleanup, no pool shutdown) while its worker is in the middle of a job that
    writes a line every 50 ms for 30 s: the worker is gone within seconds and its file stops growing, instead of the
    worker finishing the job beside a re-run and then waiting forever under the fork server."""
    script, out = tmp_path / "killed_caller.py", tmp_path / "lines.txt"
    script.write_text(
        textwrap.dedent(
            """
            import os, signal, sys, time

            from scpo.workers import worker_executor


            def write_lines(path):
                for i in range(600):
                    with open(path, "a") as f:
                        f.write(f"{os.getpid()} {i}\\n")
                    time.sleep(0.05)


            if __name__ == "__main__":
                path = sys.argv[1]
                pool = worker_executor(1)
                pool.submit(write_lines, path)
                while not os.path.exists(path) or not os.path.getsize(path):  # the worker's first line is written
                    time.sleep(0.05)
                os.kill(os.getpid(), signal.SIGKILL)
            """
        )
    )
    with open(tmp_path / "stderr.txt", "w") as err:  # a file: a pipe would stay open as long as the worker lives
        done = subprocess.run([sys.executable, str(script), str(out)], stdout=err, stderr=err, timeout=120)
    assert done.returncode == -signal.SIGKILL, (tmp_path / "stderr.txt").read_text()
    worker = int(out.read_text().split()[0])
    deadline = time.monotonic() + 15
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(worker):
        os.kill(worker, signal.SIGKILL)
        raise AssertionError("the worker outlived its killed caller")
    lines = out.read_text().count("\n")
    time.sleep(0.5)
    assert out.read_text().count("\n") == lines
    assert lines < 600


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie, dead but not yet reaped by its parent, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False

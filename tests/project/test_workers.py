"""scpo.workers: workers are forked from a server that imported the preloaded modules once, run with the
caller's environment variables as they are when the pool is made, and then the caller's own initializer."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

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

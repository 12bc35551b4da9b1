"""HistoryLog (history.csv + dvclive) with runs side by side in one repository: no shared signal file is written, and
the one dvclive deletes at the end may already be gone."""

from __future__ import annotations

import json
import os

import pytest

from scpo.run.history import STEP_SIGNAL, HistoryLog


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A DVC repository root (dvclive finds it through $DVC_ROOT) with its experiment-run folder."""
    (tmp_path / ".dvc" / "tmp" / "exps" / "run").mkdir(parents=True)
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))
    return tmp_path


def test_steps_write_no_repository_wide_signal_file(repo):
    log = HistoryLog(repo / "run")
    for it in range(3):
        log.log({"iteration": it, "loss": 1.0 / (it + 1)})
        assert not (repo / ".dvc/tmp/exps/run" / STEP_SIGNAL).exists()
    log.close()
    summary = json.loads((repo / "run/dvclive/metrics.json").read_text())
    assert summary["step"] == 2 and summary["loss"] == pytest.approx(1 / 3)
    header, *rows = [
        line.split("\t") for line in (repo / "run/dvclive/plots/metrics/loss.tsv").read_text().splitlines()
    ]
    assert [r[header.index("step")] for r in rows] == ["0", "1", "2"]  # one point per iteration, steps 0..2


def test_close_survives_the_signal_file_deleted_by_another_run(repo, monkeypatch):
    import dvclive.vscode

    signal = repo / ".dvc/tmp/exps/run" / STEP_SIGNAL
    log = HistoryLog(repo / "run")
    log.log({"iteration": 0, "loss": 1.0})
    signal.write_text("{}")  # another process's signal, deleted by it between dvclive's check and its delete

    def gone(path):
        raise FileNotFoundError(2, "No such file or directory", str(path))

    monkeypatch.setattr(dvclive.vscode.os, "remove", gone)
    log.close()


def test_close_still_raises_other_missing_files(repo, monkeypatch):
    import dvclive.vscode

    (repo / ".dvc/tmp/exps/run" / STEP_SIGNAL).write_text("{}")
    log = HistoryLog(repo / "run")

    def other(path):
        raise FileNotFoundError(2, "No such file or directory", os.fspath(repo / "elsewhere"))

    monkeypatch.setattr(dvclive.vscode.os, "remove", other)
    with pytest.raises(FileNotFoundError):
        log.close()

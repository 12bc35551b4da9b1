"""`scpo import`: a steps JSONL or verl-agent's rollout files into a run folder, streamed with a progress bar over the
true total, a final line, and nothing lost or mixed when it is interrupted, repeated or pointed at the wrong folder."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from scpo.analysis.rollout_files import NoRollouts, iteration_files
from scpo.batch import RolloutBatch
from scpo.credit.synthetic import synthetic_batch
from scpo.importers.jsonl import steps_to_jsonl
from scpo.importers.rollout_file import extra_column
from scpo.importers.run_import import ImportSourceError, import_run
from scpo.importers.verl_agent import write_rollouts

from helpers.runs import cli, fingerprint, one_line
from helpers.verl_agent_trainer import trainer_step


def steps_file(path, iterations=3, broken_at: int | None = None):
    batch = synthetic_batch(n_groups=3, group_size=4, max_steps=6, seed=2)
    batch = batch.with_column("trained_advantage", np.linspace(-1, 1, batch.n_rows))
    with path.open("w") as fh:
        for it in range(iterations):
            if it == broken_at:
                fh.write('{"group": "g", "step": 0}\n')
            steps_to_jsonl(batch, fh, iteration=it)
    return batch


def last_bar(stderr: str, label: str) -> tuple[str, str, str]:
    """(percent, n, total) of the last rendering of the bar labelled `label`."""
    found = re.findall(rf"{re.escape(label)}:\s+(\d+)%\|[^|]*\|\s*([\d.]+\w?)/([\d.]+\w?) ", stderr)
    assert found, stderr[-2000:]
    return found[-1]


def test_a_jsonl_run_is_imported_with_a_bar_over_its_bytes_and_a_final_line(tmp_path):
    src, out = tmp_path / "steps.jsonl", tmp_path / "runs" / "mine"
    batch = steps_file(src)
    result = cli("import", src, out)
    assert result.exit_code == 0, result.output
    assert one_line(result.stdout) == (
        f"imported 3 iterations (0..2), {3 * batch.n_rows:,} steps, with trained advantages, from {src} into "
        f"{out}/rollouts ({json.loads((out / 'import.json').read_text())['seconds']:.1f} s)"
    )
    percent, n, total = last_bar(result.stderr, "import steps.jsonl")
    assert percent == "100" and n == total  # bytes read = the file's size
    assert [f.name for f in iteration_files(out)] == ["iter_0000.parquet", "iter_0001.parquet", "iter_0002.parquet"]
    back = RolloutBatch.read(iteration_files(out)[1])
    np.testing.assert_array_equal(back.trained_advantage, batch.trained_advantage)
    manifest = json.loads((out / "import.json").read_text())
    assert manifest["kind"] == "jsonl" and manifest["iterations"] == 3 and manifest["rows"] == 3 * batch.n_rows


def test_a_gzip_jsonl_and_a_folder_of_them_import_as_the_plain_file_does(tmp_path):
    import gzip

    plain = tmp_path / "plain" / "steps.jsonl"
    plain.parent.mkdir()
    steps_file(plain)
    packed = tmp_path / "packed" / "steps.jsonl.gz"
    packed.parent.mkdir()
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert cli("import", plain, tmp_path / "a").exit_code == 0
    for source, out in ((packed, tmp_path / "b"), (packed.parent, tmp_path / "c")):
        result = cli("import", source, out)
        assert result.exit_code == 0, result.output
        percent, n, total = last_bar(result.stderr, f"import {source.name}")
        assert percent == "100" and n == total  # compressed bytes read = the file's size
        files, ref = iteration_files(out), iteration_files(tmp_path / "a")
        assert [f.name for f in files] == [f.name for f in ref]
        for f, g in zip(files, ref):
            got, want = RolloutBatch.read(f), RolloutBatch.read(g)
            for col in ("group_id", "traj_id", "step", "reward", "observation", "action", "trained_advantage"):
                np.testing.assert_array_equal(getattr(got, col), getattr(want, col), err_msg=col)


def test_a_repeated_import_is_refused_and_overwrite_replaces_it_whole(tmp_path):
    src, out = tmp_path / "steps.jsonl", tmp_path / "out"
    steps_file(src, iterations=3)
    assert cli("import", src, out).exit_code == 0
    before = fingerprint(out)
    again = cli("import", src, out)
    assert again.exit_code == 1
    assert one_line(again.stderr) == f"{out} holds an import of {src} (3 iterations); pass --overwrite to replace it"
    assert fingerprint(out) == before
    steps_file(src, iterations=2)
    replaced = cli("import", src, out, "--overwrite")
    assert replaced.exit_code == 0, replaced.output
    assert [f.name for f in iteration_files(out)] == ["iter_0000.parquet", "iter_0001.parquet"]  # no iteration 2 left


def test_a_folder_holding_something_else_or_the_source_itself_is_refused(tmp_path):
    src = tmp_path / "steps.jsonl"
    steps_file(src, iterations=1)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("x")
    refused = cli("import", src, tmp_path / "notes", "--overwrite")
    assert refused.exit_code == 1
    assert (
        one_line(refused.stderr) == f"{tmp_path / 'notes'} holds todo.txt, not an import; choose a new or empty folder"
    )
    inside = cli("import", tmp_path, tmp_path / "imported")
    assert inside.exit_code == 1 and "overlaps the source" in one_line(inside.stderr)
    neither = cli("import", tmp_path / "notes", tmp_path / "x")
    assert neither.exit_code == 1
    assert "holds neither rollout files (rollouts/iter_XXXX.parquet" in one_line(neither.stderr)


def test_an_interrupted_import_leaves_no_run_and_the_next_one_starts_over(tmp_path):
    src, out = tmp_path / "steps.jsonl", tmp_path / "out"
    steps_file(src, iterations=3, broken_at=2)
    failed = cli("import", src, out)
    assert failed.exit_code == 1
    error = failed.stderr.strip().splitlines()[-1]  # after the bar's last state
    assert error.startswith(f"{src}, line ") and "missing field 'trajectory'" in error
    # iteration 0 was written (streamed) before the broken line, which ends iteration 1, was read; it is not a run
    assert sorted(p.name for p in (out / "rollouts.partial").iterdir()) == ["iter_0000.parquet"]
    assert not (out / "import.json").exists()
    with pytest.raises(NoRollouts):
        iteration_files(out)
    steps_file(src, iterations=3)
    assert cli("import", src, out).exit_code == 0
    assert len(iteration_files(out)) == 3 and not (out / "rollouts.partial").exists()


def test_verl_agents_rollout_files_keep_their_copy_counts_and_record(tmp_path):
    dumps = tmp_path / "verl" / "alfworld"
    padding = 0
    for it in (1, 2, 10):
        step = trainer_step(seed=it)
        path = write_rollouts(step.batch, it, dumps, tokenizer=step.tokenizer, env="alfworld")
        padding += int(extra_column(path, "verl_copies").sum())
    summary = import_run(dumps, tmp_path / "imported", progress=False)
    assert (
        summary.kind == "rollouts"
        and summary.iterations == 3
        and (summary.first_iteration, summary.last_iteration) == (1, 10)
    )
    assert summary.padding_copies == padding > 0 and summary.trained_advantage
    files = iteration_files(tmp_path / "imported")
    assert [f.name for f in files] == ["iter_0001.parquet", "iter_0002.parquet", "iter_0010.parquet"]
    assert (files[0].read_bytes()) == (dumps / "rollouts" / "iter_0001.parquet").read_bytes()


def test_a_rollout_file_that_cannot_be_read_is_named(tmp_path):
    (tmp_path / "src" / "rollouts").mkdir(parents=True)
    (tmp_path / "src" / "rollouts" / "iter_0003.parquet").write_bytes(b"not parquet")
    with pytest.raises(ImportSourceError, match=r"iter_0003\.parquet is not a readable rollout file"):
        import_run(tmp_path / "src", tmp_path / "out", progress=False)

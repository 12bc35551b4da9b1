"""Data preparation: ALFWorld counts per split, clear errors for missing or corrupt sources, idempotence."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from contextlib import ExitStack
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scpo.cli import app
from scpo.data import alfworld_data
from scpo.data.alfworld_data import EXPECTED_COUNTS, TARBALLS, DataError, count_games, prepare_alfworld, read_game

from helpers.runs import cli, messages, one_line


def test_prepared_alfworld_has_every_game_per_split(alfworld_data_root):
    counts = count_games(alfworld_data_root)
    assert counts == EXPECTED_COUNTS and sum(counts.values()) == 4027
    game = read_game(next((alfworld_data_root / "json_2.1.1" / "valid_seen").glob("*/*/game.tw-pddl")))
    assert game["walkthrough"] and "(:objects" in game["pddl_problem"]


def test_prepare_data_cli_prints_counts_and_is_idempotent(alfworld_data_root, repo_root, monkeypatch):
    monkeypatch.chdir(repo_root)
    before = alfworld_data_root.stat().st_mtime_ns
    result = CliRunner().invoke(app, ["prepare-data", "--only", "alfworld"])
    assert result.exit_code == 0, result.output
    assert "valid_seen 140" in result.output and "valid_unseen 134" in result.output and "total 4027" in result.output
    assert alfworld_data_root.stat().st_mtime_ns == before  # already complete: nothing unpacked again


def _fake_tarballs(where: Path, per_split: dict[str, int], corrupt: str | None = None) -> None:
    where.mkdir(parents=True, exist_ok=True)
    split_to_tar = {
        "valid_seen": TARBALLS[0],
        "valid_unseen": TARBALLS[0],
        "valid_train": TARBALLS[1],
        "train": TARBALLS[2],
    }
    with ExitStack() as stack:
        tars = {t: stack.enter_context(tarfile.open(where / t, "w:gz")) for t in TARBALLS}
        for split, n in per_split.items():
            for i in range(n):
                body = json.dumps(
                    {"pddl_domain": "", "grammar": "", "pddl_problem": "(:objects)", "walkthrough": ["look"]}
                )
                if corrupt == split and i == 0:
                    body = "{not json"
                data = body.encode()
                info = tarfile.TarInfo(f"json_2.1.1/{split}/task-{i}/trial_0/game.tw-pddl")
                info.size = len(data)
                tars[split_to_tar[split]].addfile(info, io.BytesIO(data))


@pytest.fixture()
def no_alfworld_home(tmp_path, monkeypatch):
    """$ALFWORLD_DATA pointing at an empty folder, so the machine's own ALFWorld data is not found."""
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "alfworld-home"))
    return tmp_path / "alfworld-home"


def test_missing_source_names_every_place_it_looked(tmp_path, monkeypatch, no_alfworld_home):
    monkeypatch.setattr(alfworld_data, "_downloader", lambda: None)  # alfworld-download not installed
    with pytest.raises(DataError) as err:
        prepare_alfworld(tmp_path / "out", shared_dir=tmp_path / "nowhere")
    msg = str(err.value)
    assert "\n" not in msg and f"$ALFWORLD_DATA={no_alfworld_home}" in msg and "nowhere" in msg
    assert "`alfworld-download` (not installed" in msg and "scpo prepare-data --only alfworld" in msg
    assert not (tmp_path / "out").exists()


def test_tests_never_download(tmp_path, monkeypatch, no_alfworld_home):
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "alfworld-download"
    tool.write_text("#!/bin/sh\ntouch " + str(tmp_path / "ran") + "\nexit 1\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    with pytest.raises(DataError, match="not found"):
        prepare_alfworld(tmp_path / "out", shared_dir=tmp_path / "nowhere", allow_download=False)
    assert not (tmp_path / "ran").exists()


def test_incomplete_and_corrupt_sources_fail_clearly(tmp_path, monkeypatch, no_alfworld_home):
    _fake_tarballs(tmp_path / "shared" / "alfworld", {"valid_seen": 2, "valid_unseen": 1, "valid_train": 1, "train": 1})
    with pytest.raises(DataError, match="valid_seen 2/140"):
        prepare_alfworld(tmp_path / "out", shared_dir=tmp_path / "shared")
    assert not (tmp_path / "out").exists()  # an incomplete source never reaches the data folder
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "game.tw-pddl").write_text("{oops")
    with pytest.raises(DataError, match="corrupt ALFWorld game file"):
        read_game(tmp_path / "broken" / "game.tw-pddl")
    with pytest.raises(DataError, match="not found"):
        read_game(tmp_path / "absent" / "game.tw-pddl")


def test_alfworld_data_env_variable_is_the_first_source(tmp_path, monkeypatch, alfworld_data_root):
    # $ALFWORLD_DATA pointing at a complete json_2.1.1 tree is used (copied), even with no shared dir
    monkeypatch.setenv("ALFWORLD_DATA", str(alfworld_data_root))
    counts = prepare_alfworld(tmp_path / "out", source="env", shared_dir=tmp_path / "nowhere", verify=False)
    assert counts == EXPECTED_COUNTS


def _home_with_unplayable_games(home: Path, fixture_root: Path) -> dict[str, int]:
    """The fixture games plus, per split, an unsolvable game and a movable-receptacle game (as alfworld-download leaves
    them): ALFWorld does not play those two kinds."""
    shutil.copytree(fixture_root / "json_2.1.1", home / "json_2.1.1")
    for split in EXPECTED_COUNTS:
        game = json.loads(next((home / "json_2.1.1" / split).glob("*/*/game.tw-pddl")).read_text())
        for folder, solvable in (
            ("pick_two_obj_and_place-Pen-None-Desk-1", False),
            ("pick_and_place_with_movable_recep-Pen-Mug-Desk-1", True),
        ):
            path = home / "json_2.1.1" / split / folder / "trial_1" / "game.tw-pddl"
            path.parent.mkdir(parents=True)
            path.write_text(json.dumps({**game, "solvable": solvable}))
    return count_games(fixture_root)


def test_env_folder_keeps_only_the_games_alfworld_plays(tmp_path, monkeypatch, alfworld_games_root):
    expected = _home_with_unplayable_games(tmp_path / "home", alfworld_games_root)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "home"))
    counts = prepare_alfworld(tmp_path / "out", shared_dir=tmp_path / "nowhere", require_all=False)
    assert counts == expected and sum(counts.values()) == 15
    with pytest.raises(DataError, match="incomplete: train 6/3553"):  # the official counts are required by default
        prepare_alfworld(tmp_path / "out2", source="env", shared_dir=tmp_path / "nowhere")


def test_subset_data_folder_is_accepted_only_when_asked(tmp_path, alfworld_games_root, no_alfworld_home):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "alfworld").symlink_to(alfworld_games_root, target_is_directory=True)
    counts = prepare_alfworld(tmp_path / "data" / "alfworld", shared_dir=tmp_path / "nowhere", require_all=False)
    assert counts == {"train": 6, "valid_seen": 7, "valid_unseen": 1, "valid_train": 1}
    with pytest.raises(DataError, match="not found"):
        prepare_alfworld(tmp_path / "data" / "alfworld", shared_dir=tmp_path / "nowhere", allow_download=False)
    assert (tmp_path / "data" / "alfworld").is_symlink()  # a failed run leaves the folder as it was


def test_a_full_disk_while_unpacking_is_not_blamed_on_the_tarball(tmp_path, monkeypatch):
    """`prepare-data` on a full disk says so in one line (the write that failed, the way on), not that the shared
    tarball is corrupt."""
    import errno

    _fake_tarballs(tmp_path / "shared" / "alfworld", {"train": 2, "valid_seen": 1, "valid_unseen": 1, "valid_train": 1})

    def full(self, member, path="", **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(Path(path) / member.name))

    monkeypatch.setattr(tarfile.TarFile, "extract", full)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "no-home"))
    result = cli(
        "prepare-data",
        "--only",
        "alfworld",
        "--set",
        f"data.root={tmp_path / 'data'}",
        "--set",
        f"data.shared_dir={tmp_path / 'shared'}",
        "--set",
        "data.alfworld_require_all=false",
    )
    assert result.exit_code == 1
    line = one_line(messages(result.stderr))
    assert line.startswith("no space left writing ") and "while unpacking" in line and "corrupt" not in line
    assert line.endswith("free space (or make data.root writable), then run `scpo prepare-data` again")

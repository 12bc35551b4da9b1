"""The download path against a local HTTP server on 127.0.0.1: complete, truncated, wrong checksum, interrupted then
resumed, no network. Each case ends with complete verified data or a one-line DataError, and a file under its final
name (or a manifest) only when it is complete and verified."""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import zipfile

import pytest
from typer.testing import CliRunner

from scpo.cli import app
from scpo.data import alfworld_data, webshop_data
from scpo.data.alfworld_data import count_games, prepare_alfworld
from scpo.data.download import PARTIAL, RemoteFile, fetch, git_blob_id
from scpo.data.errors import DataError
from scpo.data.webshop_data import WEBSHOP_FILES, manifest_path, prepare_webshop_raw

from helpers.httpserver import closed_port_url, serve

SERVED = ("items_ins_v2_1000.json", "items_ins_v2_10000.json", "human_goals.json", "items_human_ins.json")


@pytest.fixture()
def sample_bytes(webshop_sample_dir):
    """The sample files as the server holds them; the sample's human file stands in for the full
    items_human_ins.json."""
    files = {n: (webshop_sample_dir / n).read_bytes() for n in WEBSHOP_FILES if n != "items_human_ins_10000.json"}
    files["items_human_ins.json"] = (webshop_sample_dir / "items_human_ins_10000.json").read_bytes()
    return files


def _remote(url: str, files: dict[str, bytes]) -> dict[str, RemoteFile]:
    return {
        n: RemoteFile(n, (f"{url}/{n}",), size=len(b), sha256=hashlib.sha256(b).hexdigest()) for n, b in files.items()
    }


def _final_files(raw):
    return sorted(p.name for p in raw.glob("*.json")) if raw.is_dir() else []


def test_complete_download_is_verified_and_manifested(tmp_path, sample_bytes, webshop_sample_dir):
    with serve(sample_bytes) as server:
        raw = prepare_webshop_raw(
            tmp_path / "webshop", shared_dir=tmp_path / "nowhere", quiet=True, remote=_remote(server.url, sample_bytes)
        )
    assert _final_files(raw) == sorted(WEBSHOP_FILES)
    for name in WEBSHOP_FILES:  # byte-identical to the sample, items_human_ins_10000.json derived here
        assert (raw / name).read_bytes() == (webshop_sample_dir / name).read_bytes(), name
    manifest = json.loads(manifest_path(raw).read_text())
    assert (
        set(manifest) == set(WEBSHOP_FILES) and manifest_path(raw).parent == tmp_path
    )  # beside data/webshop, not in it
    assert (
        manifest["items_ins_v2_1000.json"]["sha256"]
        == hashlib.sha256(sample_bytes["items_ins_v2_1000.json"]).hexdigest()
    )
    assert (
        not (raw / PARTIAL).exists() and not (raw / "items_human_ins.json").exists()
    )  # the derivation's source is not kept
    # complete: a second call neither downloads nor changes anything
    assert prepare_webshop_raw(tmp_path / "webshop", shared_dir=tmp_path / "nowhere", download=False) == raw


@pytest.mark.parametrize("mode, problem", [("truncate", "bytes, expected"), ("corrupt", "sha256")])
def test_truncated_or_wrong_checksum_is_one_line_and_nothing_final(tmp_path, sample_bytes, mode, problem):
    with serve(sample_bytes) as server:
        server.modes["items_ins_v2_10000.json"] = mode
        with pytest.raises(DataError) as err:
            prepare_webshop_raw(
                tmp_path / "webshop",
                shared_dir=tmp_path / "nowhere",
                quiet=True,
                remote=_remote(server.url, sample_bytes),
            )
    msg = str(err.value)
    assert "\n" not in msg and problem in msg and f"{server.url}/items_ins_v2_10000.json" in msg
    assert "nowhere" in msg and "scpo prepare-data --only webshop" in msg
    raw = tmp_path / "webshop" / "raw"
    assert "items_ins_v2_10000.json" not in _final_files(raw) and "items_human_ins_10000.json" not in _final_files(raw)
    assert not manifest_path(raw).exists()  # the folder is not taken as complete
    assert not list((raw / PARTIAL).rglob("items_ins_v2_10000.json*"))  # the bad bytes are deleted
    with pytest.raises(DataError):  # and a later offline call does not take it as complete either
        prepare_webshop_raw(tmp_path / "webshop", shared_dir=tmp_path / "nowhere", download=False)


def test_interrupted_download_resumes_on_the_next_call(tmp_path):
    name = "big.json"  # larger than gdown's 512 KiB read size, so the part received before the cut is written
    body = json.dumps([f"instruction number {i}" for i in range(120_000)]).encode()
    with serve({name: body}) as server:
        remote = RemoteFile(name, (f"{server.url}/{name}",), size=len(body), sha256=hashlib.sha256(body).hexdigest())
        server.modes[name] = "drop"  # full size announced, half sent, connection closed
        with pytest.raises(DataError) as err:
            fetch(remote, tmp_path, quiet=True, retries=0)
        assert "\n" not in str(err.value) and "incomplete" in str(err.value)
        assert not (tmp_path / name).exists()  # nothing under the final name
        (part,) = (tmp_path / PARTIAL).glob(f"{name}*.part")
        kept = part.stat().st_size
        assert 0 < kept < len(body)  # the bytes received before the cut are kept ...
        assert fetch(remote, tmp_path, quiet=True, retries=0).read_bytes() == body
        assert server.ranges(name)[-1] == f"bytes={kept}-"  # ... and continued with a Range request
    assert not (tmp_path / PARTIAL).exists()


def test_interruption_within_one_call_is_resumed_by_retries(tmp_path, sample_bytes):
    files = {**sample_bytes, "human_goals.json": json.dumps([f"goal {i}" for i in range(150_000)], indent=4).encode()}
    with serve(files) as server:
        server.modes["human_goals.json"] = "drop"
        raw = prepare_webshop_raw(
            tmp_path / "webshop", shared_dir=tmp_path / "nowhere", quiet=True, remote=_remote(server.url, files)
        )
        assert (raw / "human_goals.json").read_bytes() == files["human_goals.json"]
        assert server.ranges("human_goals.json")[0] is None and server.ranges("human_goals.json")[-1].startswith(
            "bytes="
        )
        assert server.ranges("human_goals.json")[-1] != "bytes=0-"


def test_second_url_is_tried_and_git_blob_ids_are_checked(tmp_path, sample_bytes):
    body = sample_bytes["human_goals.json"]
    with serve(sample_bytes) as server:
        server.modes["human_goals.json"] = "corrupt"
        with serve({"mirror/human_goals.json": body}) as mirror:
            remote = RemoteFile(
                "human_goals.json",
                (f"{server.url}/human_goals.json", f"{mirror.url}/mirror/human_goals.json"),
                git_blob=hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest(),
            )
            path = fetch(remote, tmp_path, quiet=True)
    assert path.read_bytes() == body and git_blob_id(path) == remote.git_blob


def test_local_files_are_used_before_the_network(tmp_path, webshop_sample_dir):
    raw = prepare_webshop_raw(
        tmp_path / "webshop", source=webshop_sample_dir, download=True, remote=_remote(closed_port_url(), {})
    )  # no URL would work
    assert _final_files(raw) == sorted(WEBSHOP_FILES)
    assert json.loads(manifest_path(raw).read_text())["human_goals.json"]["origin"].startswith(str(webshop_sample_dir))


def test_no_network_is_one_line_naming_where_it_looked(tmp_path, sample_bytes, monkeypatch):
    remote = _remote(closed_port_url(), sample_bytes)
    with pytest.raises(DataError) as err:
        prepare_webshop_raw(tmp_path / "webshop", shared_dir=tmp_path / "nowhere", quiet=True, remote=remote)
    msg = str(err.value)
    assert "\n" not in msg and "cannot connect" in msg and str(tmp_path / "nowhere" / "webshop") in msg
    assert "not tried" in msg and "data.webshop_source" in msg and "scpo prepare-data --only webshop" in msg
    # through the CLI: exit code 1, the same single line, no traceback
    monkeypatch.setattr(webshop_data, "WEBSHOP_REMOTE", remote)
    result = CliRunner().invoke(
        app,
        [
            "prepare-data",
            "--only",
            "webshop",
            "--set",
            f"data.root={tmp_path / 'data'}",
            "--set",
            f"data.shared_dir={tmp_path / 'nowhere'}",
        ],
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1 and "looked in data.shared_dir" in result.output


# ------------------------------------------------------------------------------------------------- ALFWorld downloads
ZIP = "json_2.1.2_tw-pddl.zip"


def _games_zip(fixture_root) -> bytes:
    """The fixture games as the release zip holds them (json_2.1.1/<split>/...), plus an unsolvable game beside each
    AlarmClock look-at game."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for game in sorted(fixture_root.glob("json_2.1.1/*/*/*/game.tw-pddl")):
            z.write(game, game.relative_to(fixture_root).as_posix())
            if game.parent.parent.name.startswith("look_at_obj_in_light-AlarmClock"):
                unsolvable = {**json.loads(game.read_text()), "solvable": False}
                z.writestr(
                    f"json_2.1.1/{game.parts[-4]}/look_at_obj_in_light-Pen-None-DeskLamp-1/trial_1/game.tw-pddl",
                    json.dumps(unsolvable),
                )
    return buf.getvalue()


def _fake_alfworld_download(tmp_path, url: str) -> str:
    """An `alfworld-download` that runs the installed one's own download() and unzip() (alfworld 0.4.2) on one asset at
    `url`, as its main() does for each asset; returns a PATH holding it."""
    real = alfworld_data._downloader()  # on PATH or beside this Python (`make test` does not put the venv on PATH)
    assert real, "alfworld-download (alfworld 0.4.2) is installed by `make`"
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / "alfworld-download"
    script.write_text(f"""#!{sys.executable}
import argparse, os, runpy
official = runpy.run_path({real!r})  # its functions; its main() does not run
ap = argparse.ArgumentParser()
ap.add_argument("--data-dir")
ap.add_argument("-f", action="store_true")
args = ap.parse_args()
path = official["download"]({url!r}, dst=args.data_dir)
official["unzip"](path, dst=args.data_dir, force=args.f)
os.remove(path)
""")
    script.chmod(0o755)
    return f"{bindir}{os.pathsep}{os.environ['PATH']}"


@pytest.fixture()
def alfworld_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "home"))
    return tmp_path / "home", tmp_path / "data" / "alfworld"


def _prepare(tmp_path, dest):
    return prepare_alfworld(dest, shared_dir=tmp_path / "nowhere", require_all=False)


def test_alfworld_download_complete(tmp_path, monkeypatch, alfworld_env, alfworld_games_root):
    home, dest = alfworld_env
    with serve({ZIP: _games_zip(alfworld_games_root)}) as server:
        monkeypatch.setenv("PATH", _fake_alfworld_download(tmp_path, f"{server.url}/{ZIP}"))
        counts = _prepare(tmp_path, dest)
    assert counts == count_games(alfworld_games_root)  # the unsolvable games are left out
    assert len(list(home.glob("json_2.1.1/*/*/*/game.tw-pddl"))) == 15 + 2 and not list(home.glob("*.zip"))
    assert (home / ".partial").is_dir()  # where alfworld-download keeps unfinished assets (TMPDIR)


def test_alfworld_download_interrupted_then_resumed(tmp_path, monkeypatch, alfworld_env, alfworld_games_root, capfd):
    home, dest = alfworld_env
    body = _games_zip(alfworld_games_root)
    with serve({ZIP: body}) as server:
        monkeypatch.setenv("PATH", _fake_alfworld_download(tmp_path, f"{server.url}/{ZIP}"))
        server.modes[ZIP] = "drop"
        with pytest.raises(DataError) as err:
            _prepare(tmp_path, dest)
        assert "\n" not in str(err.value) and "alfworld-download" in str(err.value) and not dest.exists()
        assert "Traceback" not in capfd.readouterr().err  # the tool's traceback is summed up in the one line
        kept = (home / ".partial" / "alfworld" / ZIP).stat().st_size
        assert 0 < kept < len(body)
        assert _prepare(tmp_path, dest) == count_games(alfworld_games_root)
        assert server.ranges(ZIP)[-1] == f"bytes={kept}-"  # resumed, not downloaded again


@pytest.mark.parametrize("mode", ["truncate", "corrupt"])
def test_alfworld_download_bad_zip_is_one_line_then_fetched_again(
    tmp_path, monkeypatch, alfworld_env, alfworld_games_root, capfd, mode
):
    home, dest = alfworld_env
    with serve({ZIP: _games_zip(alfworld_games_root)}) as server:
        monkeypatch.setenv("PATH", _fake_alfworld_download(tmp_path, f"{server.url}/{ZIP}"))
        server.modes[ZIP] = mode
        with pytest.raises(DataError) as err:
            _prepare(tmp_path, dest)
        assert "\n" not in str(err.value) and not dest.exists() and not list(home.glob("*.zip"))
        assert "Traceback" not in capfd.readouterr().err
        server.modes[ZIP] = "ok"  # the bad zip is not reused: the next run fetches it again and succeeds
        assert _prepare(tmp_path, dest) == count_games(alfworld_games_root)


def test_alfworld_without_network_is_one_line(tmp_path, monkeypatch, alfworld_env, capfd):
    home, dest = alfworld_env
    monkeypatch.setenv("PATH", _fake_alfworld_download(tmp_path, f"{closed_port_url()}/{ZIP}"))
    with pytest.raises(DataError) as err:
        _prepare(tmp_path, dest)
    msg = str(err.value)
    assert "\n" not in msg and "ConnectionError" in msg and "scpo prepare-data --only alfworld" in msg
    assert "$ALFWORLD_DATA" in msg and "Traceback" not in capfd.readouterr().err and not dest.exists()

"""ALFWorld game files: find a source, copy or unpack once into data/alfworld/, verify counts and that every game
parses.

Sources, in order (`data.alfworld_source: auto`):
1. the ALFWorld data folder: `$ALFWORLD_DATA`, or `~/.cache/alfworld` when it is unset (where the `alfworld` package and
   `alfworld-download` put and look for data), holding `json_2.1.1/<split>/<task>/<trial>/game.tw-pddl`;
2. `<data.shared_dir>/alfworld/json_2.1.1-*.tar.gz` (development machines and CI);
3. the official downloader, `alfworld-download --data-dir <the folder of 1.>` (alfworld 0.4.2, installed by `make`;
   needs internet). It fetches four assets of the alfworld/alfworld GitHub releases (json_2.1.1_json.zip,
   json_2.1.1_pddl.zip, json_2.1.2_tw-pddl.zip, and a MaskRCNN detector we do not use) and unzips them. It resumes an
   unfinished asset from `$TMPDIR/alfworld/` with a Range request; we point TMPDIR at `<folder>/.partial` so those bytes
   stay with the data. It checks no checksum and, after a failed unzip, would reuse the bad zip: we delete zips a failed
   run leaves and verify what a run leaves (counts per split, every game parses).

From a folder (1. or 3.) only the games ALFWorld itself plays are taken, by its own rule
(AlfredTWEnv.collect_game_files): `solvable` true, outside `movable` and `Sliced` task folders (the rule behind
ALFWorld's published 3,553 / 140 / 134; not run on a real download here, which has no internet: the counts below are
checked either way).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from tqdm.auto import tqdm

from scpo.data.errors import DataError
from scpo.errors import write_problem

__all__ = [
    "EXPECTED_COUNTS",
    "prepare_alfworld",
    "game_files",
    "count_games",
    "DataError",
    "read_game",
    "alfworld_home",
    "playable",
]

EXPECTED_COUNTS = {"train": 3553, "valid_seen": 140, "valid_unseen": 134, "valid_train": 200}
TARBALLS = ("json_2.1.1-valid.tar.gz", "json_2.1.1-valid_train.tar.gz", "json_2.1.1-train.tar.gz")
GAME_KEYS = ("pddl_domain", "grammar", "pddl_problem", "walkthrough")
HOW_TO_GET = (
    "run `scpo prepare-data --only alfworld` where the internet is reachable (it runs `alfworld-download`), "
    "or set $ALFWORLD_DATA to a folder holding json_2.1.1/ (docs/data.md)"
)


AFTER_WRITE_FAILURE = "free space (or make data.root writable), then run `scpo prepare-data` again"


def game_files(root: str | Path, split: str) -> list[Path]:
    """Sorted game files of one split under `root` (the folder holding json_2.1.1/)."""
    if split not in EXPECTED_COUNTS:
        raise ValueError(f"unknown ALFWorld split {split!r}; known: {', '.join(EXPECTED_COUNTS)}")
    return sorted((Path(root) / "json_2.1.1" / split).glob("*/*/game.tw-pddl"))


def count_games(root: str | Path) -> dict[str, int]:
    return {split: len(game_files(root, split)) for split in EXPECTED_COUNTS}


def read_game(path: str | Path) -> dict:
    """Parse one game.tw-pddl file; a missing or corrupt file raises DataError naming it."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"ALFWorld game file not found: {path}")
    try:
        game = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(f"corrupt ALFWorld game file {path}: {err}") from None
    missing = [k for k in GAME_KEYS if k not in game]
    if missing:
        raise DataError(f"ALFWorld game file {path} lacks keys {missing}")
    return game


def alfworld_home() -> Path:
    """`$ALFWORLD_DATA`, else `~/.cache/alfworld` (alfworld 0.4.2's default, `alfworld.info.ALFWORLD_DATA`)."""
    return Path(os.environ.get("ALFWORLD_DATA") or Path.home() / ".cache" / "alfworld")


def playable(path: Path, game: dict) -> bool:
    """ALFWorld's own rule for the games it plays: solvable, and no movable receptacle or sliced object."""
    task = path.parent.parent.name
    return bool(game.get("solvable")) and "movable" not in task and "Sliced" not in task


def _home_label() -> str:
    env = os.environ.get("ALFWORLD_DATA")
    return f"$ALFWORLD_DATA={env}" if env else f"{alfworld_home()} ($ALFWORLD_DATA unset)"


def _complete(root: Path, require_all: bool) -> bool:
    counts = count_games(root)
    return counts == EXPECTED_COUNTS if require_all else all(counts.values())


def _extract(tarball: Path, dest: Path) -> None:
    try:
        with tarfile.open(tarball) as tar:
            members = [m for m in tar.getmembers() if m.name.endswith("game.tw-pddl") or m.isdir()]
            for m in tqdm(members, desc=f"unpack {tarball.name}", unit="file", leave=False):
                tar.extract(m, dest, filter="data")
    except (tarfile.TarError, OSError, EOFError) as err:
        problem = write_problem(err, dest)  # the disk, not the tarball (a full disk, a folder that is not writable)
        if problem is not None:
            raise DataError(f"{problem} while unpacking {tarball}; {AFTER_WRITE_FAILURE}") from None
        raise DataError(f"corrupt ALFWorld tarball {tarball}: {err}") from None


def _copy_playable(home: Path, dest: Path) -> dict[str, int]:
    """Copy the playable games of `home/json_2.1.1/<split>/` into `dest` (each parsed once); return counts per split."""
    games = [g for split in EXPECTED_COUNTS for g in game_files(home, split)]
    for g in tqdm(games, desc=f"copy games from {home}", unit="game", leave=False):
        game = read_game(g)
        if playable(g, game):
            out = dest / g.relative_to(home)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(g, out)
    return count_games(dest)


def _stream_until_traceback(cmd: list[str], env: dict) -> tuple[int, str]:
    """Run `cmd`, passing its output through (progress bars) until a Python traceback starts; return the exit code and
    the traceback's last line (the error), so a failure is reported in one line instead of a traceback."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    tail, in_traceback = b"", False
    while chunk := proc.stdout.read1(1 << 16):
        if not in_traceback and (i := chunk.find(b"Traceback (most recent call last)")) >= 0:
            in_traceback, tail, chunk = True, chunk[i:], chunk[:i]
        elif in_traceback:
            tail += chunk
            continue
        sys.stderr.write(chunk.decode(errors="replace"))
        sys.stderr.flush()
    rc = proc.wait()
    lines = [ln.strip() for ln in tail.decode(errors="replace").splitlines() if ln.strip()]
    return rc, (lines[-1][:300] if lines else "")


def _downloader() -> str | None:
    """`alfworld-download` on PATH, or beside the running Python (a venv's bin/ that is not on PATH)."""
    return shutil.which(
        "alfworld-download", path=os.pathsep.join([os.environ.get("PATH", ""), str(Path(sys.executable).parent)])
    )


def _download(home: Path, looked: list[str]) -> None:
    """Run `alfworld-download --data-dir home -f` (see the module docstring); a failure is one DataError line that also
    names the places `looked` at before."""
    exe = _downloader()
    partial = home / ".partial"
    partial.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, ALFWORLD_DATA=str(home), TMPDIR=str(partial))
    rc, error = _stream_until_traceback([exe, "--data-dir", str(home), "-f"], env)
    if rc != 0:
        for leftover in home.glob("*.zip"):  # downloaded but not (fully) unzipped: fetched again next time
            leftover.unlink()
        error = error if len(error) <= 160 else error[:157] + "..."
        raise DataError(
            f"ALFWorld games not found; looked at {'; '.join(looked)}; `alfworld-download --data-dir {home}` "
            f"failed ({error or f'exit code {rc}'}); an unfinished asset resumes from "
            f"{partial / 'alfworld'}. To fix: {HOW_TO_GET}"
        )


def prepare_alfworld(
    dest_root: str | Path = "data/alfworld",
    source: str = "auto",
    shared_dir: str | Path = "../shared/data",
    verify: bool = True,
    require_all: bool = True,
    allow_download: bool = True,
) -> dict[str, int]:
    """Make `dest_root/json_2.1.1/<split>/.../game.tw-pddl` complete; return the counts per split.

    Complete means the official counts (`EXPECTED_COUNTS`), or with `require_all=False` at least one game per split
    (small sets such as the test fixtures). Idempotent: complete data is only verified. Work happens in a temp folder
    renamed into place at the end, so an interrupted run never leaves a half-filled tree under `dest_root`.
    `allow_download=False` never runs `alfworld-download` (no network use).
    """
    if source not in ("auto", "env", "shared", "download"):
        raise ValueError(f"data.alfworld_source={source!r}; allowed: auto, env, shared, download")
    dest_root, shared_dir = Path(dest_root), Path(shared_dir)
    if not _complete(dest_root, require_all):
        dest_root.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=dest_root.parent, prefix=".alfworld-") as tmp:
            tmp = Path(tmp) / "alfworld"
            origin = _fill(tmp, source, shared_dir, require_all, allow_download)
            if not _complete(tmp, require_all):  # never renamed into place: dest_root stays as it was
                raise DataError(f"ALFWorld data from {origin} is incomplete: {_count_text(tmp)} games; {HOW_TO_GET}")
            if dest_root.is_symlink():
                dest_root.unlink()
            elif dest_root.exists():  # an incomplete earlier copy (data/ is regenerable)
                shutil.rmtree(dest_root)
            tmp.rename(dest_root)
    counts = count_games(dest_root)
    if verify:
        for split in EXPECTED_COUNTS:
            for f in tqdm(game_files(dest_root, split), desc=f"verify {split}", unit="game", leave=False):
                read_game(f)
    return counts


def _fill(tmp: Path, source: str, shared_dir: Path, require_all: bool, allow_download: bool) -> str:
    """Fill `tmp` from the first source that has the games and return its name; raise DataError naming every place
    looked at and what to run."""
    looked: list[str] = []
    home = alfworld_home()
    if source in ("auto", "env"):
        if (home / "json_2.1.1").is_dir():
            try:
                if _complete_copy(home, tmp, require_all) or source == "env":
                    return _home_label()
                looked.append(f"{_home_label()} (incomplete: {_count_text(tmp)})")
            except DataError as err:  # e.g. a game file cut short by an interrupted unzip
                looked.append(f"{_home_label()} ({err})")
        else:
            looked.append(f"{_home_label()} (no json_2.1.1/)")
    if source in ("auto", "shared"):
        tar_dir = shared_dir / "alfworld"
        if all((tar_dir / t).is_file() for t in TARBALLS):
            for t in TARBALLS:
                _extract(tar_dir / t, tmp)
            return str(tar_dir.resolve())
        looked.append(f"{tar_dir.resolve()}/{{{','.join(TARBALLS)}}}")
    if source in ("auto", "download") and allow_download:
        if _downloader() is None:
            looked.append("`alfworld-download` (not installed: `pip install alfworld==0.4.2`, done by `make`)")
        else:
            _download(home, looked)
            _complete_copy(home, tmp, require_all)
            return f"`alfworld-download` into {home}"
    raise DataError("ALFWorld games not found; looked at " + "; ".join(looked) + f". To fix: {HOW_TO_GET}")


def _complete_copy(home: Path, tmp: Path, require_all: bool) -> bool:
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    _copy_playable(home, tmp)
    return _complete(tmp, require_all)


def _count_text(root: Path) -> str:
    """Counts per split against the official ones, e.g. `train 3553/3553, valid_seen 2/140, ...`."""
    counts = count_games(root)
    return ", ".join(f"{s} {counts[s]}/{n}" for s, n in EXPECTED_COUNTS.items())

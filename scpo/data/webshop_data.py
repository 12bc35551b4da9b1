"""WebShop public files into data/webshop/raw/, then the catalogue is built from them.

Each needed file comes from the first place that has it:
1. `data.webshop_source` if set, else `<data.shared_dir>/webshop` (a folder of files you already have; copied, checked
   to parse as JSON);
2. the internet (`download=True`): the links of WebShop's own `setup.sh` (Google Drive, through gdown) and files of the
   WebShop repository at a pinned commit, each checked against its recorded size and sha256 (or git blob id) before it
   takes its final name (scpo.data.download). `items_ins_v2_10000.json` is the 10,000-product subset verl-agent's
   WebShop uses (a public mirror; setup.sh links only the 1,000-product and the full files);
   `items_human_ins_10000.json` is derived here from `items_human_ins.json`, keeping the products of that subset, as
   verl-agent's subset script does.
A manifest (size, sha256 and origin of every file) is written last, beside the folder (`data/.webshop-raw.json`, so that
the DVC output data/webshop holds the data only): without it the folder is not complete.
A source folder holding WebShop's own product file (`items_shuffle*.json`, with its `items_ins_v2*.json` and any
`items_human_ins*.json`) is copied instead of the public files, and the catalogue is then WebShop's real one
(scpo.envs.webshop.catalogue); product files left in raw/ from such a source are removed when the public files are used.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from scpo.data.download import PARTIAL, DownloadFailed, RemoteFile, check_file, fetch, sha256_of
from scpo.data.errors import DataError

__all__ = ["WEBSHOP_FILES", "WEBSHOP_REMOTE", "prepare_webshop_raw", "prepare_webshop", "manifest_path"]

WEBSHOP_FILES = ("items_ins_v2_1000.json", "items_ins_v2_10000.json", "items_human_ins_10000.json", "human_goals.json")
WEBSHOP_COMMIT = "64fa2a5c15c7daa698b9ac93f5bb5437b634c9bd"  # princeton-nlp/WebShop, the commit setup.sh was read at
_REPO = f"https://raw.githubusercontent.com/princeton-nlp/WebShop/{WEBSHOP_COMMIT}"
_DRIVE = "https://drive.google.com/uc?id="
_SUBSET_MIRROR = "https://huggingface.co/datasets/YWZBrandon/webshop-data/resolve/main/subsets/10k"

WEBSHOP_REMOTE: dict[str, RemoteFile] = {
    f.name: f
    for f in (
        RemoteFile(
            "items_ins_v2_1000.json",
            (_DRIVE + "1IduG0xl544V_A_jv3tHXC0kyFi7PnyBu",),
            size=147_099,
            sha256="f88a36314a397b53b3d9c3fa5878e5f7b26d35019a51ec83fbedeca61a948f6f",
            note="setup.sh -d small: attributes and synthetic instructions of 1,000 products",
        ),
        RemoteFile(
            "items_ins_v2_10000.json",
            (f"{_SUBSET_MIRROR}/items_ins_v2_10000.json",),
            size=1_561_520,
            sha256="298e3e7136f03c07bf621d34e98a3ad15702eed726729faccb023e1b7c692371",
            note="the 10,000-product subset of items_ins_v2.json (verl-agent's WebShop)",
        ),
        RemoteFile(
            "human_goals.json",
            (f"{_REPO}/baseline_models/data/human_goals.json",),
            size=999_419,
            sha256="b68746ed66cd31fdc5f70eb3f5831a46b38163563b57a66ddcab8fd60ee0cbdc",
            git_blob="95f63cf63ada5ed0c923dbfdfde6105170b1f603",
            note="12,087 human instructions (text only)",
        ),
        RemoteFile(
            "items_human_ins.json",
            (f"{_REPO}/baseline_models/data/items_human_ins.json", _DRIVE + "14Kb5SPBk_jfdLZ_CDBNitW98QLDlKR5O"),
            git_blob="b2ab7479b9798e0b62ea394e065f3d506875f090",
            note="human instructions with attributes and options (setup.sh; the repository's copy)",
        ),
        RemoteFile(
            "items_shuffle_1000.json",
            (_DRIVE + "1EgHdxQ_YxqIQlvvq5iKlCrkEKR6-j0Ib",),
            note="setup.sh -d small: the scraped product pages of 1,000 products (not used by default)",
        ),
    )
}
# Derived files: name -> (source file, how), each checked against its recorded size and sha256 like a download.
DERIVED = {
    "items_human_ins_10000.json": RemoteFile(
        "items_human_ins_10000.json",
        ("derived from items_human_ins.json",),
        size=44_333,
        sha256="8cd571b694878497a5444e89d5f0b9a26ee707c4a8b2dc0c9ec6e8ff37c288db",
        note="items_human_ins.json restricted to the products of items_ins_v2_10000.json",
    )
}


def manifest_path(raw: Path) -> Path:
    """Where the manifest of `<root>/webshop/raw` lives: `<root>/.webshop-raw.json`."""
    return raw.parent.parent / f".{raw.parent.name}-{raw.name}.json"


def _read_manifest(raw: Path) -> dict:
    try:
        return json.loads(manifest_path(raw).read_text())
    except (OSError, ValueError):
        return {}


def _complete(raw: Path, files: tuple[str, ...], local: Path) -> bool:
    """Every file listed in the manifest with its size, and none of them differing in size from the local folder's."""
    manifest = _read_manifest(raw)
    return all(
        f in manifest
        and (raw / f).is_file()
        and (raw / f).stat().st_size == manifest[f]["size"]
        and (not (local / f).is_file() or (local / f).stat().st_size == manifest[f]["size"])
        for f in files
    )


def _copy_local(src: Path, raw: Path) -> Path:
    staging = raw / PARTIAL
    staging.mkdir(parents=True, exist_ok=True)
    tmp = staging / src.name
    shutil.copyfile(src, tmp)
    try:
        json.loads(tmp.read_bytes())
    except (ValueError, UnicodeDecodeError) as err:
        tmp.unlink()
        raise DataError(
            f"{src} is not valid JSON ({type(err).__name__}); replace it or remove it from the folder"
        ) from None
    os.replace(tmp, raw / src.name)
    return raw / src.name


def _derive_human_subset(raw: Path, quiet: bool, remote: dict[str, RemoteFile]) -> Path:
    """items_human_ins_10000.json = items_human_ins.json keeping the products of items_ins_v2_10000.json (file
    order)."""
    spec = DERIVED["items_human_ins_10000.json"]
    full = fetch(remote["items_human_ins.json"], raw / PARTIAL, quiet=quiet)  # a source only: not kept in raw/
    keep = set(json.loads((raw / "items_ins_v2_10000.json").read_text()))
    human = json.loads(full.read_text())
    subset = {asin: ins for asin, ins in human.items() if asin in keep and isinstance(ins, list) and ins}
    tmp = raw / PARTIAL / spec.name
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(json.dumps(subset))
    problem = check_file(tmp, spec)
    if problem:
        tmp.unlink()
        raise DataError(f"could not derive {spec.describe()} from {full}: {problem}")
    os.replace(tmp, raw / spec.name)
    return raw / spec.name


def _obtain(name: str, raw: Path, quiet: bool, remote: dict[str, RemoteFile]) -> None:
    if name in DERIVED:
        if not (raw / "items_ins_v2_10000.json").is_file():  # the products to keep: the copy in raw/ when there is one
            fetch(remote["items_ins_v2_10000.json"], raw, quiet=quiet)
        _derive_human_subset(raw, quiet, remote)
    elif name in remote:
        fetch(remote[name], raw, quiet=quiet)
    else:
        raise DataError(f"no public source is recorded for {name}; known: {', '.join(sorted(remote))}")


def prepare_webshop_raw(
    dest_root: str | Path = "data/webshop",
    source: str | Path | None = None,
    shared_dir: str | Path = "../shared/data",
    download: bool = True,
    files: tuple[str, ...] = WEBSHOP_FILES,
    quiet: bool = False,
    remote: dict[str, RemoteFile] | None = None,
) -> Path:
    """Make `dest_root/raw/` hold `files` (copied from `source` or `<shared_dir>/webshop`, else downloaded and
    verified); return that folder. Complete when the manifest (`manifest_path`) lists every file with its size (written
    last)."""
    remote = WEBSHOP_REMOTE if remote is None else remote
    raw = Path(dest_root) / "raw"
    local = Path(source) if source else Path(shared_dir) / "webshop"
    own = _webshop_own_files(local)
    if own:  # WebShop's own product file (+ attributes, human instructions): copied, nothing downloaded
        files, download = own, False
    else:  # the public files: a product file from an earlier source would make the catalogue WebShop's again
        for stale in raw.glob("items_shuffle*.json"):
            stale.unlink()
    if _complete(raw, files, local):
        return raw
    place = f"data.webshop_source={source}" if source else f"data.shared_dir: {local.resolve()}"
    manifest_path(raw).unlink(missing_ok=True)  # removed first, written last: present only over a complete folder
    manifest, failures = {}, []
    for name in files:
        if (local / name).is_file():
            _copy_local(local / name, raw)
            origin = str(local.resolve() / name)
        elif not download:
            failures.append(f"{name}: not in {place}")
            continue
        else:
            try:
                _obtain(name, raw, quiet, remote)
            except DataError as err:
                failures.append(str(err))
                if (
                    isinstance(err, DownloadFailed) and err.offline
                ):  # no network: the other files would fail the same way
                    rest = [n for n in files[files.index(name) + 1 :] if not (local / n).is_file()]
                    failures += [f"not tried: {', '.join(rest)}"] if rest else []
                    break
                continue
            origin = ", ".join((DERIVED.get(name) or remote[name]).urls)
        manifest[name] = {"size": (raw / name).stat().st_size, "sha256": sha256_of(raw / name), "origin": origin}
    if failures:
        how = (
            "set data.webshop_source to a folder holding " + ", ".join(files) + ", or run `scpo prepare-data --only "
            "webshop` where the internet is reachable (docs/data.md)"
        )
        raise DataError(
            f"WebShop files missing; looked in {place}"
            + (" and on the internet" if download else "")
            + f": {'; '.join(failures)}. To fix: {how}"
        )
    tmp = manifest_path(raw).with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest, indent=2))
    os.replace(tmp, manifest_path(raw))
    if (raw / PARTIAL).is_dir() and not any((raw / PARTIAL).rglob("*.part")):
        shutil.rmtree(raw / PARTIAL)
    return raw


def _webshop_own_files(src: Path) -> tuple[str, ...]:
    """Names of WebShop's items_shuffle*.json, its items_ins_v2*.json (and items_human_ins*.json) in `src`, else ()."""
    from scpo.envs.webshop.source import find_original_files

    found = find_original_files(src) if src.is_dir() else None
    if found is None or found.products is None:
        return ()
    if found.attributes is None:
        raise DataError(
            f"{found.products} needs WebShop's attribute file items_ins_v2*.json beside it in {src.resolve()}"
        )
    return tuple(p.name for p in (found.products, found.attributes, found.human) if p is not None)


def prepare_webshop(cfg) -> dict:
    """Copy or download the raw files, then build the catalogue and goals (scpo.envs.webshop.catalogue); return its
    summary."""
    from scpo.envs.webshop.catalogue import build_catalogue

    root = Path(cfg.data.root) / "webshop"
    raw = prepare_webshop_raw(root, source=cfg.data.webshop_source, shared_dir=cfg.data.shared_dir)
    return build_catalogue(
        raw_dir=raw,
        out_dir=root,
        n_products=cfg.data.webshop_n_products,
        n_goals=cfg.data.webshop_n_goals,
        seed=cfg.data.seed,
        goals=cfg.data.webshop_goals,
    )

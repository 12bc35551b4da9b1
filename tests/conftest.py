"""Shared fixtures.

Most tests run on small real data committed under tests/fixtures/ (see its README): a fresh clone needs no download.
Tests that need the full data (all 4,027 ALFWorld games, the public WebShop files) use `alfworld_data_root` /
`webshop_raw_dir`, which prepare it into the repo's data/ from a local source only ($ALFWORLD_DATA, ../shared/data,
data.webshop_source) and skip, saying how to get it, when there is none. They never use the network.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SHARED_DATA = Path(os.environ.get("SCPO_SHARED_DATA", REPO.parent / "shared" / "data"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def alfworld_games_root() -> Path:
    """tests/fixtures/alfworld: 15 real games (json_2.1.1/<split>/...), read-only; see tests/fixtures/README.md."""
    return FIXTURES / "alfworld"


@pytest.fixture(scope="session")
def webshop_sample_dir() -> Path:
    """tests/fixtures/webshop: a sample of the public WebShop files in their original format, read-only."""
    return FIXTURES / "webshop"


@pytest.fixture(scope="session")
def alfworld_data_root() -> Path:
    """data/alfworld with all 4,027 games, unpacked once from $ALFWORLD_DATA or ../shared/data/alfworld; skips without."""
    from scpo.data.alfworld_data import DataError, prepare_alfworld

    root = REPO / "data" / "alfworld"
    try:
        prepare_alfworld(root, source="auto", shared_dir=SHARED_DATA, verify=False, allow_download=False)
    except DataError:
        pytest.skip("needs all 4,027 ALFWorld games: run `scpo prepare-data --only alfworld` (downloads them) or set "
                    "$ALFWORLD_DATA")
    return root


@pytest.fixture(scope="session")
def webshop_raw_dir() -> Path:
    """data/webshop/raw with the public WebShop files (from ../shared/data/webshop); skips without."""
    from scpo.data.webshop_data import DataError, prepare_webshop_raw

    try:
        return prepare_webshop_raw(REPO / "data" / "webshop", shared_dir=SHARED_DATA, download=False, quiet=True)
    except DataError:
        pytest.skip("needs the public WebShop files: run `scpo prepare-data --only webshop` (downloads them) or set "
                    "data.webshop_source")


def _hypothesis_profiles() -> None:
    """`SCPO_HYPOTHESIS_PROFILE=mutation` (set by `make mutate`): the same examples on every run, no example database,
    so a mutant's verdict never depends on the draw; no shrinking (a mutant is killed by the first failing example)."""
    from hypothesis import Phase, settings

    settings.register_profile("mutation", derandomize=True, database=None, deadline=None, print_blob=False,
                              phases=(Phase.explicit, Phase.reuse, Phase.generate))
    settings.load_profile(os.environ.get("SCPO_HYPOTHESIS_PROFILE", "default"))


_hypothesis_profiles()

"""Shared fixtures. Prepared data lives in the repo's data/ (as `scpo prepare-data` makes it); tests prepare it on demand."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("SCPO_SHARED_DATA", REPO.parent / "shared" / "data"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def alfworld_data_root() -> Path:
    """data/alfworld with all 4,027 games (unpacked once from $ALFWORLD_DATA or ../shared/data/alfworld)."""
    from scpo.data.alfworld_data import prepare_alfworld

    root = REPO / "data" / "alfworld"
    prepare_alfworld(root, source="auto", shared_dir=SHARED_DATA, verify=False)
    return root


@pytest.fixture(scope="session")
def webshop_raw_dir() -> Path:
    """data/webshop/raw with the public WebShop files."""
    from scpo.data.webshop_data import prepare_webshop_raw

    return prepare_webshop_raw(REPO / "data" / "webshop", shared_dir=SHARED_DATA)


def _hypothesis_profiles() -> None:
    """`SCPO_HYPOTHESIS_PROFILE=mutation` (set by `make mutate`): the same examples on every run, no example database,
    so a mutant's verdict never depends on the draw; no shrinking (a mutant is killed by the first failing example)."""
    from hypothesis import Phase, settings

    settings.register_profile("mutation", derandomize=True, database=None, deadline=None, print_blob=False,
                              phases=(Phase.explicit, Phase.reuse, Phase.generate))
    settings.load_profile(os.environ.get("SCPO_HYPOTHESIS_PROFILE", "default"))


_hypothesis_profiles()

"""Shared fixtures (shared helpers that are not fixtures: tests/helpers/).

Most tests run on small real data committed under tests/fixtures/ (see its README): a fresh clone needs no download.
Tests that need the full data (all 4,027 ALFWorld games, the public WebShop files) use `alfworld_data_root` /
`webshop_raw_dir`, which prepare it into the repo's data/ from a local source only ($ALFWORLD_DATA, ../shared/data,
data.webshop_source) and skip, saying how to get it, when there is none. They never use the network.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import FIXTURES, REPO

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
    """data/alfworld with all 4,027 games, unpacked once from $ALFWORLD_DATA or ../shared/data/alfworld; skips
    without."""
    from scpo.data.alfworld_data import DataError, prepare_alfworld

    root = REPO / "data" / "alfworld"
    try:
        prepare_alfworld(root, source="auto", shared_dir=SHARED_DATA, verify=False, allow_download=False)
    except DataError:
        pytest.skip(
            "needs all 4,027 ALFWorld games: run `scpo prepare-data --only alfworld` (downloads them) or set "
            "$ALFWORLD_DATA"
        )
    return root


@pytest.fixture(scope="session")
def webshop_raw_dir() -> Path:
    """data/webshop/raw with the public WebShop files (from ../shared/data/webshop); skips without."""
    from scpo.data.webshop_data import DataError, prepare_webshop_raw

    try:
        return prepare_webshop_raw(REPO / "data" / "webshop", shared_dir=SHARED_DATA, download=False, quiet=True)
    except DataError:
        pytest.skip(
            "needs the public WebShop files: run `scpo prepare-data --only webshop` (downloads them) or set "
            "data.webshop_source"
        )


# WebShop's own file formats, hand-made: 4 products (a price range, a missing price, an empty bullet, an option value
# offered by two groups, a title with spaces and markup), their attributes and one human instruction. The page texts
# the tests expect for them were produced by WebShop's own text env on these files.
WEBSHOP_HANDMADE_PRODUCTS = [
    {
        "asin": "B000000001",
        "name": "Lumora Tea Tree Shampoo",
        "full_description": "A shampoo with tea tree oil.",
        "small_description": ["Tea tree oil", "Sulfate free"],
        "pricing": "$12.99",
        "customization_options": {
            "Size": [{"value": "8 Fl Oz (Pack of 1)", "image": None}, {"value": "16 fl oz", "image": None}],
            "Scent": [{"value": "Lavender/Mint", "image": None}],
        },
        "category": "beauty",
        "query": "Shampoo ",
        "product_category": "Beauty & Personal Care › Hair Care › Shampoo",
        "images": ["x.jpg"],
        "brand": "Lumora",
    },
    {
        "asin": "B000000002",
        "name": "Kova Men's Shorts",
        "full_description": "Shorts.",
        "small_description": "Machine wash",
        "pricing": "$10.00 - $20.50",
        "customization_options": {
            "Color": [{"value": "Navy Blue", "image": None}, {"value": "Black", "image": None}],
            "Size": [{"value": "small", "image": None}, {"value": "x-small", "image": None}],
        },
        "category": "fashion",
        "query": "men's shorts",
        "product_category": "Clothing › Men › Shorts",
        "images": ["y.jpg"],
    },
    {
        "asin": "B000000003",
        "name": "Plain Mug",
        "full_description": "",
        "small_description": [""],
        "pricing": "",
        "customization_options": None,
        "category": "garden",
        "query": "mugs",
        "product_category": "Home › Kitchen",
        "images": [None],
    },
    {
        "asin": "B000000004",
        "name": "  Odd <Title> & Co \n",
        "full_description": "line1\nline2",
        "small_description": ["\n", " ", "real bullet"],
        "pricing": "$5",
        "customization_options": {
            "Size": [{"value": "One Size", "image": None}, {"value": "Big", "image": None}],
            "Fit": [{"value": "one size", "image": None}, {"value": "Slim", "image": None}],
        },
        "category": "fashion",
        "query": "odd",
        "product_category": "A › B",
        "images": [""],
    },
    {
        "asin": "B000000002",
        "name": "duplicate asin: skipped",
        "full_description": "",
        "small_description": [],
        "pricing": "",
        "customization_options": None,
        "category": "x",
        "query": "x",
        "product_category": "x",
        "images": [""],
    },
    {
        "asin": "nan",
        "name": "asin nan: skipped",
        "full_description": "",
        "small_description": [],
        "pricing": "",
        "customization_options": None,
        "category": "x",
        "query": "x",
        "product_category": "x",
        "images": [""],
    },
]
WEBSHOP_HANDMADE_ATTRIBUTES = {
    "B000000001": {
        "attributes": ["tea tree", "sulfate free"],
        "instruction": "Find me sulfate free shampoo with tea tree",
        "instruction_attributes": ["sulfate free", "tea tree"],
    },
    "B000000002": {
        "attributes": ["machine wash"],
        "instruction": "Find me machine wash men's shorts",
        "instruction_attributes": ["machine wash"],
    },
    "B000000003": {"attributes": [], "instruction": None},
    "B000000004": {},
}
WEBSHOP_HANDMADE_HUMAN = {
    "B000000001": [
        {
            "asin": "B000000001",
            "instruction": "I need a lavender shampoo.",
            "instruction_attributes": ["tea tree"],
            "instruction_options": ["lavender | mint"],
        },
        {
            "asin": "B000000001",
            "instruction": "...a big shampoo",
            "instruction_attributes": ["sulfate free"],
            "instruction_options": ["16 fl oz"],
        },
    ],
    "B000000002": [
        {
            "asin": "B000000002",
            "instruction": "i want navy blue men's shorts, small size.",
            "instruction_attributes": ["machine wash"],
            "instruction_options": ["navy blue", "small"],
        },
        {
            "asin": "B000000002",
            "instruction": "shorts without attributes are dropped",
            "instruction_attributes": [],
            "instruction_options": [],
        },
    ],
}


@pytest.fixture(scope="session")
def webshop_handmade_dir(tmp_path_factory) -> Path:
    """A directory with WebShop's own files, hand-made (items_shuffle_1000, items_ins_v2_1000, items_human_ins)."""
    import json

    d = tmp_path_factory.mktemp("webshop_own_files")
    (d / "items_shuffle_1000.json").write_text(json.dumps(WEBSHOP_HANDMADE_PRODUCTS))
    (d / "items_ins_v2_1000.json").write_text(json.dumps(WEBSHOP_HANDMADE_ATTRIBUTES))
    (d / "items_human_ins.json").write_text(json.dumps(WEBSHOP_HANDMADE_HUMAN))
    return d


def _hypothesis_profiles() -> None:
    """`SCPO_HYPOTHESIS_PROFILE=mutation` (set by `make mutate`): the same examples on every run, no example database,
    so a mutant's verdict never depends on the draw; no shrinking (a mutant is killed by the first failing example)."""
    from hypothesis import Phase, settings

    settings.register_profile(
        "mutation",
        derandomize=True,
        database=None,
        deadline=None,
        print_blob=False,
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
    )
    settings.load_profile(os.environ.get("SCPO_HYPOTHESIS_PROFILE", "default"))


_hypothesis_profiles()

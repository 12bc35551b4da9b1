"""The WebShop catalogue builder: category parsing, splits, price bounds, determinism, goal feasibility."""

from __future__ import annotations

import json
import random

import pytest

from scpo.envs.webshop.catalogue import build_catalogue, load_catalogue, parse_category, price_bound, split_ranges
from scpo.envs.webshop.generate import (BEAUTY_COLORS, BEAUTY_SIZES, CLOTHING_SIZES, DEVICE_COLORS, FLAVORS,
                                        FURNITURE_COLORS, SHOE_SIZES, option_schema)
from scpo.envs.webshop.reward import webshop_reward


@pytest.fixture(scope="module")
def small_catalogue(webshop_sample_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("data") / "webshop"
    summary = build_catalogue(webshop_sample_dir, out, n_products=150, n_goals=90, seed=0)
    return summary, out, load_catalogue(out.parent)


@pytest.mark.parametrize("instruction, attributes, expected", [
    ("Find me hair treatment oils for hair treatment, damaged hair", ["hair treatment", "damaged hair"],
     "hair treatment oils"),
    ("Find me fragrance free, anti aging eyes care with green tea, hyaluronic acid for dark circles",
     ["fragrance free", "anti aging", "green tea", "hyaluronic acid", "dark circles"], "eyes care"),
    ("Find me cruelty free, high quality makeup brushes & tools", ["cruelty free", "high quality"],
     "makeup brushes & tools"),
    ("Find me machine wash men's underwear with comfortable fit for everyday wear",
     ["machine wash", "comfortable fit", "everyday wear"], "men's underwear"),
    ("I want some shoes", ["rubber sole"], None),
])
def test_parse_category(instruction, attributes, expected):
    assert parse_category(instruction, attributes) == expected


@pytest.mark.parametrize("category, groups, first_values", [
    ("women's boots", ["size", "color"], SHOE_SIZES),
    ("men's t-shirts & tanks", ["size", "color"], CLOTHING_SIZES),
    ("bar stools", ["color", "size"], FURNITURE_COLORS),
    ("hdmi cables", ["color", "size", "style"], DEVICE_COLORS),
    ("snack nuts & seeds", ["flavor", "size"], FLAVORS),
    ("hair treatment oils", ["size", "scent"], BEAUTY_SIZES),
    ("lips makeup", ["color", "size"], BEAUTY_COLORS),
])
def test_option_schema_by_category_words(category, groups, first_values):
    schema = option_schema(category)
    assert list(schema) == groups and schema[groups[0]] is first_values


def test_split_ranges_follow_webshop():
    assert split_ranges(12087) == {"test": (0, 500), "valid": (500, 1500), "train": (1500, 12087)}
    assert split_ranges(3000) == {"test": (0, 500), "valid": (500, 1500), "train": (1500, 3000)}
    assert split_ranges(100) == {"test": (0, 16), "valid": (16, 49), "train": (49, 100)}
    with pytest.raises(ValueError, match="n_goals=2"):
        split_ranges(2)


def test_price_bound_is_the_larger_of_two_of_the_next_four_tens():
    bounds = {price_bound(random.Random(s), 9.99) for s in range(200)}
    assert bounds == {20.0, 30.0, 40.0}  # max of 2 draws from {10, 20, 30, 40} is never 10
    assert {price_bound(random.Random(s), 975.0) for s in range(20)} == {990.0}  # candidates {980, 990}
    assert price_bound(random.Random(0), 985.0) is None  # only 990 remains: no price clause


def test_summary_counts(small_catalogue):
    summary, _, cat = small_catalogue
    assert summary["products"] == len(cat.products) == 150
    assert summary["goals"] == len(cat.goals) == 90
    assert (summary["test goals"], summary["valid goals"], summary["train goals"]) == (15, 30, 45)
    assert summary["human goals"] == sum(g.source == "human" for g in cat.goals) > 0


def test_build_is_deterministic(small_catalogue, webshop_sample_dir, tmp_path):
    _, out, _ = small_catalogue
    again = tmp_path / "webshop"
    build_catalogue(webshop_sample_dir, again, n_products=150, n_goals=90, seed=0)
    for name in ("products.json", "goals.json", "meta.json"):
        assert (again / "catalogue" / name).read_bytes() == (out / "catalogue" / name).read_bytes()
    other = tmp_path / "other" / "webshop"
    build_catalogue(webshop_sample_dir, other, n_products=150, n_goals=90, seed=1)
    assert (other / "catalogue" / "goals.json").read_bytes() != (out / "catalogue" / "goals.json").read_bytes()


def test_goals_are_satisfiable_by_their_product(small_catalogue, webshop_sample_dir):
    _, _, cat = small_catalogue
    raw = json.loads((webshop_sample_dir / "items_ins_v2_10000.json").read_text())
    for g in cat.goals:
        p = cat.by_asin[g.asin]
        offered = {v for values in p.options.values() for v in values}
        assert set(g.options) <= offered, (g, p.options)
        assert g.price_upper is None or p.price <= g.price_upper
        if g.price_upper is not None:
            assert g.instruction.endswith(f", and price lower than {g.price_upper:.2f} dollars")
        if g.source == "synthetic":  # real instruction text and attributes, options appended as WebShop does
            assert g.instruction.startswith(raw[g.asin]["instruction"])
            assert list(g.attributes) == [a.lower() for a in raw[g.asin]["instruction_attributes"]]
            for name, value in g.option_names.items():
                assert f"{name}: {value}" in g.instruction
        assert p.category in p.title.lower()
        chosen = {next(n for n, vs in p.options.items() if v in vs): v for v in g.options}
        assert webshop_reward(p, g, p, chosen).score == pytest.approx(1.0), g


def test_products_keep_real_attributes(small_catalogue, webshop_sample_dir):
    _, _, cat = small_catalogue
    raw = json.loads((webshop_sample_dir / "items_ins_v2_10000.json").read_text())
    for p in cat.products:
        assert list(p.attributes) == list(dict.fromkeys(a.lower() for a in raw[p.asin]["attributes"]))


def test_too_many_products_or_goals_is_an_error_naming_the_value(webshop_sample_dir, tmp_path):
    with pytest.raises(ValueError, match="n_products=99999"):
        build_catalogue(webshop_sample_dir, tmp_path / "webshop", n_products=99999, n_goals=10, seed=0)
    with pytest.raises(ValueError, match="n_goals=100000"):
        build_catalogue(webshop_sample_dir, tmp_path / "webshop", n_products=20, n_goals=100000, seed=0)


def test_missing_catalogue_says_how_to_build_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="prepare-data"):
        load_catalogue(tmp_path)

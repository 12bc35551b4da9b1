"""The WebShop catalogue (products + goals + splits) that `scpo prepare-data` builds under data/webshop/catalogue/.

Two sources, one code path (`source.load_products` -> `goals` -> `goals.order_goals`), as WebShop's SimServer runs it:
- WebShop's own files (`items_shuffle*.json` + `items_ins_v2*.json` [+ `items_human_ins*.json`] in the raw directory,
  e.g. from `data.webshop_source`): the real catalogue, nothing generated.
- Otherwise the public files (`items_ins_v2_10000.json`, `items_human_ins_10000.json`): `generate.generate_record` makes
  a product record in WebShop's format for each product whose synthetic instruction "Find me <attrs> <category> with
  <attrs> for <attrs>" names a category (4,455 of 10,000); the products with human instructions come first, the rest
  are a seeded draw; the records are written to `generated_items_shuffle.json` (WebShop can load that file too).

Goals: `goals="synthetic"` (WebShop's default text env: every option combination of every product with a synthetic
instruction) or `goals="human"` (its human-instruction goals, where the catalogue has the products). Reward prices and
price bounds are drawn from random.Random(seed), in WebShop's order. Goal order: shuffled with Random(233); `n_goals`
below the count draws that many distinct goals by weight (WebShop's `limit_goals`); None keeps all.

Splits: WebShop's ranges of the goal list, test [0, 500), valid [500, 1500), train [1500, n) (`split_ranges`), for
n >= 3,000 goals; smaller lists keep the proportions: test = the first min(500, n // 6), valid = the next
min(1000, n // 3), train = the rest (WebShop's baselines put every goal in every split when the product count is small).
"""

from __future__ import annotations

import functools
import json
import os
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

from scpo.envs.webshop import generate as gen
from scpo.envs.webshop.goals import Goal, human_goals, order_goals, synthetic_goals
from scpo.envs.webshop.source import Product, find_original_files, load_products, read_json

__all__ = [
    "Product",
    "Goal",
    "Catalogue",
    "build_catalogue",
    "load_catalogue",
    "split_ranges",
    "parse_category",
    "catalogue_dir",
    "SPLITS",
    "GOAL_MODES",
    "GENERATED_PRODUCT_FILE",
]

SPLITS = ("test", "valid", "train")
GOAL_MODES = ("synthetic", "human")
CATALOGUE_VERSION = 2
GENERATED_PRODUCT_FILE = "generated_items_shuffle.json"
PUBLIC_ATTRIBUTES = "items_ins_v2_10000.json"
PUBLIC_HUMAN = "items_human_ins_10000.json"


def split_ranges(n_goals: int) -> dict[str, tuple[int, int]]:
    """WebShop's goal splits as [start, end) ranges: test [0, 500), valid [500, 1500), train [1500, n) when n >= 3000;
    smaller lists keep the proportions (test min(500, n // 6), valid min(1000, n // 3), train the rest)."""
    if n_goals < 3:
        raise ValueError(f"n_goals={n_goals}: need at least 3 goals (one per split)")
    n_test = min(500, n_goals // 6) or 1
    n_valid = min(1000, n_goals // 3) or 1
    return {"test": (0, n_test), "valid": (n_test, n_test + n_valid), "train": (n_test + n_valid, n_goals)}


def parse_category(instruction: str, attributes: list[str]) -> str | None:
    """The category of a synthetic instruction "Find me {adjs} {category}[ with {nouns}][ for {uses}]", where adjs,
    nouns and uses are consecutive runs of `attributes` (WebShop's template); None when the text does not fit the
    template."""
    prefix = "Find me "
    if not instruction.startswith(prefix):
        return None
    body = instruction[len(prefix) :]
    n = len(attributes)
    for i in range(n + 1):
        head = ", ".join(attributes[:i]) + " " if i else ""
        if not body.startswith(head):
            continue
        for j in range(i, n + 1):
            tail = (" with " + ", ".join(attributes[i:j]) if j > i else "") + (
                " for " + ", ".join(attributes[j:]) if j < n else ""
            )
            if body.endswith(tail) and len(body) > len(head) + len(tail):
                category = body[len(head) : len(body) - len(tail)].strip()
                if category:
                    return category.lower()
    return None


def catalogue_dir(data_root: str | Path = "data") -> Path:
    return Path(data_root) / "webshop" / "catalogue"


def _human_options(instructions: list[dict]) -> dict[str, list[str]]:
    """Option groups seen in a product's human instructions ("size: 7.5" -> {"size": ["7.5"]}), values lowercased."""
    groups: dict[str, list[str]] = {}
    for ins in instructions:
        for opt in ins["options"]:
            name, sep, value = opt.partition(": ")
            if sep and value.strip():
                values = groups.setdefault(name.strip().lower(), [])
                if value.strip().lower() not in values:
                    values.append(value.strip().lower())
    return groups


def generated_records(items: dict, human: dict, n_products: int, seed: int) -> list[dict]:
    """WebShop-format records for `n_products` products of the public files (see the module docstring), ASIN order."""
    categories = {
        asin: parse_category(it["instruction"], it["instruction_attributes"])
        for asin, it in items.items()
        if it.get("instruction")
    }
    eligible = sorted(a for a, c in categories.items() if c)
    if n_products > len(eligible):
        raise ValueError(
            f"n_products={n_products}: the public files give at most {len(eligible)} products with a "
            "category (products whose synthetic instruction names one)"
        )
    human_asins = [a for a in eligible if a in human]
    others = [a for a in eligible if a not in human]
    random.Random(seed).shuffle(others)
    chosen = sorted((human_asins + others)[:n_products])
    return [
        gen.generate_record(a, items[a]["attributes"], categories[a], seed, _human_options(human.get(a, [])))
        for a in chosen
    ]


def _write_json(path: Path, payload, indent: int | None = None) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(payload, indent=indent))
    os.replace(tmp, path)


def build_catalogue(
    raw_dir: str | Path,
    out_dir: str | Path,
    n_products: int,
    n_goals: int | None,
    seed: int = 0,
    goals: str = "synthetic",
) -> dict:
    """Build the catalogue into `out_dir/catalogue/` {products,goals,meta}.json (out_dir is data/webshop) and return its
    summary counts. WebShop's own product file in `raw_dir` is used when present (its first `n_products` records),
    else a generated catalogue of `n_products` products. Deterministic for a given seed."""
    if goals not in GOAL_MODES:
        raise ValueError(f"goals={goals!r}; allowed: {', '.join(GOAL_MODES)}")
    if n_goals is not None and n_goals < 3:
        raise ValueError(f"n_goals={n_goals}: need at least 3 goals (one per split), or None for all")
    raw_dir, out_dir = Path(raw_dir), Path(out_dir)
    out = out_dir / "catalogue"
    out.mkdir(parents=True, exist_ok=True)
    files = find_original_files(raw_dir)
    if files.products is not None:
        if files.attributes is None:
            raise FileNotFoundError(
                f"{files.products} needs WebShop's attribute file items_ins_v2*.json beside it in {raw_dir}"
            )
        records, source = read_json(files.products), f"webshop files: {files.products.name}"
        attributes = read_json(files.attributes)
        human = read_json(files.human) if files.human is not None else {}
        limit = n_products
    else:
        attributes = read_json(raw_dir / PUBLIC_ATTRIBUTES)
        human = read_json(raw_dir / PUBLIC_HUMAN)
        records = generated_records(attributes, human, n_products, seed)
        _write_json(out / GENERATED_PRODUCT_FILE, records)
        source, limit = f"generated from {PUBLIC_ATTRIBUTES}", None
    rng = random.Random(seed)
    products, instructions = load_products(records, attributes, human, num_products=limit, rng=rng)
    pool = synthetic_goals(products, rng) if goals == "synthetic" else human_goals(products, instructions, rng)
    if n_goals is not None and n_goals > len(pool):
        raise ValueError(
            f"n_goals={n_goals}: {len(products)} products give {len(pool)} {goals} goals; raise "
            "data.webshop_n_products or lower data.webshop_n_goals"
        )
    ordered = [dict(index=i, **g) for i, g in enumerate(order_goals(pool, limit=n_goals))]
    ranges = split_ranges(len(ordered))
    meta = {
        "version": CATALOGUE_VERSION,
        "seed": seed,
        "source": source,
        "goals": goals,
        "n_products": len(products),
        "n_goals": len(ordered),
        "n_goal_pool": len(pool),
        "splits": {k: list(v) for k, v in ranges.items()},
    }
    _write_json(out / "products.json", [asdict(p) for p in products])
    _write_json(out / "goals.json", ordered)
    _write_json(out / "meta.json", meta, indent=2)
    return {
        "source": source,
        "products": len(products),
        "goal mode": goals,
        "goal pool": len(pool),
        "goals": len(ordered),
        **{f"{k} goals": e - s for k, (s, e) in ranges.items()},
    }


@dataclass
class Catalogue:
    """Products (by ASIN) and goals of one built catalogue, with its split ranges."""

    products: list[Product]
    goals: list[Goal]
    splits: dict[str, tuple[int, int]]
    root: Path
    meta: dict = field(default_factory=dict)
    by_asin: dict[str, Product] = field(init=False)

    def __post_init__(self) -> None:
        self.by_asin = {p.asin: p for p in self.products}

    @functools.cached_property
    def search(self):
        """The BM25 product search over this catalogue (built on first use, shared by every env on the catalogue)."""
        from scpo.envs.webshop.search import ProductSearch

        return ProductSearch(self.products)

    @functools.cached_property
    def cum_weights(self) -> dict[str, list[float]]:
        """Per split, WebShop's cumulative goal weights ([0, w0, w0 + w1, ...]) for `goals.random_idx`."""
        from scpo.envs.webshop.goals import cumulative_weights

        return {s: cumulative_weights([self.goals[i].weight for i in self.split_indices(s)]) for s in self.splits}

    def split_indices(self, split: str) -> range:
        if split not in self.splits:
            raise ValueError(f"unknown WebShop split {split!r}; allowed: {', '.join(SPLITS)}")
        return range(*self.splits[split])

    def split_of(self, index: int) -> str:
        for name, (start, end) in self.splits.items():
            if start <= index < end:
                return name
        raise ValueError(f"goal index {index} outside the catalogue's {len(self.goals)} goals")


def _product(d: dict) -> Product:
    tuples = ("attributes", "features", "reviews", "instruction_attributes", "generated")
    return Product(**{k: tuple(v) if k in tuples else v for k, v in d.items()})


def _goal(d: dict) -> Goal:
    opts = d["goal_options"]
    return Goal(
        **{
            **d,
            "attributes": tuple(d["attributes"]),
            "goal_options": dict(opts) if isinstance(opts, dict) else tuple(opts),
        }
    )


@functools.lru_cache(maxsize=4)
def _load(path: str, mtime: float) -> Catalogue:
    root = Path(path)
    meta = json.loads((root / "meta.json").read_text())
    if meta.get("version") != CATALOGUE_VERSION:
        raise ValueError(
            f"the WebShop catalogue at {root} has format version {meta.get('version')}, this code reads "
            f"{CATALOGUE_VERSION}; rebuild it with `scpo prepare-data --only webshop`"
        )
    products = [_product(p) for p in json.loads((root / "products.json").read_text())]
    goals = [_goal(g) for g in json.loads((root / "goals.json").read_text())]
    return Catalogue(products, goals, {k: tuple(v) for k, v in meta["splits"].items()}, root, meta)


def load_catalogue(data_root: str | Path = "data") -> Catalogue:
    """The catalogue built under `data_root/webshop/catalogue` (cached; reloaded when it is rebuilt)."""
    root = catalogue_dir(data_root).resolve()
    meta = root / "meta.json"
    if not meta.is_file():
        raise FileNotFoundError(f"no WebShop catalogue at {root}; build it with `scpo prepare-data --only webshop`")
    return _load(str(root), meta.stat().st_mtime_ns)

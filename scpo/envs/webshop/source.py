"""WebShop's own file formats: finding the files and loading products the way `web_agent_site/engine/engine.py` does.

Files (as WebShop's setup.sh downloads them, or the public subsets):
- products `items_shuffle*.json`: a list of scraped products {asin, name, full_description, small_description, pricing,
  customization_options, category, query, product_category, images, ...};
- attributes `items_ins_v2*.json`: {asin: {attributes, instruction, instruction_attributes}};
- human instructions `items_human_ins*.json`: {asin: [{instruction, instruction_attributes, instruction_options, ...}]}.

`load_products` is WebShop's `load_products` + `generate_product_prices`, field by field:
- the first `num_products` records; records whose asin is 'nan' or longer than 10 characters, and repeated asins, are
  skipped; Title = name, Description = full_description, BulletPoints = small_description (a string becomes a 1-list);
- pricing "$a" or "$a ... $b": the numbers after each '$' (non-digits removed, Decimal -> float); none -> [100.0]; the
  page shows "$a" or "$a to $b" (Python's float repr: "$34.0"); the price the reward compares is a, or
  uniform(a, b) drawn from `rng` for a range (WebShop draws it from the unseeded global `random`);
- options: {name.lower(): [value.strip().replace('/', ' | ').lower(), ...]} from customization_options;
- Attributes: the attribute file's list for the asin, else ['DUMMY_ATTR']; query lowercased and stripped;
- rating 'N.A.' and no reviews (WebShop's review loading is commented out).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

__all__ = ["Product", "OriginalFiles", "find_original_files", "load_products", "parse_pricing", "read_json"]


@dataclass(frozen=True)
class Product:
    """One product as WebShop's engine holds it (field names: ours; WebShop's in the comments)."""

    asin: str
    title: str  # Title (= name)
    query: str  # query: the search query the product was collected under (lowercased, stripped)
    category: str  # category: the main category (beauty, electronics, fashion, garden, grocery)
    product_category: str  # product_category: "A › B › C"
    price: float  # product_prices[asin]: what the reward compares with the goal's bound
    price_tag: str  # Price: "$12.99" or "$10.0 to $20.5", as pages show it
    attributes: tuple[str, ...]  # Attributes
    options: dict[str, list[str]]  # options: group name -> values
    description: str  # Description (= full_description)
    features: tuple[str, ...]  # BulletPoints (= small_description)
    rating: str = "N.A."  # Rating
    reviews: tuple[str, ...] = ()  # Reviews
    instruction: str | None = None  # the attribute file's synthetic instruction (None: none)
    instruction_attributes: tuple[str, ...] = ()  # ... and its attributes
    generated: tuple[str, ...] = field(default=())  # fields made up by generate.py (empty for WebShop's own files)


@dataclass(frozen=True)
class OriginalFiles:
    """The WebShop files found in one directory (None where absent)."""

    products: Path | None
    attributes: Path | None
    human: Path | None


def _pick(directory: Path, stem: str) -> Path | None:
    """`stem.json` (the full file) if present, else the `stem_<n>.json` with the largest n."""
    full = directory / f"{stem}.json"
    if full.is_file():
        return full
    sized = []
    for p in directory.glob(f"{stem}_*.json"):
        suffix = p.stem[len(stem) + 1 :]
        if suffix.isdigit():
            sized.append((int(suffix), p))
    return max(sized)[1] if sized else None


def find_original_files(directory: str | Path) -> OriginalFiles:
    """WebShop's product, attribute and human-instruction files in `directory`: `items_shuffle.json` /
    `items_ins_v2.json` / `items_human_ins.json` when present, else the `_<n>` variant with the largest n. The attribute
    file paired with `items_shuffle_<n>.json` is `items_ins_v2_<n>.json` when it exists (WebShop's small setup)."""
    d = Path(directory)
    products = _pick(d, "items_shuffle")
    attributes = _pick(d, "items_ins_v2")
    if products is not None and products.stem != "items_shuffle":
        paired = d / f"items_ins_v2{products.stem[len('items_shuffle') :]}.json"
        if paired.is_file():
            attributes = paired
    return OriginalFiles(products, attributes, _pick(d, "items_human_ins"))


def read_json(path: Path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def parse_pricing(pricing: str | None) -> tuple[list[float], str]:
    """WebShop's price parsing: ([a] or [a, b], shown tag). Missing or empty -> ([100.0], '$100.0')."""
    if pricing is None or not pricing:
        return [100.0], "$100.0"
    values = [float(Decimal(re.sub(r"[^\d.]", "", piece))) for piece in pricing.split("$")[1:]]
    if len(values) == 1:
        return values, f"${values[0]}"
    return values[:2], f"${values[0]} to ${values[1]}"


def load_products(
    records: list[dict], attributes: dict, human: dict | None = None, num_products: int | None = None, rng=None
) -> tuple[list[Product], dict[str, list[dict]]]:
    """WebShop's load_products over already parsed records: (products in file order, {asin: human instructions}).
    `rng` (a random.Random) draws the reward price of products with a price range, in product order."""
    if num_products is not None:
        records = records[:num_products]
    seen: set[str] = set()
    products: list[Product] = []
    instructions: dict[str, list[dict]] = {}
    for p in records:
        asin = p["asin"]
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        pricing, price_tag = parse_pricing(p.get("pricing"))
        options: dict[str, list[str]] = {}
        for name, contents in (p.get("customization_options") or {}).items():
            if contents is None:
                continue
            options[name.lower()] = [c["value"].strip().replace("/", " | ").lower() for c in contents]
        bullets = p["small_description"]
        features = tuple(bullets) if isinstance(bullets, list) else (bullets,)
        attrs = attributes.get(asin, {})
        if human and asin in human:
            instructions[asin] = human[asin]
        products.append(
            Product(
                asin=asin,
                title=p["name"],
                query=p["query"].lower().strip(),
                category=p["category"],
                product_category=p["product_category"],
                price=_reward_price(pricing, rng),
                price_tag=price_tag,
                attributes=tuple(attrs["attributes"]) if "attributes" in attrs else ("DUMMY_ATTR",),
                options=options,
                description=p["full_description"],
                features=features,
                instruction=attrs.get("instruction"),
                instruction_attributes=tuple(attrs.get("instruction_attributes") or ()),
                generated=tuple(p.get("generated_fields", ())),
            )
        )
    return products, instructions


def _reward_price(pricing: list[float], rng) -> float:
    if len(pricing) == 1:
        return pricing[0]
    if rng is None:
        raise ValueError("a product with a price range needs rng= to draw its reward price")
    return rng.uniform(*pricing[:2])

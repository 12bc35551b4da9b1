"""Generated product records for the WebShop catalogue, in WebShop's own product-file format (`items_shuffle*.json`).

The public WebShop files give each product its real attributes and (through its synthetic instruction) its real leaf
category; the product file itself (titles, prices, options, descriptions) is not public here, so `generate_record`
makes a record of that format from the real fields, with a per-product random stream (`product_rng`), so a product
looks the same whatever catalogue it is part of. Real: asin, query (= the leaf category), option values named in human
instructions. Generated (listed in the record's "generated_fields"): name (brand + attributes + category), price,
the other option values, full_description, small_description, category (the main category, from the leaf's kind) and
product_category ("<main> › <leaf>"). Reviews: none, as WebShop shows (its review loading is commented out).
"""

from __future__ import annotations

import math
import random
import re

from scpo.batch import stable_uid

__all__ = [
    "product_rng",
    "option_schema",
    "generate_options",
    "generate_price",
    "generate_title",
    "generate_description",
    "generate_features",
    "generate_brand",
    "title_case",
    "main_category",
    "generate_record",
    "GENERATED_FIELDS",
]

# option vocabularies by kind (lowercase: WebShop's clickables are lowercase)
CLOTHING_SIZES = ["x-small", "small", "medium", "large", "x-large", "xx-large", "3x-large"]
SHOE_SIZES = ["5", "5.5", "6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12"]
BED_SIZES = ["twin", "full", "queen", "king", "california king"]
FURNITURE_SIZES = ["small", "medium", "large", "24 inch", "36 inch", "48 inch"]
BEAUTY_SIZES = [
    "0.5 fl oz (pack of 1)",
    "1 fl oz (pack of 1)",
    "1.7 fl oz (pack of 1)",
    "3.4 fl oz (pack of 1)",
    "8 fl oz (pack of 2)",
    "16 fl oz (pack of 1)",
]
PACK_SIZES = ["pack of 1", "pack of 2", "pack of 3", "pack of 6", "pack of 12"]
CABLE_SIZES = ["3 ft", "6 ft", "10 ft", "15 ft"]
CLOTHING_COLORS = [
    "black",
    "white",
    "navy blue",
    "heather grey",
    "red",
    "olive green",
    "light pink",
    "burgundy",
    "khaki",
]
FURNITURE_COLORS = ["espresso", "white", "black", "walnut", "natural oak", "grey", "cherry"]
BEAUTY_COLORS = ["natural", "black", "dark brown", "light brown", "nude", "rose gold", "red", "pink"]
DEVICE_COLORS = ["black", "white", "silver", "space grey", "blue", "red"]
SCENTS = ["unscented", "lavender", "coconut", "rose", "vanilla", "citrus", "fresh", "eucalyptus mint"]
FLAVORS = ["original", "chocolate", "vanilla", "strawberry", "sea salt", "honey", "spicy", "mint"]
STYLES = ["basic", "pro", "with case", "2-pack", "bundle"]  # no colour inside a word ("standard" holds "tan")

# WebShop's domains recognised by whole words of the leaf category (a multi-word keyword matches as a phrase)
_FOOTWEAR = {
    "shoes",
    "boots",
    "sneakers",
    "loafers",
    "slip-ons",
    "mules",
    "clogs",
    "oxfords",
    "sandals",
    "slippers",
    "footwear",
    "flats",
    "pumps",
}
_CLOTHING_PREFIXES = ("men's ", "women's ", "boys' ", "girls' ")
_BEDS = {"beds", "bedframes", "mattresses", "bedroom sets"}
_FURNITURE = {
    "chairs",
    "rugs",
    "plants",
    "racks",
    "bases",
    "sideboards",
    "cabinets",
    "candles",
    "mirrors",
    "tables",
    "desks",
    "lamps",
    "furniture",
    "trees",
    "islands",
    "nightstands",
    "ottomans",
    "planters",
    "sconces",
    "sofas",
    "couches",
    "benches",
    "vanities",
    "art",
    "coverings",
    "dressers",
    "bookcases",
    "book cases",
    "armoires",
    "organizers",
    "stools",
    "pillows",
    "blankets",
    "baskets",
    "chandeliers",
    "bulbs",
    "stands",
    "dining sets",
    "living room sets",
}
_DEVICES = {
    "cables",
    "cases",
    "batteries",
    "speakers",
    "speaker",
    "phones",
    "chargers",
    "cameras",
    "headphones",
    "iphone",
    "mounts",
    "wireless",
    "projectors",
    "remotes",
    "protectors",
    "tablets",
    "video",
    "surveillance",
    "receivers",
    "amplifiers",
    "binoculars",
    "blu-ray",
    "headsets",
    "radios",
    "dvd",
    "cd",
    "photography",
    "flashes",
    "theater",
    "systems",
    "lenses",
    "lighting",
    "mac",
    "pc",
    "playstation",
    "xbox",
    "power",
    "printers",
    "screens",
    "satellite",
    "television",
    "televisions",
    "signal",
    "sim",
    "watches",
    "streaming",
    "tripods",
    "vcrs",
    "virtual",
    "wearable",
    "boomboxes",
    "turntables",
    "soundbars",
    "online",
    "car accessories",
}
_FOOD = {
    "beverages",
    "foods",
    "candy",
    "chocolate",
    "chips",
    "snacks",
    "snack",
    "bars",
    "cookies",
    "meat",
    "seafood",
    "cakes",
    "crackers",
    "nuts",
    "pretzels",
    "puddings",
    "applesauce",
    "fruit",
    "breads",
    "breadsticks",
    "butter",
    "cheese",
    "cheeses",
    "dairy",
    "eggs",
    "raisins",
    "meal",
    "frozen",
    "substitutes",
    "milks",
    "creams",
    "pantry",
    "party mix",
    "popcorn",
    "peas",
    "granola",
    "gifts",
}
_COLORED_BEAUTY = {"makeup", "nail", "coloring", "lip", "eyes", "brushes", "wigs", "extensions", "palettes"}
_WORDS = re.compile(r"[a-z0-9'\-]+")


def product_rng(seed: int, asin: str) -> random.Random:
    """A random stream owned by one product: `random.Random(sha1(seed, asin))`."""
    return random.Random(int(stable_uid("webshop-product", seed, asin), 16))


def title_case(text: str) -> str:
    """'women's tops, tees & blouses' -> "Women's Tops, Tees & Blouses" (str.title would give "Women'S")."""
    return " ".join(w[:1].upper() + w[1:] for w in text.split(" "))


def _has(category: str, words: set[str]) -> bool:
    tokens = set(_WORDS.findall(category))
    return any((w in category) if " " in w else (w in tokens) for w in words)


def option_schema(category: str) -> dict[str, list[str]]:
    """Option groups a product of `category` may have: {group name: vocabulary}, by keywords of the category."""
    c = category.lower()
    if _has(c, _FOOTWEAR):
        return {"size": SHOE_SIZES, "color": CLOTHING_COLORS}
    if c.startswith(_CLOTHING_PREFIXES) and "fragrance" not in c:
        return {"size": CLOTHING_SIZES, "color": CLOTHING_COLORS}
    if _has(c, _BEDS):
        return {"size": BED_SIZES, "color": FURNITURE_COLORS}
    if _has(c, _FURNITURE):
        return {"color": FURNITURE_COLORS, "size": FURNITURE_SIZES}
    if _has(c, _DEVICES):
        return {"color": DEVICE_COLORS, "size": CABLE_SIZES if "cables" in c else PACK_SIZES, "style": STYLES}
    if _has(c, _FOOD):
        return {"flavor": FLAVORS, "size": PACK_SIZES}
    if _has(c, _COLORED_BEAUTY):
        return {"color": BEAUTY_COLORS, "size": BEAUTY_SIZES}
    return {"size": BEAUTY_SIZES, "scent": SCENTS}  # beauty & personal care: most of the public products


def generate_options(
    rng: random.Random, category: str, real: dict[str, list[str]] | None = None
) -> dict[str, list[str]]:
    """Option groups {name: values}. Without `real` values: 0-2 groups of the category's schema (10% / 30% / 60%), each
    with 2-5 values in vocabulary order. With `real` (values seen in human instructions): exactly those groups, each
    filled up to 3-5 values from the schema's vocabulary of the same name when there is one."""
    schema = option_schema(category)
    if real:
        groups = {}
        for name, values in real.items():
            vocab = schema.get(name, [])
            extra = [v for v in vocab if v not in values]
            n_extra = max(0, min(len(extra), rng.randint(3, 5) - len(values)))
            groups[name] = list(dict.fromkeys(values + rng.sample(extra, n_extra)))
        return groups
    n_groups = rng.choices([0, 1, 2], weights=[0.1, 0.3, 0.6])[0]
    names = list(schema)[:n_groups]
    groups = {}
    for name in names:
        vocab = schema[name]
        picked = set(rng.sample(vocab, rng.randint(2, min(5, len(vocab)))))
        groups[name] = [v for v in vocab if v in picked]
    return groups


def generate_price(rng: random.Random) -> float:
    """Price in dollars: log-normal around $30 (sigma 0.9), clipped to [2.99, 899.99], ending in .99."""
    p = math.exp(rng.gauss(math.log(30.0), 0.9))
    return float(min(max(math.floor(p), 2), 899)) + 0.99


_SYLLABLES = [
    "lu",
    "mo",
    "ra",
    "vi",
    "ko",
    "ne",
    "sa",
    "ti",
    "zen",
    "dor",
    "ka",
    "mi",
    "pel",
    "ro",
    "fy",
    "na",
    "qu",
    "bel",
    "tex",
    "ori",
    "va",
    "lin",
    "so",
    "ax",
]


def generate_brand(rng: random.Random) -> str:
    """A made-up brand name of 2-3 syllables, e.g. 'Lumora'."""
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def generate_title(rng: random.Random, brand: str, category: str, attributes: list[str]) -> str:
    """'<Brand> <up to 3 attributes> <Category>[ - <2 more attributes>]', title-cased, as Amazon-style titles read."""
    attrs = list(attributes)
    rng.shuffle(attrs)
    head, tail = attrs[:3], attrs[3:5]
    title = " ".join([brand] + [title_case(a) for a in head] + [title_case(category)])
    if tail:
        title += " - " + ", ".join(title_case(a) for a in tail)
    return title


_DESCRIPTION_TEMPLATES = [
    "Our {category} is made for everyday use. {attr_sentence} Backed by a 30-day satisfaction guarantee.",
    "Discover the {brand} {category}. {attr_sentence} A thoughtful choice for yourself or as a gift.",
    "Designed and tested by {brand}. {attr_sentence} Easy to order, fast to arrive.",
]
_FEATURE_TEMPLATES = [
    "{Attr}: made with {attr} in mind",
    "{Attr} - quality you can feel",
    "{Attr}: trusted by thousands of customers",
    "Features {attr} for better results",
]


def generate_description(rng: random.Random, brand: str, category: str, attributes: list[str]) -> str:
    """One paragraph naming the category and every attribute."""
    if attributes:
        attr_sentence = (
            "It is " + (", ".join(attributes[:-1]) + " and " if len(attributes) > 1 else "") + attributes[-1] + "."
        )
    else:
        attr_sentence = ""
    return rng.choice(_DESCRIPTION_TEMPLATES).format(category=category, brand=brand, attr_sentence=attr_sentence)


def generate_features(rng: random.Random, attributes: list[str]) -> list[str]:
    """One bullet point per attribute."""
    return [rng.choice(_FEATURE_TEMPLATES).format(Attr=title_case(a), attr=a) for a in attributes]


# WebShop's five main categories (its `category` field) and the top level of their product_category paths
_MAIN = {
    "fashion": "Clothing, Shoes & Jewelry",
    "garden": "Home & Kitchen",
    "electronics": "Electronics",
    "grocery": "Grocery & Gourmet Food",
    "beauty": "Beauty & Personal Care",
}
GENERATED_FIELDS = (
    "name",
    "pricing",
    "customization_options",
    "full_description",
    "small_description",
    "category",
    "product_category",
)


def main_category(category: str) -> str:
    """WebShop's main category of a leaf category, by the same keywords as `option_schema`."""
    c = category.lower()
    if _has(c, _FOOTWEAR) or (c.startswith(_CLOTHING_PREFIXES) and "fragrance" not in c):
        return "fashion"
    if _has(c, _BEDS) or _has(c, _FURNITURE):
        return "garden"
    if _has(c, _DEVICES):
        return "electronics"
    if _has(c, _FOOD):
        return "grocery"
    return "beauty"


def generate_record(
    asin: str, attributes: list[str], category: str, seed: int, real_options: dict[str, list[str]] | None = None
) -> dict:
    """A product record in WebShop's items_shuffle format for a product with real `attributes` and leaf `category`."""
    rng = product_rng(seed, asin)
    attrs = list(dict.fromkeys(a.strip().lower() for a in attributes if a.strip()))
    brand = generate_brand(rng)
    title = generate_title(rng, brand, category, attrs)
    price = generate_price(rng)
    options = generate_options(rng, category, real_options)
    description = generate_description(rng, brand, category, attrs)
    features = generate_features(rng, attrs)
    main = main_category(category)
    return {
        "asin": asin,
        "name": title,
        "full_description": description,
        "small_description": features or [""],
        "pricing": f"${price:.2f}",
        "customization_options": {k: [{"value": v, "image": None} for v in vs] for k, vs in options.items()} or None,
        "category": main,
        "query": category,
        "product_category": f"{_MAIN[main]} › {title_case(category)}",
        "images": [""],
        "generated_fields": list(GENERATED_FIELDS),
    }

"""WebShop's purchase reward, ported from `web_agent_site/engine/goal.py::get_reward` (Yao et al. 2022, Sec. 3.2).

    score = (n_attr + n_opt + [price <= price_upper]) / (|attributes| + |goal_options| + 1) * r_type

- n_attr: goal attributes g (in order) with token_set_ratio(p, g) > 85 for some product attribute p, else with g a
  substring of the lowercased title, of the lowercased " ".join(features) or of the lowercased description. g itself is
  not lowercased.
- n_opt: goal options g with token_set_ratio(p, g) > 85 for some chosen option value p, both through normalize_color.
  A synthetic goal's options are a {name: value} dict and WebShop iterates its `.items()`: each goal option is the pair
  (name, value), so normalize_color tests a colour's *membership in the pair* (it returns e.g. "black" only when the
  value is exactly "black") and the matcher sees the pair's string "('size', 'small')", i.e. tokens {size, small}.
  A chosen "x-small" therefore does not match ("x small" vs "size small" scores 67), while "small" does (a token
  subset scores 100). A human goal's options are plain strings.
- price term: price <= price_upper (WebShop's bound is 1,000,000 when the instruction has no price clause).
- r_type: 1 if the product's search query equals the goal's, or >= 2 '›'-separated category levels are shared, or the
  title score > 0.2; else 0.5; then 0.1 if the title score < 0.1 and 0 if it is 0. The title score is
  |set(nouns(product name)) & set(nouns(goal name))| / len(nouns(goal name)): the denominator counts repeated nouns
  (0.2 when the goal name has none). Nouns: `nouns.title_nouns` (spaCy, or its documented fallback).
- matcher: `fuzzy.token_set_ratio`, thefuzz 0.19.0's scorer on its difflib backend (integer score).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from scpo.envs.webshop.fuzzy import FUZZY_THRESHOLD, token_set_ratio
from scpo.envs.webshop.nouns import title_nouns

__all__ = [
    "RewardBreakdown",
    "webshop_reward",
    "get_reward",
    "get_reward_from_dicts",
    "type_reward",
    "attribute_reward",
    "option_reward",
    "normalize_color",
    "FUZZY_THRESHOLD",
    "COLOR_SET",
    "NO_PRICE_BOUND",
]

NO_PRICE_BOUND = 1000000.0  # WebShop's price_upper when the instruction has no price clause

# WebShop's colour list (web_agent_site/engine/normalize.py), in its order: normalize_color returns the first hit
COLOR_SET = [
    "alabaster",
    "apricot",
    "aqua",
    "ash",
    "asphalt",
    "azure",
    "banana",
    "beige",
    "black",
    "blue",
    "blush",
    "bordeaux",
    "bronze",
    "brown",
    "burgundy",
    "camel",
    "camo",
    "caramel",
    "champagne",
    "charcoal",
    "cheetah",
    "chestnut",
    "chocolate",
    "christmas",
    "coffee",
    "cognac",
    "copper",
    "coral",
    "cranberry",
    "cream",
    "crystal",
    "dark",
    "denim",
    "eggplant",
    "elephant",
    "espresso",
    "fuchsia",
    "gold",
    "granite",
    "grape",
    "graphite",
    "grass",
    "gray",
    "green",
    "grey",
    "heather",
    "indigo",
    "ivory",
    "ivy",
    "khaki",
    "lavender",
    "lemon",
    "leopard",
    "light",
    "lilac",
    "lime",
    "magenta",
    "maroon",
    "mauve",
    "merlot",
    "midnight",
    "mint",
    "mocha",
    "multicolor",
    "mushroom",
    "mustard",
    "natural",
    "navy",
    "nude",
    "olive",
    "orange",
    "peach",
    "pewter",
    "pink",
    "plum",
    "purple",
    "rainbow",
    "red",
    "rose",
    "royal",
    "rust",
    "sand",
    "sapphire",
    "seashell",
    "silver",
    "skull",
    "slate",
    "steel",
    "stone",
    "stonewash",
    "sunflower",
    "tan",
    "taupe",
    "teal",
    "tiger",
    "turquoise",
    "violet",
    "walnut",
    "wheat",
    "white",
    "wine",
    "yellow",
]


@dataclass(frozen=True)
class RewardBreakdown:
    score: float
    r_type: float
    attr_matches: int
    option_matches: int
    price_ok: bool
    n_attributes: int
    n_options: int
    query_match: bool
    category_match: bool
    title_score: float


def normalize_color(option: object) -> object:
    """WebShop's normalize_color: the first colour c of COLOR_SET with `c in option`, else `option` unchanged. For a
    string that is a substring test; for a (name, value) pair it is membership in the pair."""
    for color in COLOR_SET:
        if color in option:  # type: ignore[operator]
            return color
    return option


def type_reward(
    product_query: str,
    goal_query: str,
    product_category: str,
    goal_category: str,
    product_name: str,
    goal_name: str,
    nouns: Callable[[str], Sequence[str]] = title_nouns,
) -> tuple[float, bool, bool, float]:
    """(r_type, query_match, category_match, title_score): WebShop's get_type_reward."""
    query_match = product_query == goal_query
    levels_p = {x.strip() for x in product_category.split("›")}
    levels_g = {x.strip() for x in goal_category.split("›")}
    category_match = len(levels_p & levels_g) >= 2
    desired = list(nouns(goal_name))
    n_intersect = len(set(nouns(product_name)) & set(desired))
    title_score = 0.2 if not desired else n_intersect / len(desired)
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def attribute_reward(
    goal_attributes: Sequence[str],
    product_attributes: Iterable[str],
    title: str,
    features: Iterable[str],
    description: str,
) -> int:
    """WebShop's get_attribute_reward: the number of goal attributes matched (see the module docstring)."""
    product_attributes = list(product_attributes)
    title_l, features_l, description_l = title.lower(), " ".join(features).lower(), description.lower()
    n = 0
    for g in goal_attributes:
        fuzzy = any(token_set_ratio(p, g) > FUZZY_THRESHOLD for p in product_attributes)
        if fuzzy or g in title_l or g in features_l or g in description_l:
            n += 1
    return n


def option_reward(chosen: Iterable[str], goal_options: Mapping[str, str] | Sequence[str]) -> int:
    """WebShop's get_option_reward: the number of goal options matched by a chosen value. A dict of goal options is
    iterated as (name, value) pairs, as WebShop's `goal['goal_options'].items()`."""
    targets = list(goal_options.items()) if isinstance(goal_options, Mapping) else list(goal_options)
    chosen_n = [normalize_color(o) for o in chosen]
    goals_n = [normalize_color(g) for g in targets]
    return sum(any(token_set_ratio(p, g) > FUZZY_THRESHOLD for p in chosen_n) for g in goals_n)


def get_reward(
    product, goal, price: float, options: Mapping[str, str], nouns: Callable[[str], Sequence[str]] = title_nouns
) -> RewardBreakdown:
    """WebShop's get_reward(purchased_product, goal, price, options): `product` a catalogue.Product, `goal` a
    catalogue.Goal, `price` the price the reward compares (Product.price), `options` the chosen {group: value}."""
    r_type, query_match, category_match, title_score = type_reward(
        product.query, goal.query, product.product_category, goal.product_category, product.title, goal.name, nouns
    )
    n_attr = attribute_reward(goal.attributes, product.attributes, product.title, product.features, product.description)
    n_opt = option_reward(list(options.values()), goal.goal_options)
    price_ok = bool(price <= goal.price_upper)
    total = (n_attr + n_opt + price_ok) / (len(goal.attributes) + len(goal.goal_options) + 1)
    return RewardBreakdown(
        score=total * r_type,
        r_type=r_type,
        attr_matches=n_attr,
        option_matches=n_opt,
        price_ok=price_ok,
        n_attributes=len(goal.attributes),
        n_options=len(goal.goal_options),
        query_match=query_match,
        category_match=category_match,
        title_score=title_score,
    )


def webshop_reward(
    product, goal, chosen_options: Mapping[str, str], nouns: Callable[[str], Sequence[str]] = title_nouns
) -> RewardBreakdown:
    """The purchase of `product` with `chosen_options` scored against `goal` at the product's own price."""
    return get_reward(product, goal, product.price, chosen_options, nouns)


def get_reward_from_dicts(
    purchased_product: Mapping,
    goal: Mapping,
    price: float,
    options: Mapping[str, str],
    nouns: Callable[[str], Sequence[str]] = title_nouns,
) -> float:
    """`get_reward` with WebShop's own argument shapes, for comparing against its code: a purchased product dict with
    'query', 'product_category', 'name' (type), 'Title', 'BulletPoints', 'Description', 'Attributes' (attributes), a
    goal dict with 'query', 'product_category', 'name', 'attributes', 'goal_options', 'price_upper'. Returns the score.
    """
    r_type, *_ = type_reward(
        purchased_product["query"],
        goal["query"],
        purchased_product["product_category"],
        goal["product_category"],
        purchased_product["name"],
        goal["name"],
        nouns,
    )
    n_attr = attribute_reward(
        goal["attributes"],
        purchased_product["Attributes"],
        purchased_product["Title"],
        purchased_product["BulletPoints"],
        purchased_product["Description"],
    )
    n_opt = option_reward(list(options.values()), goal["goal_options"])
    total = (n_attr + n_opt + (price <= goal["price_upper"])) / (
        len(goal["attributes"]) + len(goal["goal_options"]) + 1
    )
    return total * r_type

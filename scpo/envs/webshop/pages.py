"""WebShop's pages in its text observation mode (`WebAgentTextEnv(observation_mode="text")`), without the HTML.

WebShop renders each page from its template (`web_agent_site/templates/*.html`), parses it with BeautifulSoup and
joins the stripped visible strings with " [SEP] ", leaving out strings that are exactly "\\n". BeautifulSoup turns a
whitespace-only string into "\\n" when it holds a newline and into " " otherwise, so a value that is empty or
whitespace shows up as nothing (no string, or "\\n") or as an empty field (" " strips to ""); `_visible` applies that
rule to each rendered value. The pages (fields in order):

    search   WebShop | Instruction: | <goal> | Search
    results  Instruction: | <goal> | Back to Search | Page <p> (Total results: <n>) | [< Prev (p > 1)] | Next > |
             then per product: <ASIN> | <title> | <price tag>
    item     Instruction: | <goal> | Back to Search | < Prev | per option group: <name> | <values...> | <title> |
             Price: <price tag> | Rating: <rating> | Description | Features | Reviews | Buy Now
    sub      Instruction: | <goal> | Back to Search | < Prev | <description> or <each bullet> (reviews: none)
    done     WebShop's done page with the text env's missing fields (see `done_page`)

"Next >" is always shown (page p + 1 past the last result is an empty page). Each page also returns its clickables in
WebShop's `get_available_actions` order (buttons, then product links, then option values, lowercased for buttons and
links; a repeated key keeps its first position), which become the admissible `click[...]` commands.
"""

from __future__ import annotations

import json

__all__ = [
    "SEP",
    "RESULTS_PER_PAGE",
    "BACK_TO_SEARCH",
    "NEXT",
    "PREV",
    "BUY_NOW",
    "SUB_PAGES",
    "search_page",
    "results_page",
    "item_page",
    "sub_page",
    "done_page",
    "without_instruction",
]

SEP = " [SEP] "
RESULTS_PER_PAGE = 10
BACK_TO_SEARCH, NEXT, PREV, BUY_NOW = "back to search", "next >", "< prev", "buy now"
SUB_PAGES = ("description", "features", "reviews")
_ASCII_SPACE = " \n\t\f\r"  # BeautifulSoup's whitespace (ASCII only)


def _visible(text: object) -> list[str]:
    """The field(s) one rendered text contributes (BeautifulSoup's whitespace rule, then strip)."""
    s = text if type(text) is str else str(text)
    if not s.strip(_ASCII_SPACE):
        return [] if (s == "" or "\n" in s) else [""]
    return [s.strip()]


def _join(fields: list[str]) -> str:
    return SEP.join(fields)


def _instruction(instruction: str) -> list[str]:
    return ["Instruction:", *_visible(instruction)]


def search_page(instruction: str) -> tuple[str, list[str]]:
    # the search page's heading is "Instruction: <br>"; stripped, as on the other pages
    return _join(["WebShop", *_instruction(instruction), "Search"]), ["search"]


def results_page(instruction: str, products: list, page: int, total: int) -> tuple[str, list[str]]:
    """`products`: the products shown on this page (at most 10); `total`: the number of results."""
    fields = [*_instruction(instruction), "Back to Search", f"Page {page} (Total results: {total})"]
    clickables = [BACK_TO_SEARCH]
    if page > 1:
        fields.append("< Prev")
        clickables.append(PREV)
    fields.append("Next >")
    clickables.append(NEXT)
    for p in products:
        fields += [*_visible(p.asin), *_visible(p.title), *_visible(p.price_tag)]
        key = str(p.asin).lower()
        if key not in clickables:
            clickables.append(key)
    return _join(fields), clickables


def item_page(instruction: str, product) -> tuple[str, list[str], dict[str, str]]:
    """(text, clickables, option value -> its group): a value offered by two groups belongs to the last one."""
    fields = [*_instruction(instruction), "Back to Search", "< Prev"]
    groups: dict[str, str] = {}
    for name, values in product.options.items():
        fields += _visible(name)
        for v in values:
            fields += _visible(v)
            groups[v] = name
    fields += [
        *_visible(product.title),
        *_visible(f"Price: {product.price_tag}"),
        *_visible(f"Rating: {product.rating}"),
        "Description",
        "Features",
        "Reviews",
        "Buy Now",
    ]
    clickables = [BACK_TO_SEARCH, PREV, *SUB_PAGES, BUY_NOW]
    clickables += [v for v in dict.fromkeys(groups) if v not in clickables]
    return _join(fields), clickables, groups


def sub_page(instruction: str, product, which: str) -> tuple[str, list[str]]:
    if which == "description":
        body = _visible(product.description)
    elif which == "features":
        body = [f for bullet in product.features for f in _visible(f" {bullet}")]
    elif which == "reviews":
        body = []  # WebShop loads no reviews
    else:
        raise ValueError(f"unknown item sub-page {which!r}; allowed: {', '.join(SUB_PAGES)}")
    return _join([*_instruction(instruction), "Back to Search", "< Prev", *body]), [BACK_TO_SEARCH, PREV]


def _tojson(options: dict[str, str]) -> str:
    """Jinja's `tojson` as Flask configures it: sorted keys, ASCII, and <, >, &, ' escaped."""
    text = json.dumps(options, sort_keys=True, ensure_ascii=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").replace("'", "\\u0027")


def done_page(asin: str, options: dict[str, str], score: float) -> tuple[str, list[str]]:
    """WebShop's done page as its text env renders it: the MTurk code and the purchase details it does not pass are
    "None" or empty; the options are JSON; the score is Python's float text."""
    fields = [
        "Thank you for shopping with us!",
        "Your code:",
        "None",
        "(Paste it in your MTurk interface.)",
        "Purchased",
        "asin",
        *_visible(asin),
        "options",
        _tojson(options),
        "attrs",
        "None",
        "category",
        "None",
        "query",
        "None",
        "product category",
        "None",
        "Target",
        "asin",
        "options",
        "attrs",
        "price upper",
        "instuction text",
        "category",
        "product category",
        "query",
        "Goal",
        "None",
        "Reward",
        "Your score (min 0.0, max 1.0)",
        str(score),
        "Reward Details",
        "None",
    ]
    return _join(fields), []


def without_instruction(page: str, task: str) -> str:
    """The fields of `page` after the field `task` (the goal as the search page shows it), each in single quotes and
    joined by " [SEP] ": verl-agent's WebShop observation without its instruction header; `page` itself when no field
    is `task` (the done page)."""
    parts = page.split(SEP)
    if task not in parts:
        return page
    return SEP.join(f"'{p}'" for p in parts[parts.index(task) + 1 :])

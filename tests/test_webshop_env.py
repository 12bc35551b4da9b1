"""The WebShop environment: pages, actions, episode rules, task ids and the registry."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scpo.envs
from scpo.envs import webshop
from scpo.envs.webshop.catalogue import build_catalogue
from scpo.envs.webshop.env import SEARCH_TEMPLATE, format_task_id, parse_task_id
from scpo.envs.webshop.reward import webshop_reward

SEP = " [SEP] "


@pytest.fixture(scope="module")
def data_root(webshop_sample_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    build_catalogue(webshop_sample_dir, root / "webshop", n_products=300, n_goals=120, seed=0)
    return root


@pytest.fixture(scope="module")
def catalogue(data_root):
    return webshop.load_catalogue(data_root)


def goal_with_options(catalogue, n_options=2):
    """The first test-split goal whose product has `n_options` option groups and whose goal names that many options."""
    for i in catalogue.split_indices("test"):
        g = catalogue.goals[i]
        if len(g.options) == n_options and len(catalogue.by_asin[g.asin].options) == n_options:
            return g
    raise AssertionError("no such goal")


def test_list_tasks_and_task_ids(data_root, catalogue):
    tasks = webshop.list_tasks("test", data_root)
    assert tasks == sorted(tasks) and len(tasks) == 20  # min(500, 120 // 6)
    assert tasks[:2] == ["webshop:test:00000", "webshop:test:00001"]
    assert webshop.list_tasks("valid", data_root, limit=3) == ["webshop:valid:00020", "webshop:valid:00021",
                                                               "webshop:valid:00022"]
    assert parse_task_id("webshop:train:00123") == ("train", 123)
    with pytest.raises(ValueError, match="'dev'"):
        webshop.list_tasks("dev", data_root)
    with pytest.raises(ValueError, match="'webshop:nope'"):
        parse_task_id("webshop:nope")
    with pytest.raises(ValueError, match="not in this catalogue's test split"):
        webshop.make_env("webshop:test:00050", data_root)
    assert webshop.task_type("webshop:test:00000", data_root) == catalogue.goals[0].source


def test_search_page_and_results_pages(data_root, catalogue):
    env = webshop.make_env("webshop:test:00000", data_root)
    obs, info = env.reset()
    goal = catalogue.goals[0]
    assert obs == f"WebShop{SEP}Instruction:{SEP}{goal.instruction}{SEP}Search"
    assert info["admissible_commands"] == [SEARCH_TEMPLATE]
    assert (info["goal"], info["won"], info["task_score"], info["step"]) == (goal.instruction, False, 0.0, 0)

    query = next(q for q in ("free", "easy", "quality", "women's") if len(catalogue.search.search(q)) > 10)
    obs, reward, done, info = env.step(f"search[{query}]")
    results = catalogue.search.search(query)
    assert (reward, done, info["action_valid"], info["page"]) == (0.0, False, True, "results")
    body = obs.split(SEP)[3:]
    assert body[:3] == ["Back to Search", f"Page 1 (Total results: {len(results)})", "Next >"]
    assert body[3:6] == [results[0], catalogue.by_asin[results[0]].title, f"${catalogue.by_asin[results[0]].price:.2f}"]
    assert len(body) == 3 + 3 * 10
    assert info["admissible_commands"] == ["click[back to search]", "click[next >]"] + \
        [f"click[{a.lower()}]" for a in results[:10]]

    obs, _, _, info = env.step("click[Next >]")  # labels are case-insensitive, as in WebShop
    assert obs.split(SEP)[3:6] == ["Back to Search", f"Page 2 (Total results: {len(results)})", "< Prev"]
    assert f"click[{results[10].lower()}]" in info["admissible_commands"]
    obs, _, _, _ = env.step("click[< prev]")
    assert "Page 1 (Total" in obs
    obs, _, _, info = env.step("click[back to search]")
    assert obs.endswith(f"{SEP}Search") and info["admissible_commands"] == [SEARCH_TEMPLATE]


def test_item_page_subpages_and_options(data_root, catalogue):
    g = goal_with_options(catalogue)
    product = catalogue.by_asin[g.asin]
    env = webshop.make_env(format_task_id("test", g.index), data_root)
    env.reset()
    env.step(f"search[{product.title}]")
    obs, _, _, info = env.step(f"click[{product.asin.lower()}]")
    groups = [part for name, values in product.options.items() for part in [name, *values]]
    assert obs.split(SEP)[3:] == ["Back to Search", "< Prev", *groups, product.title, f"Price: ${product.price:.2f}",
                                  f"Rating: {product.rating}", "Description", "Features", "Reviews", "Buy Now"]
    values = [v for vs in product.options.values() for v in vs]
    assert info["admissible_commands"] == ["click[back to search]", "click[< prev]"] + \
        [f"click[{v}]" for v in dict.fromkeys(values)] + \
        ["click[description]", "click[features]", "click[reviews]", "click[buy now]"]
    obs, _, _, info = env.step("click[features]")
    assert obs.split(SEP)[3:] == ["Back to Search", "< Prev", *product.features]
    assert info["admissible_commands"] == ["click[back to search]", "click[< prev]"]
    obs, _, _, _ = env.step("click[< prev]")
    obs, _, _, _ = env.step("click[description]")
    assert obs.split(SEP)[-1] == product.description
    obs, _, _, _ = env.step("click[< prev]")
    assert obs.endswith("Buy Now")
    obs, _, _, _ = env.step("click[< prev]")  # back to the results page it came from
    assert "Page 1 (Total results" in obs


def test_inadmissible_actions_leave_the_page_unchanged(data_root):
    env = webshop.make_env("webshop:test:00001", data_root, max_steps=6)
    obs0, _ = env.reset()
    for bad in ["click[buy now]", "search[]", SEARCH_TEMPLATE, "go north", ""]:
        obs, reward, done, info = env.step(bad)
        assert (obs, reward, info["action_valid"]) == (obs0, 0.0, False), bad
    assert info["step"] == 5 and not done
    obs, _, done, info = env.step("search[tea]")
    assert done and info["action_valid"] and info["task_score"] == 0.0 and not info["won"]  # max_steps reached
    with pytest.raises(RuntimeError, match="reset"):
        env.step("click[back to search]")


def test_search_is_only_admissible_on_the_search_page(data_root):
    env = webshop.make_env("webshop:test:00001", data_root)
    env.reset()
    obs, _, _, _ = env.step("search[tea]")
    obs2, _, _, info = env.step("search[coffee]")
    assert obs2 == obs and not info["action_valid"]


def test_purchase_ends_the_episode_with_the_reward(data_root, catalogue):
    g = goal_with_options(catalogue)
    product = catalogue.by_asin[g.asin]
    env = webshop.make_env(format_task_id("test", g.index), data_root)
    # right product, only the first goal option chosen: score = (|A| + 1 + price) / (|A| + 2 + 1) by the reward rule
    env.reset()
    env.step(f"search[{product.title}]")
    env.step(f"click[{product.asin}]")
    env.step(f"click[{g.options[0]}]")
    obs, reward, done, info = env.step("click[buy now]")
    expected = (len(g.attributes) + 1 + 1) / (len(g.attributes) + 2 + 1)
    assert done and reward == 0.0 and not info["won"]
    assert info["task_score"] == pytest.approx(expected)
    assert obs.startswith("Thank you for shopping with us!") and obs.endswith(f"{expected:.2f}")
    # every goal option chosen: score 1.0, reward 10
    env.reset()
    env.step(f"search[{product.title}]")
    env.step(f"click[{product.asin}]")
    for option in g.options:
        env.step(f"click[{option}]")
    _, reward, done, info = env.step("click[Buy Now]")
    assert (reward, done, info["won"], info["task_score"]) == (10.0, True, True, pytest.approx(1.0))


def test_other_product_scored_by_the_reward_function(data_root, catalogue):
    g = catalogue.goals[2]
    env = webshop.make_env(format_task_id("test", 2), data_root)
    env.reset()
    _, _, _, info = env.step("search[bed frame]")
    other = next(a for a in info["admissible_commands"] if re.fullmatch(r"click\[b[0-9a-z]{9}\]", a))[6:-1].upper()
    assert other != g.asin
    env.step(f"click[{other}]")
    _, _, done, info = env.step("click[buy now]")
    expected = webshop_reward(catalogue.by_asin[other], g, catalogue.by_asin[g.asin], {}).score
    assert done and info["task_score"] == pytest.approx(expected) and expected < 1.0


def test_registry_and_split_sampling(data_root, catalogue):
    env = scpo.envs.make("webshop", split="valid", data_root=data_root, seed=3)
    seen = {env.reset()[1]["task_id"] for _ in range(10)}
    assert all(t.startswith("webshop:valid:") for t in seen) and len(seen) > 1
    first = [scpo.envs.make("webshop", split="valid", data_root=data_root, seed=3).reset()[1]["task_id"] for _ in range(2)]
    assert first[0] == first[1]  # same seed, same draw
    with pytest.raises(ValueError, match="exactly one of task_id= or split="):
        scpo.envs.make("webshop", data_root=data_root)
    with pytest.raises(TypeError, match="engine"):
        webshop.make_env("webshop:test:00000", data_root, engine="fast")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.text(max_size=40), st.sampled_from(["click[next >]", "click[< prev]", "click[buy now]",
                                                                  "search[tea tree]", "click[back to search]"])),
                max_size=8))
def test_any_action_text_is_safe(data_root, actions):
    env = webshop.make_env("webshop:test:00004", data_root)
    obs, info = env.reset()
    for action in actions:
        before = obs
        obs, reward, done, info = env.step(action)
        if not info["action_valid"]:
            assert obs == before and reward == 0.0
        if done:
            break

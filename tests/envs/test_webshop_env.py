"""The WebShop environment against WebShop's own text env: pages, clickables and transitions on hand-made files in
WebShop's format (the expected strings are what WebShop's `WebAgentTextEnv` printed for the same files and actions),
action parsing, episode rules, task ids and the registry."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import scpo.envs
from scpo.envs import webshop
from scpo.envs.webshop.catalogue import build_catalogue
from scpo.envs.webshop.env import SEARCH_TEMPLATE, WebShopEnv, format_task_id, parse_action, parse_task_id
from scpo.envs.webshop.reward import get_reward

SEP = " [SEP] "
RESULTS = ("B000000002", "B000000001", "B000000003", "B000000004")
SHORTS = (
    "Back to Search [SEP] < Prev [SEP] color [SEP] navy blue [SEP] black [SEP] size [SEP] small [SEP] x-small [SEP] "
    "Kova Men's Shorts [SEP] Price: $10.0 to $20.5 [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] "
    "Reviews [SEP] Buy Now"
)
SHORTS_CLICKS = [
    "back to search",
    "< prev",
    "description",
    "features",
    "reviews",
    "buy now",
    "navy blue",
    "black",
    "small",
    "x-small",
]
PAGE1 = (
    "Back to Search [SEP] Page 1 (Total results: 4) [SEP] Next > [SEP] B000000002 [SEP] Kova Men's Shorts [SEP] "
    "$10.0 to $20.5 [SEP] B000000001 [SEP] Lumora Tea Tree Shampoo [SEP] $12.99 [SEP] B000000003 [SEP] Plain Mug "
    "[SEP] $100.0 [SEP] B000000004 [SEP] Odd <Title> & Co [SEP] $5.0"
)
ODD = (
    "Back to Search [SEP] < Prev [SEP] size [SEP] one size [SEP] big [SEP] fit [SEP] one size [SEP] slim [SEP] "
    "Odd <Title> & Co [SEP] Price: $5.0 [SEP] Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now"
)


class FixedSearch:
    """The search results WebShop's run used (its Lucene index replaced by a fixed list)."""

    def search(self, query):
        return RESULTS


@pytest.fixture(scope="module")
def own_catalogue(webshop_handmade_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    build_catalogue(webshop_handmade_dir, root / "webshop", n_products=10, n_goals=None, seed=0)
    cat = webshop.load_catalogue(root)
    cat.__dict__["search"] = FixedSearch()
    return cat


def env_on(cat, index=0, max_steps=None):
    env = WebShopEnv(cat, goal_index=index, max_steps=max_steps)
    obs, info = env.reset()
    return env, obs, info


def head(cat, index=0):
    return f"Instruction:{SEP}{cat.goals[index].instruction}{SEP}"


def clicks(info):
    return [a[6:-1] for a in info["admissible_commands"] if a.startswith("click[")]


def test_pages_and_clickables_equal_webshops(own_catalogue):
    cat = own_catalogue
    env, obs, info = env_on(cat)
    assert obs == f"WebShop{SEP}{head(cat)}Search"
    assert info["admissible_commands"] == [SEARCH_TEMPLATE] and info["page"] == "search"
    obs, _, _, info = env.step("search[Shorts Navy]")
    assert obs == head(cat) + PAGE1
    assert clicks(info) == ["back to search", "next >", "b000000002", "b000000001", "b000000003", "b000000004"]
    obs, _, _, info = env.step("click[b000000002]")
    assert obs == head(cat) + SHORTS and clicks(info) == SHORTS_CLICKS
    obs, _, _, info = env.step("click[features]")
    assert obs == head(cat) + "Back to Search [SEP] < Prev [SEP] Machine wash" and clicks(info) == [
        "back to search",
        "< prev",
    ]
    obs, _, _, _ = env.step("click[< prev]")
    assert obs == head(cat) + SHORTS
    obs, _, _, _ = env.step("click[description]")
    assert obs == head(cat) + "Back to Search [SEP] < Prev [SEP] Shorts."
    obs2, _, _, info = env.step("click[reviews]")  # not a clickable of a sub page: nothing happens
    assert obs2 == obs and not info["action_valid"]
    env.step("click[< prev]")
    obs, _, _, _ = env.step("click[< prev]")
    assert obs == head(cat) + PAGE1
    obs, _, _, info = env.step("click[next >]")  # "Next >" is shown on every page, even past the last result
    assert obs == head(cat) + "Back to Search [SEP] Page 2 (Total results: 4) [SEP] < Prev [SEP] Next >"
    assert clicks(info) == ["back to search", "< prev", "next >"]


def test_empty_and_whitespace_fields_follow_beautifulsoup(own_catalogue):
    cat = own_catalogue
    env, _, _ = env_on(cat)
    env.step("search[x]")
    obs, _, _, _ = env.step("click[b000000003]")
    assert (
        obs == head(cat) + "Back to Search [SEP] < Prev [SEP] Plain Mug [SEP] Price: $100.0 [SEP] Rating: N.A. "
        "[SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now"
    )
    obs, _, _, _ = env.step("click[features]")  # one empty bullet: an empty field
    assert obs == head(cat) + "Back to Search [SEP] < Prev [SEP] "
    env.step("click[< prev]")
    obs, _, _, _ = env.step("click[description]")  # an empty description: no field
    assert obs == head(cat) + "Back to Search [SEP] < Prev"
    env.step("click[< prev]")
    env.step("click[< prev]")
    obs, _, _, info = env.step("click[b000000004]")
    assert obs == head(cat) + ODD
    assert clicks(info) == [
        "back to search",
        "< prev",
        "description",
        "features",
        "reviews",
        "buy now",
        "one size",
        "big",
        "slim",
    ]
    obs, _, _, _ = env.step("click[features]")  # bullets "\n" (dropped), " " (empty), "real bullet"
    assert obs == head(cat) + "Back to Search [SEP] < Prev [SEP]  [SEP] real bullet"
    env.step("click[< prev]")
    obs, _, _, _ = env.step("click[description]")
    assert obs == head(cat) + "Back to Search [SEP] < Prev [SEP] line1\nline2"


def test_option_in_two_groups_goes_to_the_last_and_prev_clears_options(own_catalogue):
    cat = own_catalogue
    env, _, _ = env_on(cat)
    env.step("search[x]")
    env.step("click[b000000004]")
    env.step("click[one size]")
    assert env._options == {"fit": "one size"}
    env.step("click[features]")
    env.step("click[< prev]")  # back to the item page: options kept
    assert env._options == {"fit": "one size"}
    env.step("click[< prev]")  # back to the results: WebShop clears the options
    env.step("click[b000000004]")
    env.step("click[big]")
    obs, reward, done, info = env.step("click[buy now]")
    assert done and obs == (
        "Thank you for shopping with us! [SEP] Your code: [SEP] None [SEP] (Paste it in your MTurk interface.) [SEP] "
        'Purchased [SEP] asin [SEP] B000000004 [SEP] options [SEP] {"size": "big"} [SEP] attrs [SEP] None [SEP] '
        "category [SEP] None [SEP] query [SEP] None [SEP] product category [SEP] None [SEP] Target [SEP] asin [SEP] "
        "options [SEP] attrs [SEP] price upper [SEP] instuction text [SEP] category [SEP] product category [SEP] query "
        "[SEP] Goal [SEP] None [SEP] Reward [SEP] Your score (min 0.0, max 1.0) [SEP] 0.0 [SEP] Reward Details "
        "[SEP] None"
    )
    assert info["task_score"] == 0.0 and reward == 0.0 and info["admissible_commands"] == []


def test_search_works_on_every_page_and_actions_parse_like_webshop(own_catalogue):
    cat = own_catalogue
    env, obs0, _ = env_on(cat)
    for bad in ["Search[x]", "search[]", "click[]", "go north", "", "click[search]", "click[nothing]", "search[a\nb]"]:
        obs, reward, done, info = env.step(bad)
        assert (obs, reward, done, info["action_valid"]) == (obs0, 0.0, False, False), bad
    env.step("search[x]")
    obs, _, _, info = env.step("click[b000000002]")
    assert info["page"] == "item"
    obs, _, _, info = env.step("search[X]")  # a search from an item page: results again
    assert obs == head(cat) + PAGE1 and info["action_valid"]
    # name case-sensitive, argument lowercased, not stripped, trailing text ignored by re.match
    assert parse_action("click[Buy Now]") == ("click", "buy now")
    assert parse_action("Click[buy now]") == ("Click", "buy now")
    assert parse_action("click[ buy now]") == ("click", " buy now")
    assert parse_action("click[< prev]x") == ("click", "< prev")
    assert parse_action("search[a [b] c]") == ("search[a ", "b] c")  # not a search: the name is "search[a "
    assert parse_action("buy") == ("buy", None)
    env.step("click[B000000002]")
    _, _, _, info = env.step("click[ buy now]")
    assert not info["action_valid"]
    _, _, _, info = env.step("click[Navy Blue]")
    assert info["action_valid"] and env._options == {"color": "navy blue"}


def test_keywords_in_the_url_steer_prev_as_in_webshop(own_catalogue):
    # WebShop reads the page from its URL, which holds the search words: after searching "search_results", "< prev" on
    # an item page acts as the results page's "< prev" and goes to page 0
    cat = own_catalogue
    env, _, _ = env_on(cat)
    env.step("search[search_results]")
    env.step("click[b000000002]")
    obs, _, _, _ = env.step("click[< prev]")
    assert obs == head(cat) + "Back to Search [SEP] Page 0 (Total results: 4) [SEP] Next >"


def test_debugging_searches(own_catalogue):
    cat = own_catalogue
    env, _, _ = env_on(cat)
    obs, _, _, _ = env.step("search[<q> men's shorts]")
    assert "(Total results: 1)" in obs and "B000000002" in obs
    obs, _, _, _ = env.step("search[<c> fashion]")
    assert "(Total results: 2)" in obs
    obs, _, _, _ = env.step("search[<a> machine wash]")
    assert "(Total results: 0)" in obs
    obs, _, _, _ = env.step("search[<r>]")
    assert "(Total results: 4)" in obs


def test_purchase_scores_with_webshops_reward(own_catalogue):
    cat = own_catalogue
    g = cat.goals[0]
    assert (g.asin, g.goal_options) == ("B000000002", {"color": "navy blue", "size": "small"})
    env, _, _ = env_on(cat)
    env.step("search[x]")
    env.step("click[b000000002]")
    env.step("click[navy blue]")
    env.step("click[x-small]")
    _, reward, done, info = env.step("click[buy now]")
    # x-small does not match the goal's ('size', 'small'): (1 attribute + 1 option + price) / (1 + 2 + 1)
    p = cat.by_asin["B000000002"]
    assert info["task_score"] == get_reward(p, g, p.price, {"color": "navy blue", "size": "x-small"}).score
    assert info["task_score"] == pytest.approx((1 + 1 + int(p.price <= g.price_upper)) / 4)
    assert reward == 0.0 and done and not info["won"]
    env.reset()
    env.step("search[x]")
    env.step("click[b000000002]")
    env.step("click[small]")
    env.step("click[navy blue]")
    _, reward, done, info = env.step("click[buy now]")
    assert (reward, info["won"], info["task_score"]) == (10.0, True, 1.0)


def test_step_limit_is_ours_and_optional(own_catalogue):
    cat = own_catalogue
    env, _, _ = env_on(cat, max_steps=3)
    for _ in range(2):
        assert not env.step("click[nothing]")[2]
    _, _, done, info = env.step("search[x]")
    assert done and info["task_score"] == 0.0
    with pytest.raises(RuntimeError, match="reset"):
        env.step("click[back to search]")
    env, _, _ = env_on(cat, max_steps=None)
    assert not any(env.step("click[nothing]")[2] for _ in range(100))
    with pytest.raises(ValueError, match="max_steps"):
        WebShopEnv(cat, goal_index=0, max_steps=0)


def test_choice_commands_replace_the_search_placeholder(own_catalogue):
    cat = own_catalogue
    env, _, info = env_on(cat)
    assert (
        info["choice_commands"][0] == "search[find me machine wash men's shorts with color: navy blue, and size: small]"
    )
    assert all(c.startswith("search[") and "<" not in c for c in info["choice_commands"])
    _, _, _, info = env.step("search[x]")
    assert info["choice_commands"] == info["admissible_commands"]


def test_split_draws_are_weighted_like_webshops_random_idx(own_catalogue):
    cat = own_catalogue
    train = list(cat.split_indices("train"))
    env = WebShopEnv(cat, goal_pool="train", seed=5)
    drawn = [env.reset()[1]["task_id"] for _ in range(300)]
    # random_idx never returns the first index of the list it draws from
    assert format_task_id("train", train[0]) not in drawn and {format_task_id("train", i) for i in train[1:]} == set(
        drawn
    )
    again = WebShopEnv(cat, goal_pool="train", seed=5)
    assert [again.reset()[1]["task_id"] for _ in range(300)] == drawn


# ------------------------------------------------------------------ a generated catalogue: ids, registry, fuzzing
@pytest.fixture(scope="module")
def data_root(webshop_sample_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    build_catalogue(webshop_sample_dir, root / "webshop", n_products=300, n_goals=120, seed=0)
    return root


def test_list_tasks_and_task_ids(data_root):
    cat = webshop.load_catalogue(data_root)
    tasks = webshop.list_tasks("test", data_root)
    assert tasks == sorted(tasks) and len(tasks) == 20  # min(500, 120 // 6)
    assert tasks[:2] == ["webshop:test:00000", "webshop:test:00001"]
    assert webshop.list_tasks("valid", data_root, limit=3) == [
        "webshop:valid:00020",
        "webshop:valid:00021",
        "webshop:valid:00022",
    ]
    assert parse_task_id("webshop:train:00123") == ("train", 123)
    with pytest.raises(ValueError, match="'dev'"):
        webshop.list_tasks("dev", data_root)
    with pytest.raises(ValueError, match="'webshop:nope'"):
        parse_task_id("webshop:nope")
    with pytest.raises(ValueError, match="not in this catalogue's test split"):
        webshop.make_env("webshop:test:00050", data_root)
    assert webshop.task_type("webshop:test:00000", data_root) == cat.goals[0].source == "synthetic"
    assert webshop.make_env("webshop:test:00000", data_root).max_steps == 15


def test_registry_and_split_sampling(data_root):
    env = scpo.envs.make("webshop", split="valid", data_root=data_root, seed=3)
    seen = {env.reset()[1]["task_id"] for _ in range(10)}
    assert all(t.startswith("webshop:valid:") for t in seen) and len(seen) > 1
    first = [
        scpo.envs.make("webshop", split="valid", data_root=data_root, seed=3).reset()[1]["task_id"] for _ in range(2)
    ]
    assert first[0] == first[1]  # same seed, same draw
    with pytest.raises(ValueError, match="exactly one of task_id= or split="):
        scpo.envs.make("webshop", data_root=data_root)
    with pytest.raises(TypeError, match="engine"):
        webshop.make_env("webshop:test:00000", data_root, engine="fast")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.text(max_size=40),
            st.sampled_from(
                [
                    "click[next >]",
                    "click[< prev]",
                    "click[buy now]",
                    "search[tea tree]",
                    "click[back to search]",
                    "search[<r>]",
                    "search[<c>]",
                    "click[description]",
                ]
            ),
        ),
        max_size=8,
    )
)
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

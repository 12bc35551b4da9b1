"""WebShop prompts (verl-agent style) and the projection from model text to an action."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scpo.envs.webshop.prompts import build_prompt, project_action, strip_header

SEARCH_PAGE = "WebShop [SEP] Instruction: [SEP] find a red mug [SEP] Search"
RESULTS_PAGE = (
    "Instruction: [SEP] find a red mug [SEP] Back to Search [SEP] Page 1 (Total results: 1) "
    "[SEP] Next > [SEP] B000000001 [SEP] Red Mug [SEP] $5.99"
)
ITEM_ADMISSIBLE = ["click[back to search]", "click[< prev]", "click[red]", "click[buy now]"]


def test_strip_header():
    assert strip_header(SEARCH_PAGE) == "Search"
    assert strip_header(RESULTS_PAGE).startswith("Back to Search [SEP] Page 1")  # WebShop's other pages: no "WebShop"
    assert strip_header("Thank you for shopping with us! [SEP] x") == "Thank you for shopping with us! [SEP] x"


def test_prompt_without_history():
    p = build_prompt("find a red mug", SEARCH_PAGE, ["search[<your query>]"], [], step=0)
    assert "Your task is to: find a red mug." in p
    assert "Your current observation is: Search." in p
    assert "[\n'search[<your query>]'\n]" in p
    assert "<think> </think>" in p and "<action> </action>" in p
    assert "Prior to this step" not in p


def test_prompt_shows_the_last_history_length_steps():
    history = [(SEARCH_PAGE, "search[mug]"), (RESULTS_PAGE, "click[b000000001]"), ("item page", "click[red]")]
    p = build_prompt("find a red mug", "item page 2", ITEM_ADMISSIBLE, history, step=3, history_length=2)
    assert "already taken 3 step(s). Below are the most recent 2 observations" in p
    assert (
        "[Observation 2: 'Back to Search [SEP] Page 1 (Total results: 1) [SEP] Next > [SEP] B000000001 [SEP] "
        "Red Mug [SEP] $5.99',"
        " Action 2: 'click[b000000001]']" in p
    )
    assert "[Observation 3: 'item page', Action 3: 'click[red]']" in p
    assert "search[mug]" not in p
    assert "You are now at step 4 and your current observation is: item page 2." in p
    assert "'click[back to search]',\n'click[< prev]',\n'click[red]',\n'click[buy now]'" in p
    assert "Prior to this step" not in build_prompt("g", "o", ITEM_ADMISSIBLE, history, step=3, history_length=0)


def test_projection_of_well_formed_answers():
    assert project_action("<think>ok</think><action>click[Buy Now]</action>", ITEM_ADMISSIBLE) == (
        "click[buy now]",
        True,
    )
    assert project_action("<action> search[ Red  Mug ] </action>", ["search[<your query>]"]) == (
        "search[ red mug ]",
        True,
    )
    # the last tag wins
    assert project_action("<action>click[red]</action> no, <action>click[< prev]</action>", ITEM_ADMISSIBLE) == (
        "click[< prev]",
        True,
    )


def test_projection_of_inadmissible_or_malformed_answers():
    assert project_action("<action>click[blue]</action>", ITEM_ADMISSIBLE) == ("click[blue]", False)
    assert project_action("<action>search[mug]</action>", ITEM_ADMISSIBLE) == ("search[mug]", False)  # no search bar
    assert project_action("<action>search[]</action>", ["search[<your query>]"]) == ("search[]", False)
    assert project_action("<action>search[<your query>]</action>", ["search[<your query>]"])[1] is False
    assert project_action("click[red]", ITEM_ADMISSIBLE) == ("", False)  # no tag
    assert project_action("<action>click[red]", ITEM_ADMISSIBLE) == ("", False)  # unclosed tag
    assert project_action(None, ITEM_ADMISSIBLE) == ("", False)
    assert project_action("", []) == ("", False)
    action, valid = project_action("<action>" + "x" * 100_000 + "</action>", ITEM_ADMISSIBLE)
    assert not valid and len(action) <= 300


@settings(max_examples=300, deadline=None)
@given(st.text(), st.lists(st.text(max_size=30), max_size=5))
def test_projection_never_raises(text, admissible):
    action, valid = project_action(text, admissible)
    assert isinstance(action, str) and isinstance(valid, bool)
    assert not valid or "<action>" in text.lower()

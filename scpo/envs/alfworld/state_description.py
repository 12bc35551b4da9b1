"""ALFWorld's state description: the raw observation plus what the text alone does not say, tracked from the agent's
actions and the observations that answered them (the string verl-agent's GraphGPO recipe builds as its anchor state;
docs/algorithms.md, "GraphGPO", gives the format and where it comes from).

    description = f"{observation} Location: {location}. Items in hand (status): {holding}{status}. {moves} {commands}"

- `location`: "middle of a room" at reset, then the target of the last "go to X";
- `holding`: "nothing", or the X of the last "take X from Y" until it is put, moved or dropped;
- `status`: "(heated cooled ...)" from the item's recorded changes when the held item has any, "(unprocessed)" when it
  has none, "" when the hands are empty;
- `moves`: "History moving list by you: " + "<item>(<its status>) from <first place> move to <last place>;" per item
  picked up so far, in order of first pick-up: those put down elsewhere, and those with a recorded change not in
  hand; "" when there are none;
- `commands`: the admissible commands, sorted, joined by ",".

Only steps whose observation does not contain "Nothing happens" change the tracked state. Changes are read from the
action: "heat X with Y" / "cool ..." / "clean ..." record heated / cooled / cleaned when the observation names the verb;
"slice X with Y" records "sliced". Quirks of the recipe kept as they shape the string: an item's change record starts
as {heated, cooled, cleaned, slice} all false and slicing adds "sliced"; the held item's status gathers the records of
every item whose name occurs in the held item's name (a substring test); picking an item up again resets its last place
to its first.
"""

from __future__ import annotations

import re

__all__ = ["AlfworldStateTracker"]

_CHANGE = re.compile(r"^(heat|cool|clean|slice)\s+([\w\s\d]+?)(?:\s+with\s+[\w\s\d]+)?$")
_GO = re.compile(r"^go to\s+(.+)$")
_TAKE = re.compile(r"^take\s+(.+?)(?:\s+from\s+.+)?$")
_DROP = re.compile(r"^drop\s+(.+)$")
_PUT = re.compile(r"^(put|place)\s+(.+?)\s+(?:in|on)\s+.+$")
_MOVE = re.compile(r"^move\s+(.+?)(?:\s+to\s+.+)?$")
_RECORDED = {"heat": "heated", "cool": "cooled", "clean": "cleaned", "slice": "sliced"}
NOTHING = "nothing"


class AlfworldStateTracker:
    """Tracks location, held item, item changes and item moves over one episode; `describe` builds the string."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.location = "middle of a room"
        self.holding = NOTHING
        self.changes: dict[str, dict[str, bool]] = {}
        self.places: dict[str, dict[str, str]] = {}  # item -> {"old_location", "new_location"}

    def update(self, action: str, observation: str) -> None:
        """Account for `action`, answered by `observation` (nothing changes when it says "Nothing happens")."""
        if "Nothing happens" in observation:
            return
        act = str(action).lower().strip()
        self._record_change(act, observation)
        go = _GO.match(act)
        if go:
            self.location = go.group(1).strip()
        self._update_holding(act, observation)

    def _record_change(self, act: str, observation: str) -> None:
        m = _CHANGE.match(act)
        if not m or m.group(1) not in observation:
            return
        verb, item = m.group(1), m.group(2).strip()
        record = self.changes.setdefault(item, {"heated": False, "cooled": False, "cleaned": False, "slice": False})
        record[_RECORDED[verb]] = True

    def _update_holding(self, act: str, observation: str) -> None:
        before = self.holding
        take = _TAKE.match(act)
        if take and take.group(1).strip() in observation:
            self.holding = take.group(1).strip()
        for pattern, group in ((_DROP, 1), (_PUT, 2), (_MOVE, 1)):
            m = pattern.match(act)
            if m and m.group(group).strip() in observation:
                self.holding = NOTHING
        if before != self.holding:
            item = before if before != NOTHING else self.holding
            if item not in self.places:
                self.places[item] = {"old_location": self.location, "new_location": self.location}
            elif before == item:
                self.places[item]["new_location"] = self.location
            else:
                self.places[item]["new_location"] = self.places[item]["old_location"]

    def _status(self, item: str) -> str:
        return " ".join(s for s, done in self.changes.get(item, {}).items() if done)

    def describe(self, observation: str, admissible: list[str]) -> str:
        """The state description of `observation` with the tracked state and the `admissible` commands."""
        held = " ".join(s for k, record in self.changes.items() if k in self.holding for s, ok in record.items() if ok)
        held = f"({held})" if held else ("(unprocessed)" if self.holding != NOTHING else "")
        moves = ""
        for item, place in self.places.items():
            status = f"({self._status(item)})" if self._status(item) else "(unprocessed)"
            moved = place["old_location"] != place["new_location"]
            if moved or (status != "(unprocessed)" and self.holding != item):
                moves += f"{item}{status} from {place['old_location']} move to {place['new_location']};"
        moves = f"History moving list by you: {moves}" if moves else ""
        hand = f"Location: {self.location}. Items in hand (status): {self.holding}{held}."
        return f"{observation} {hand} {moves} {','.join(sorted(admissible))}"

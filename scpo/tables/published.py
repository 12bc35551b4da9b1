"""The published success rates we compare with, copied from docs/algorithms.md ("Published figures").

They come from other papers' models and scale (Qwen2.5-1.5B-Instruct unless marked 7B; 16 tasks x 8 rollouts, 150
iterations), never from this repository's runs: tables print them in a separate, labelled block, and the side-by-side
comparison uses the 1.5B figures only, and only those trained without dynamic sampling (`rollout.dynamic_sampling`, off
in our runs). GraphGPO's figures are its paper's as secondary sources quote them, and so are PPO's (GiGPO's Table 1,
"PPO (with critic)", as two independent transcriptions give it).
"""

from __future__ import annotations

import pandas as pd

__all__ = ["PUBLISHED_SCALE", "published_table", "published_by_method"]

PUBLISHED_SCALE = "Qwen2.5-1.5B-Instruct, 16 tasks x 8 rollouts, 150 iterations (numbers from each paper)"
MODEL_1_5B, MODEL_7B = "Qwen2.5-1.5B-Instruct", "Qwen2.5-7B-Instruct"

# model, method, source[, variant], ALFWorld all (%), its std, WebShop success (%), its std; None = not reported
_ROWS = [
    (MODEL_1_5B, "grpo", "GiGPO paper", 72.8, 3.6, 56.8, 3.8),
    (MODEL_1_5B, "gigpo", "GiGPO paper, scale std", 86.7, 1.7, 65.0, 3.2),
    (MODEL_1_5B, "gigpo", "GiGPO paper, scale none", 86.1, 4.7, 67.4, 4.5),
    (MODEL_1_5B, "hgpo", "HGPO paper", 92.8, None, 71.5, None),
    (MODEL_1_5B, "g2po", "G2PO paper", 95.0, 0.8, 71.2, 2.6),
    (MODEL_1_5B, "scpo", "SCPO paper", 93.7, 4.1, 74.8, 2.0),
    (MODEL_1_5B, "graphgpo", "GraphGPO paper (secondary sources)", 92.71, None, 78.65, None),
    (MODEL_1_5B, "rloo", "GiGPO paper", 69.7, 2.5, None, None),
    (MODEL_1_5B, "ppo", "GiGPO paper (secondary sources)", 54.4, 3.1, 51.5, 2.9),
    (MODEL_7B, "grpo", "GiGPO paper", 77.6, None, 66.1, None),
    (MODEL_7B, "gigpo", "GiGPO paper", 90.8, None, None, None),
    (MODEL_7B, "graphgpo", "GraphGPO paper (secondary sources)", 95.31, None, 80.31, None),
    (MODEL_7B, "rloo", "GiGPO paper", 75.5, None, None, None),
    (MODEL_7B, "ppo", "GiGPO paper (secondary sources)", 80.4, 2.7, 68.7, 5.1),
]
# trained with dynamic sampling (GiGPO paper, App. E.4): listed in `published_table`, never set beside our runs
_DYNAMIC_SAMPLING_ROWS = [
    (MODEL_1_5B, "gigpo", "GiGPO paper App. E.4, dynamic sampling", None, None, 75.0, 3.5),
    (MODEL_1_5B, "dapo", "GiGPO paper App. E.4, DAPO", None, None, 66.1, 3.2),
]
# qualifiers the paper attaches to one number (GiGPO 7B WebShop is reported as a range, 72.8-75.2)
_CELL_NOTES = {("hgpo", "alfworld"): "in-domain"}
_CELL_TEXT = {
    (MODEL_7B, "gigpo", "webshop"): "72.8-75.2",
    # GraphGPO's paper reports two decimals
    (MODEL_1_5B, "graphgpo", "alfworld"): "92.71",
    (MODEL_1_5B, "graphgpo", "webshop"): "78.65",
    (MODEL_7B, "graphgpo", "alfworld"): "95.31",
    (MODEL_7B, "graphgpo", "webshop"): "80.31",
}


def _fmt(mean: float | None, std: float | None, text: str | None = None) -> str:
    if text is not None:
        return text
    if mean is None:
        return "n/a"
    return f"{mean:.1f}" if std is None else f"{mean:.1f} ± {std:.1f}"


def published_table() -> pd.DataFrame:
    """One row per published result: model, method, source, alfworld, webshop ('mean ± std' strings), scale."""
    return pd.DataFrame(
        [
            {
                "model": model,
                "method": m,
                "source": src,
                "alfworld": _cell(model, m, "alfworld", a, sa),
                "webshop": _cell(model, m, "webshop", w, sw),
                "scale": "16 tasks x 8 rollouts, 150 iterations",
            }
            for model, m, src, a, sa, w, sw in _ROWS + _DYNAMIC_SAMPLING_ROWS
        ]
    )


def _cell(model: str, method: str, env: str, mean: float | None, std: float | None, variant: str = "") -> str:
    notes = ", ".join(x for x in (variant, _CELL_NOTES.get((method, env), "")) if x)
    return _fmt(mean, std, _CELL_TEXT.get((model, method, env))) + (f" ({notes})" if notes else "")


def published_by_method() -> dict[str, dict[str, str]]:
    """{method: {'alfworld': cell, 'webshop': cell}} of the 1.5B figures (the scale of PUBLISHED_SCALE); a method with
    several published variants gets them joined with ' / ' and the variant named (GiGPO's scale std and scale none)."""
    out: dict[str, dict[str, list[str]]] = {}
    for model, m, src, a, sa, w, sw in _ROWS:
        if model != MODEL_1_5B:
            continue
        variant = src.split(", ", 1)[1] if ", " in src else ""
        cell = out.setdefault(m, {"alfworld": [], "webshop": []})
        cell["alfworld"].append(_cell(model, m, "alfworld", a, sa, variant))
        cell["webshop"].append(_cell(model, m, "webshop", w, sw, variant))
    return {m: {env: " / ".join(v) for env, v in cells.items()} for m, cells in out.items()}

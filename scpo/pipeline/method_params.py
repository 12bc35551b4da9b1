"""Each credit method's options as DVC params: the option sections its registry spec reads (`MethodSpec.sections`),
resolved from params.yaml and its profile, one file per method.

    python -m scpo.pipeline.method_params --params params.yaml --out reports/method_params

`<out>/<method>.yaml` holds `credit.<section>` for every section the method reads (its own first, then the ones it
builds on, then `norm`) and `credit.success_reward`: a readable record of what each method reads. The train stages
list the params.yaml keys themselves (a file another stage writes would be stale under `dvc repro -s`). A file is
rewritten only when its text changes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from scpo.config import Config, load_config
from scpo.credit.registry import METHODS

__all__ = ["method_params", "write_method_params"]


def method_params(cfg: Config, method: str) -> dict:
    """{"credit": {section: options, ..., "success_reward": R}} for the sections `method` reads."""
    sections = METHODS[method].sections
    credit = cfg.credit.model_dump(mode="json")
    return {"credit": {**{s: credit[s] for s in sections}, "success_reward": credit["success_reward"]}}


def write_method_params(cfg: Config, out: Path) -> list[Path]:
    """`<out>/<method>.yaml` for every registered method."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for method in METHODS:
        path = out / f"{method}.yaml"
        text = yaml.safe_dump(method_params(cfg, method), sort_keys=False)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", type=Path, default=Path("params.yaml"))
    ap.add_argument("--out", type=Path, default=Path("reports/method_params"))
    args = ap.parse_args(argv)
    cfg = load_config(args.params)
    for path in write_method_params(cfg, args.out):
        print(f"{path}: {', '.join(method_params(cfg, path.stem)['credit'])}")


if __name__ == "__main__":
    main()

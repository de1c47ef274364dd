# Two commands do all the set-up on a fresh machine:
#   make compare  virtualenv + core install, then the main job: the paper's estimator curves
#   make test   virtualenv + full test install (torch first), then the whole test suite
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH := torch==2.13.0

.PHONY: compare demo test lint bench clean

$(VENV)/.core: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

# torch is installed on its own, first, so that nothing downloads a CUDA build in its place.
$(VENV)/.dev: $(VENV)/.core
	$(PIP) install -q $(TORCH)
	$(PIP) install -q -e '.[dev,sb3,llm,hf]'
	touch $@

compare: $(VENV)/.core
	$(VENV)/bin/gf2 compare --config configs/paper-estimators.yaml

demo: $(VENV)/.core
	$(VENV)/bin/gf2 demo --episodes 20 --seed 0

test: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q

bench: $(VENV)/.core
	$(PY) bench/bench_env.py
	$(PY) bench/bench_estimators.py

clean:
	rm -rf $(VENV)

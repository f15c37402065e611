# `make train` and `make test` are the README's two commands; both set up .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

$(BIN)/alphazero: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# The CPU build of torch 2.13.0 lies on disk on our machines; asking for it first keeps pip
	# from resolving torch through PyPI (a multi-GB CUDA build).
	$(BIN)/pip install --quiet $(if $(wildcard /opt/wheels),--find-links /opt/wheels) torch==2.13.0
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

.PHONY: setup train test bench
setup: $(BIN)/alphazero

train: $(BIN)/alphazero
	$(BIN)/alphazero train --config configs/quickstart.yaml --run-dir checkpoints/quickstart-$$(date +%Y%m%d-%H%M%S)

test: $(BIN)/alphazero
	$(BIN)/ruff check alphazero workers commands tests tools
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

bench: $(BIN)/alphazero
	$(BIN)/alphazero bench --json

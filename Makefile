# The two commands: `make run` (set up and serve on embedded defaults) and `make test` (set up and run every test).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/wlm serve

test: $(STAMP)
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) data .pytest_cache

# The two commands: `make run` (set up and serve on embedded defaults) and `make test` (set up and run every test).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

CHROMIUM := /usr/bin/chromium

.PHONY: run test install browser clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# The dashboard's browser test (tests/reports/test_dashboard.py) drives Debian's chromium; the file is its own stamp.
# Only `make test` needs it, so `make run` works without it.
$(CHROMIUM):
	if [ "$$(id -u)" -eq 0 ]; then sudo=; elif command -v sudo >/dev/null; then sudo=sudo; \
	else echo "installing chromium needs root or sudo" >&2; exit 1; fi; \
	$$sudo apt-get update && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium

browser: $(CHROMIUM)

run: $(STAMP)
	$(BIN)/wlm serve

test: $(STAMP) $(CHROMIUM)
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) data .pytest_cache

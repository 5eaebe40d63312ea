# The two commands: `make run` (set up and serve on embedded defaults) and `make test` (set up and run every test).
PYTHON ?= python3
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

CHROMIUM := /usr/bin/chromium

.PHONY: run test lint install browser java clean

# Some hosts set PYTHONDONTWRITEBYTECODE: then every process (each service a test or benchmark starts, each of its
# workers and its records writer) compiles the project's modules again, 0.1 s of CPU each. Compiled once here.
unexport PYTHONDONTWRITEBYTECODE

# Installs Debian packages as root or with sudo: the browser tests' chromium, and Java where the machine has none.
APT_INSTALL = if [ "$$(id -u)" -eq 0 ]; then sudo=; elif command -v sudo >/dev/null; then sudo=sudo; \
	else echo "installing $(1) needs root or sudo" >&2; exit 1; fi; \
	$$sudo apt-get update && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $(1)

# The SDK first: the service depends on wlm-client, built from sdk/python; installed, pip looks for it nowhere else.
$(STAMP): pyproject.toml sdk/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ./sdk/python
	$(BIN)/python -m pip install --quiet -e '.[dev,report]'
	touch $(STAMP)

install: $(STAMP)

# The dashboard's browser test (tests/reports/test_dashboard.py) drives Debian's chromium; the file is its own stamp.
# Only `make test` needs it, so `make run` works without it.
$(CHROMIUM):
	$(call APT_INSTALL,chromium)

browser: $(CHROMIUM)

# The nightly report's Spark driver runs on Java 17, 21 or 25 (spark_jobs/common/java_home.py chooses among those
# installed; `python -m spark_jobs.common.java_home` fails when there is none): Debian's default Java where it fails.
java: $(STAMP)
	$(BIN)/python -m spark_jobs.common.java_home || { $(call APT_INSTALL,default-jre-headless); }

# The service runs without Java (only the nightly report needs it): `make run` goes on if it cannot be installed.
run: $(STAMP)
	-$(MAKE) --no-print-directory java
	$(BIN)/wlm serve

# Lint and type-check first (their settings are in pyproject.toml): they take seconds, and a finding fails the run before its quarter hour of tests.
LINTED := app spark_jobs bench tests sdk/python
lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy app spark_jobs sdk/python/wlm_client

# Two workers: most tests wait on processes and the network rather than compute, so two overlap their waits (one
# run under load: 25.6 min alone, 17.9 min on two, for the same 11.7 min of CPU). The last line gives the wall time
# beside the CPU time (user + sys, of every process waited for): on a shared 2-core machine, the second says whether
# a slower run did more work or only waited longer.
test: $(STAMP) java $(CHROMIUM)
	@TIMEFORMAT='make test: %0R s wall, %0U s user + %0S s sys CPU'; \
	time { $(MAKE) --no-print-directory lint && $(BIN)/python -m pytest -n 2 --dist worksteal; }

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache

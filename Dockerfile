# syntax=docker/dockerfile:1
# Two images from one file: the WLM service's API (`docker build -t wlm .`, the last stage, `api`), then
# `docker run -p 8000:8000 wlm` (embedded SQLite and Redis under /data), or `docker compose up` for PostgreSQL and a
# real Redis (see docker-compose.yml); and the nightly report's (`docker build --target report -t wlm-report .`),
# the only one with PySpark (the service's `report` extra, about 490 MB installed) and Java: an API replica never
# runs Spark.
#
# How the project is installed, and why:
#   app/migrate.py finds alembic.ini and migrations/ next to the `app` package (ROOT = parent of app/). So the
#   source tree is kept at /app and installed *editable* (`pip install -e .`): `app` is imported from /app/app,
#   ROOT is /app, and /app/alembic.ini and /app/migrations/ are what `wlm serve` migrates with.
#   A plain `pip install .` would put `app` and a top-level `migrations` package into site-packages without
#   alembic.ini; that happens to work today only because Alembic ignores a missing ini file and migrate.py sets
#   script_location itself. The editable install does not depend on that.
#
# Build stages make the virtualenvs (pip, the dependency download, the editable build); the runtime stages copy only
# a venv and the source. All stages use the same base image, so the venv's interpreter symlinks and the editable
# finder's /app paths are valid in the runtime stages. Every dependency ships a manylinux wheel for x86_64; on an
# architecture without wheels, add a compiler to the build stages only.

ARG PYTHON_IMAGE=python:3.11-slim

# ---- deps: the API's dependencies --------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS deps

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/opt/venv/bin:$PATH

RUN python -m venv /opt/venv
WORKDIR /app

# The SDK first (sdk/python, httpx only): the service depends on wlm-client, which pip then finds installed.
COPY sdk/python /sdk/python
RUN pip install /sdk/python

# Dependencies next, read from pyproject.toml alone, so a code change does not reinstall them.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt

# ---- report-deps: and the `report` extra (PySpark) ---------------------------------------------------------------
FROM deps AS report-deps
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['report']))" \
        > /tmp/report-requirements.txt \
    && pip install -r /tmp/report-requirements.txt

# ---- build, build-report: the project itself, editable over /app (see above) -------------------------------------
# --no-deps: they are installed in the stages before.
FROM deps AS build
COPY . .
RUN pip install --no-deps -e .

FROM report-deps AS build-report
COPY . .
RUN pip install --no-deps -e .

# ---- runtime: what both images share -----------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/opt/venv/bin:$PATH \
    WLM_HOST=0.0.0.0 \
    WLM_PORT=8000 \
    WLM_DATA_DIR=/data

# A non-root user that owns only the data directory; the code under /app stays root-owned and read-only to it.
RUN groupadd --system --gid 10001 wlm \
    && useradd --system --uid 10001 --gid wlm --home-dir /data --no-create-home --shell /usr/sbin/nologin wlm \
    && mkdir -p /data \
    && chown wlm:wlm /data

WORKDIR /app
# SQLite (when WLM_DATABASE_URL is unset), the embedded Redis (when WLM_REDIS_URL is unset), admin.key; the work
# records the report reads, its Parquet and its logs.
VOLUME ["/data"]

# ---- report: the nightly workload activity report (`wlm report run`) ---------------------------------------------
FROM runtime AS report

# PySpark's driver is a JVM (the jars ship in the pyspark wheel; nothing is downloaded).
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*

COPY --from=build-report /opt/venv /opt/venv
# The same tree the build stage installed from (.dockerignore keeps .venv, data, .git, caches and .env out;
# .env matters: the settings read ./.env, and /app is the working directory).
COPY . .
USER wlm
CMD ["wlm", "report", "run", "--date", "yesterday"]

# ---- api: the service (the default target) -----------------------------------------------------------------------
FROM runtime AS api

COPY --from=build /opt/venv /opt/venv
# As in the report's image: the tree the build stage installed from.
COPY . .
USER wlm
EXPOSE 8000

# Liveness only (/healthz: the process answers); /readyz also checks Redis, the database and the schema.
# No curl in the slim image, so Python's urllib: any connection error or HTTP status >= 400 exits non-zero.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('WLM_PORT', '8000'), timeout=4)"]

# `wlm serve` runs `alembic upgrade head` (app.migrate.upgrade), then uvicorn with app.main:create_app on
# WLM_HOST:WLM_PORT (WLM_WORKERS processes). On PostgreSQL the migration holds an advisory lock, so replicas
# that start together migrate once. The embedded Redis fsyncs as WLM_DURABILITY says (strict by default).
# `docker stop` (SIGTERM) stops it cleanly, the embedded Redis last, and exits 0; open requests get
# WLM_SHUTDOWN_GRACE_SECONDS (30) to finish, more than Docker waits by default: `docker stop -t 40`.
CMD ["wlm", "serve"]

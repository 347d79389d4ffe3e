# The supportbot image. One image, several commands:
#   default                        the HTTP API (widget and Telegram webhook included)
#   supportbot db upgrade          migrations (the `migrate` one-shot service)
#   supportbot kb ingest PATH      knowledge-base ingestion
#   supportbot telegram run        the Telegram polling worker
# Base image pinned by version (Python 3.11, Debian 13 "trixie", slim).

FROM python:3.11.15-slim-trixie AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /src
COPY pyproject.toml README.md alembic.ini ./
COPY app ./app
COPY bot ./bot
COPY knowledge ./knowledge
COPY evals ./evals
COPY migrations ./migrations

# The project itself, no dev extras. Every dependency ships a manylinux wheel, so no compiler.
RUN pip install .

# `supportbot db upgrade` looks for alembic.ini where app/db/migrate.py says it is (the
# project root of a source checkout). A wheel does not carry alembic.ini and migrations/, so
# put them there unless the installed package already ships them. Run from / so that the
# installed package is imported, not /src.
RUN set -eu; \
    dest="$(cd / && python -c 'from app.db.migrate import ALEMBIC_INI; print(ALEMBIC_INI.parent)')"; \
    if [ ! -e "$dest/alembic.ini" ]; then \
        cp alembic.ini "$dest/alembic.ini"; \
        cp -r migrations "$dest/migrations"; \
    fi

# Fail the build, not the deployment, when an import is missing from the dependencies.
RUN cd / && python -c "import app.api.main, app.db.migrate" && supportbot --help > /dev/null

# The embedder's ONNX graph, built once here rather than at every new container's first
# start, before its first turn (docs/benchmarks.md#cpu-per-turn-and-start-up); rebuilt in
# place if onnxruntime changes.
RUN cd / && python -c "from pathlib import Path; from knowledge.embeddings import get_embedder; \
    get_embedder('e5', Path('/opt/supportbot-cache')).dimension"

FROM python:3.11.15-slim-trixie

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/opt/venv/bin:$PATH \
    SUPPORTBOT_HOME=/app \
    SUPPORTBOT_KNOWLEDGE__MODEL_CACHE_DIR=/opt/supportbot-cache

RUN groupadd --system --gid 10001 supportbot \
    && useradd --system --uid 10001 --gid supportbot --home-dir /app --no-create-home \
       --shell /usr/sbin/nologin supportbot

COPY --from=build /opt/venv /opt/venv
COPY --from=build --chown=supportbot:supportbot /opt/supportbot-cache /opt/supportbot-cache

# Working directory and SUPPORTBOT_HOME of the service: relative defaults (var/...) land
# here, owned by the service user. In the compose stack the data lives in PostgreSQL and
# Qdrant instead.
WORKDIR /app
RUN mkdir -p /app/var && chown -R supportbot:supportbot /app

USER supportbot:supportbot

EXPOSE 8000

HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=5 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]

CMD ["supportbot", "serve", "--host", "0.0.0.0", "--port", "8000"]

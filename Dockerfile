# syntax=docker/dockerfile:1.7
#
# idemproxy image: the `idemproxy` console script on python:3.11-slim, running as the
# numeric user 10001. Nothing is written to the root filesystem at run time, so the
# container runs with a read-only root; the embedded SQLite store lives on the declared
# volume /var/lib/idemproxy. Production deployments point IDEMPROXY_STORE at Redis.
#
# The proxy and admin listeners default to loopback (127.0.0.1:8080 and :9090), which is
# what a Kubernetes sidecar wants. For a standalone container publish them explicitly:
#   docker run -p 8080:8080 -p 9090:9090 -e IDEMPROXY_ADMIN_TOKEN=... IMAGE \
#       serve --listen 0.0.0.0:8080 --admin-listen 0.0.0.0:9090

FROM python:3.11.13-slim-bookworm AS builder

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
# README.md only feeds the wheel's long description: the glob copies it when present
# without failing the build when it is not.
COPY pyproject.toml README.m[d] ./
COPY src/ src/
# Wheels for idemproxy (with its `fast` extra: uvloop) and every dependency, so the
# runtime stage installs offline and carries no build tooling.
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[fast]"


FROM python:3.11.13-slim-bookworm AS runtime

LABEL org.opencontainers.image.title="idemproxy" \
      org.opencontainers.image.description="Exactly-once sidecar proxy for AI agents that act on external APIs" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    IDEMPROXY_STORE=sqlite:////var/lib/idemproxy/idemproxy.db

# The wheels are bind-mounted, not copied, so they never become an image layer. pip
# byte-compiles at install time; PYTHONDONTWRITEBYTECODE keeps the runtime from trying.
RUN --mount=type=bind,from=builder,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links=/wheels /wheels/*.whl \
    && groupadd --system --gid 10001 idemproxy \
    && useradd --system --uid 10001 --gid 10001 --no-create-home \
        --home-dir /nonexistent --shell /usr/sbin/nologin idemproxy \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/idemproxy

VOLUME ["/var/lib/idemproxy"]
USER 10001:10001
EXPOSE 8080 9090

HEALTHCHECK --interval=30s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9090/healthz', timeout=2)"]

ENTRYPOINT ["idemproxy"]
CMD ["serve"]

# Eddy worker image: one process (`python -m service worker`), non-root, the same
# locked dependency set `make` installs. Build: docker build -t eddy .
ARG PYTHON_IMAGE=python:3.11.10-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
RUN python -m venv /opt/eddy && /opt/eddy/bin/pip install uv==0.13.9
COPY pyproject.toml README.md ./
COPY requirements/ requirements/
COPY service/ service/
COPY agents/ agents/
COPY tables/ tables/
COPY api/ api/
COPY spark_jobs/ spark_jobs/
RUN grep -v '^-e ' requirements/lock.txt > /tmp/lock.txt \
 && /opt/eddy/bin/uv pip install --python /opt/eddy/bin/python --no-deps -r /tmp/lock.txt \
 && /opt/eddy/bin/uv pip install --python /opt/eddy/bin/python --no-deps . \
 && /opt/eddy/bin/pip uninstall -y uv

FROM ${PYTHON_IMAGE} AS worker
RUN groupadd --system eddy && useradd --system --gid eddy --home-dir /var/lib/eddy eddy \
 && mkdir -p /var/lib/eddy/state && chown -R eddy:eddy /var/lib/eddy
COPY --from=build /opt/eddy /opt/eddy
ENV PATH=/opt/eddy/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    EDDY_STATE_DIR=/var/lib/eddy/state \
    EDDY_API_HOST=0.0.0.0 \
    EDDY_API_PORT=8000
USER eddy
WORKDIR /var/lib/eddy
VOLUME ["/var/lib/eddy/state"]
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"]
ENTRYPOINT ["python", "-m", "service"]
CMD ["worker"]

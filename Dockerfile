# Eddy's images, from the same pins `make` installs (requirements/runtime.txt is the
# runtime subset of requirements/lock.txt, made by `make lock`; no dev or bench extras).
#   docker build --target worker -t eddy:<version> .          one process: python -m eddy worker
#   docker build --target spark  -t eddy-spark:<version> .    the Spark jobs, with a Java runtime
# Pin the base by digest in CI (PYTHON_IMAGE=python:3.11.10-slim-bookworm@sha256:...).
ARG PYTHON_IMAGE=python:3.11.10-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 UV_NO_CACHE=1
WORKDIR /src
# uv lives outside /opt/eddy, so the copied virtualenv holds only Eddy and its pins.
RUN pip install --no-cache-dir uv==0.13.9 && python -m venv --without-pip /opt/eddy
COPY requirements/runtime.txt requirements/
# The worker never imports pyspark (~400 MB): the spark target adds it back, same pin.
RUN grep -vE '^(-e |pyspark==|py4j==)' requirements/runtime.txt > /tmp/worker.txt \
 && uv pip install --python /opt/eddy/bin/python --no-deps -r /tmp/worker.txt
COPY pyproject.toml README.md ./
# src/eddy is a link to service/ (and service/ links the other folders): one package, eddy.
COPY src/ src/
COPY service/ service/
COPY agents/ agents/
COPY tables/ tables/
COPY api/ api/
COPY spark_jobs/ spark_jobs/
RUN uv pip install --python /opt/eddy/bin/python --no-deps .

FROM build AS build-spark
RUN grep -E '^(pyspark|py4j)==' requirements/runtime.txt > /tmp/spark.txt \
 && uv pip install --python /opt/eddy/bin/python --no-deps -r /tmp/spark.txt

# Shared by both final images: the eddy user and a state directory it owns.
FROM ${PYTHON_IMAGE} AS base
RUN groupadd --system --gid 10001 eddy \
 && useradd --system --uid 10001 --gid eddy --home-dir /var/lib/eddy eddy \
 && mkdir -p /var/lib/eddy/state && chown -R eddy:eddy /var/lib/eddy
# EDDY_HOME: relative state, snapshot, savepoint and report paths go under the eddy
# user's home, not under <cwd>/.eddy (service/paths.py).
ENV PATH=/opt/eddy/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    EDDY_HOME=/var/lib/eddy
WORKDIR /var/lib/eddy

FROM base AS spark
# Debian's JRE for pyspark's JVM; the version is pinned to bookworm's current security update.
ARG JRE_VERSION=17.0.21.1+2-1~deb12u1
RUN apt-get update \
 && apt-get install -y --no-install-recommends "openjdk-17-jre-headless=${JRE_VERSION}" \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build-spark /opt/eddy /opt/eddy
USER 10001
ENTRYPOINT ["python", "-m", "eddy.spark_jobs"]

# Last, so a plain `docker build .` gives the worker.
FROM base AS worker
COPY --from=build /opt/eddy /opt/eddy
ENV EDDY_STATE_DIR=/var/lib/eddy/state \
    EDDY_API_HOST=0.0.0.0 \
    EDDY_API_PORT=8000
USER 10001
# RocksDB state: a volume so it outlives the container (a PVC per pod on Kubernetes).
VOLUME ["/var/lib/eddy/state"]
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status != 200)"]
ENTRYPOINT ["python", "-m", "eddy"]
CMD ["worker"]

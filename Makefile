# Eddy's entry points. `make run` and `make test` do all set-up on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.9
STAMP := $(VENV)/.installed-$(shell cat requirements/lock.txt pyproject.toml | md5sum | cut -c1-12)
# Eddy's folder (service/paths.py): the broker, PostgreSQL, state, snapshots, savepoints
# and logs of every target below, wherever a tool runs from. Set it to keep them elsewhere
# (unset or empty: this checkout's .eddy).
export EDDY_HOME := $(or $(EDDY_HOME),$(CURDIR)/.eddy)

.PHONY: help venv lock kafka-jars kafka-start kafka-stop kafka-reset kafka-status topics run worker simulate \
        registry-jar registry-start registry-stop registry-status \
        test test-unit test-integration lint format clean chaos eos-kafka bench bench-quick browser \
        postgres postgres-start postgres-stop kubectl netns

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(STAMP): requirements/lock.txt pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)
	$(BIN)/uv pip sync -q --python $(BIN)/python requirements/lock.txt
	@rm -f $(VENV)/.installed-*; touch $@

venv: $(STAMP) ## create .venv with the locked dependency set

lock: ## re-pin requirements/lock.txt from pyproject.toml
	@test -x $(BIN)/uv || { $(PYTHON) -m venv $(VENV) && $(BIN)/python -m pip install -q uv==$(UV_VERSION); }
	$(BIN)/uv pip compile requirements/lock.in -p 3.11 -o requirements/lock.txt --no-header -q
	@# The worker image's subset, held to lock.txt's pins (a constraint can't be `-e .`).
	grep -v '^-e ' requirements/lock.txt > $(VENV)/lock-constraints.txt
	$(BIN)/uv pip compile requirements/runtime.in -c $(VENV)/lock-constraints.txt -p 3.11 \
		-o requirements/runtime.txt --no-header -q

kafka-jars: venv ## fetch Apache Kafka from Maven Central (KAFKA_VERSION, default 3.9.2)
	$(BIN)/python -m tools kafka fetch

kafka-start: venv ## start the local broker on 127.0.0.1:9092 (no-op if running or remote)
	$(BIN)/python -m tools kafka start

kafka-stop: venv ## stop the local broker
	$(BIN)/python -m tools kafka stop

kafka-reset: venv ## stop the local broker and delete its data (the topics earlier runs left)
	$(BIN)/python -m tools kafka reset

kafka-status: venv
	$(BIN)/python -m tools kafka status

registry-jar: venv ## build Apicurio Registry from Maven Central (once) into $EDDY_HOME/schema-registry
	$(BIN)/python -m tools registry fetch

registry-start: registry-jar ## start the local schema registry on 127.0.0.1:8081 (Confluent's API)
	$(BIN)/python -m tools registry start

registry-stop: venv ## stop the local schema registry (its schemas are in memory)
	$(BIN)/python -m tools registry stop

registry-status: venv
	$(BIN)/python -m tools registry status

topics: kafka-start ## create Eddy's topics (idempotent)
	$(BIN)/python -m eddy topics create

run: kafka-jars postgres ## broker, topics, worker (API on :8000) and simulator; DURATION=<s> stops by itself
	$(BIN)/python -m tools run $(if $(DURATION),--duration $(DURATION),)

worker: topics ## run one worker in the foreground
	$(BIN)/python -m eddy worker

lint: venv ## ruff (lint + format check), mypy and hadolint (Dockerfile)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/hadolint Dockerfile

format: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test-unit: venv
	$(BIN)/pytest tests/unit -q

# Debian's Chromium for the dashboard's browser test; Playwright drives it (no download).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser: ## install Debian's chromium if missing (for the dashboard test)
	@test -x /usr/bin/chromium || { $(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

# Network namespaces, veth pairs, bridges and firewall rules for the fleet's hosts
# (tools/fleet): Debian's iproute2 and iptables. Creating namespaces needs root.
netns: ## install Debian's iproute2 and iptables if missing (the fleet tests, make fleet)
	@command -v ip >/dev/null && command -v iptables >/dev/null || { $(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 iptables; }

# Debian's PostgreSQL server programs, for the postgres_sink pipeline and its tests.
postgres: ## install Debian's postgresql if missing (initdb, pg_ctl)
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; }

postgres-start: venv postgres ## start the local PostgreSQL on 127.0.0.1:5433 (no-op if running)
	$(BIN)/python -m tools postgres start

postgres-stop: venv ## stop the local PostgreSQL
	$(BIN)/python -m tools postgres stop

# kubectl's kustomize renders deploy/k8s for tests/deploy: Debian's kubectl, if an
# apt source has it (Kubernetes' own repository, or a cloud SDK's); else say what to do.
kubectl: ## check for kubectl, install it with apt-get if a source has it
	@command -v kubectl >/dev/null || { $(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubectl; } || \
		{ echo "make: install kubectl 1.27 or newer (https://kubernetes.io/docs/tasks/tools/)" >&2; exit 1; }

# Two lanes. The tests that need the broker, the registry or PostgreSQL (fixed ports:
# one at a time) run in one pytest; beside it, in another, those that need none of
# them: the unit tests, Spark's (local mode, and a standalone cluster on free ports
# reading a moto S3 server on a free port), the fleet's (brokers and workers in network
# namespaces of their own) and the three-broker cluster's (ports 29092-29094). Its
# report follows; both must pass.
# A shell starts a background job with Ctrl-C ignored, and children inherit that: the
# lane's pytest gets it back first (tests send SIGINT to the commands they run).
SERVERLESS := tests/unit tests/spark tests/fleet tests/cluster
WITH_CTRL_C := $(BIN)/python -c 'import os, signal, sys; \
	signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])'
test: lint kafka-jars registry-jar browser postgres kubectl netns ## the whole suite: lint, unit, integration and e2e against a real broker
	@mkdir -p $(EDDY_HOME)
	$(WITH_CTRL_C) $(BIN)/pytest $(SERVERLESS) -m "not slow" -q -p no:cacheprovider --durations=10 \
		>$(EDDY_HOME)/serverless-tests.log 2>&1 & \
	lane=$$!; $(BIN)/pytest -m "not slow" -q --durations=20 $(SERVERLESS:%=--ignore=%); \
	servers=$$?; wait $$lane; serverless=$$?; \
	echo "--- $(SERVERLESS) ($(EDDY_HOME)/serverless-tests.log):"; \
	cat $(EDDY_HOME)/serverless-tests.log; test $$servers = 0 && test $$serverless = 0

# Newer Pythons than CI's 3.11, not part of make test (it needs PyPI): the wheel in a new
# virtualenv on each, its dependencies from PyPI, and the user-project checks of
# tests/deploy/test_wheel.py (the project's tests, mypy --strict, replay; not the broker
# part). First ruff and mypy against 3.13 and 3.14; the ruff rules ignored ask for syntax
# newer than 3.11 (PEP 695 type parameters), which the code cannot use while 3.11 is supported.
PYENV_VERSIONS := $(or $(PYENV_ROOT),$(HOME)/.pyenv)/versions
PYTHONS ?= $(lastword $(wildcard $(PYENV_VERSIONS)/3.12.*/bin/python)) \
	$(lastword $(wildcard $(PYENV_VERSIONS)/3.13.*/bin/python))
NEWER_SYNTAX := UP035,UP043,UP046,UP047
.PHONY: pythons
pythons: venv ## the wheel and a user's project on Python 3.12 and 3.13 (PYTHONS=...), dependencies from PyPI
	$(BIN)/ruff check -q --target-version py313 --extend-ignore $(NEWER_SYNTAX) .
	$(BIN)/ruff check -q --target-version py314 --extend-ignore $(NEWER_SYNTAX) .
	$(BIN)/mypy --python-version 3.13 src/eddy
	$(BIN)/mypy --python-version 3.14 src/eddy
	@test -n "$(strip $(PYTHONS))" || { echo "make pythons: no Python 3.12 or 3.13 under $(PYENV_VERSIONS); set PYTHONS=" >&2; exit 1; }
	@failed=0; for python in $(PYTHONS); do \
		echo "== $$($$python --version): tests/deploy/test_wheel.py"; \
		EDDY_TEST_PYTHON=$$python $(BIN)/pytest tests/deploy/test_wheel.py -q -p no:cacheprovider -m "not e2e" || failed=1; \
	done; exit $$failed

# CHAOS_BROKERS=3: on a three-broker cluster (replication 3, min.insync.replicas 2), where
# the broker faults kill a partition leader (docs/chaos.md).
CHAOS_BROKERS ?= 0
chaos: kafka-jars ## long exactly-once chaos run: 20 seeds x every fault kind, then the negative control
	$(BIN)/python -m tools kafka start
	$(BIN)/python -m tools chaos --seeds 20 --faults all --faults-per-kind 1 --records 20000 \
		--readings 10000 --brokers $(CHAOS_BROKERS)
	$(BIN)/python -m tools chaos --seed 1 --guarantee at_least_once --faults kill --faults-per-kind 3 \
		--commit-interval-ms 2000 --expect-duplicates --brokers $(CHAOS_BROKERS)
	@# The chaos tests left out of make test for its time (the short negative control).
	$(BIN)/pytest tests/e2e/test_chaos.py -q -p no:cacheprovider -m slow

# Three brokers and three workers, each in a network namespace of its own (root: ip,
# iptables, tc), and the network faults: links cut, a leader isolated, a slow link, a
# worker moved to a new address (docs/chaos.md). Its brokers need no port of this host.
.PHONY: fleet
fleet: kafka-jars netns ## exactly-once on a fleet of hosts: 5 seeds x every network fault, then the negative control
	$(BIN)/python -m tools fleet clean
	$(BIN)/python -m tools fleet --seeds 5 --faults all
	$(BIN)/python -m tools fleet --seed 1 --guarantee at_least_once --faults all \
		--commit-interval-ms 2000 --expect-duplicates
	@# The long fleet and cluster tests: a short run with every network fault, Kafka's
	@# verifier on the fleet, a transaction coordinator killed and one hung (it answers nothing).
	$(BIN)/pytest tests/fleet tests/cluster -q -p no:cacheprovider -m slow

# Kafka's own exactly-once system test (Kafka Streams' StreamsEosTest, from its test jar)
# with Eddy as the application: docs/chaos.md. Newest 4.x: the newest whose published
# kafka-streams test jar still holds the test (4.3 dropped it from the jar).
EOS_KAFKA_4 ?= 4.2.1
eos-kafka: kafka-jars netns ## Kafka's EOS system test on Eddy: 3.9.2, $(EOS_KAFKA_4), 3 brokers, a fleet; both controls
	$(BIN)/python -m tools kafka start
	@# Every run, even after one failed: each prints its own verdict; the exit code says if any failed.
	@failed=0; for run in "--kafka 3.9.2" \
		"--kafka 3.9.2 --guarantee at_least_once --bounces 1 --duration 30 --commit-interval-ms 2000 --expect-failure" \
		"--kafka $(EOS_KAFKA_4) --brokers 1" \
		"--kafka 3.9.2 --brokers 3 --leader-kills 2" \
		"--kafka 3.9.2 --brokers 3 --leader-kills 2 --client streams" \
		"--kafka 3.9.2 --fleet --worker-cuts 1 --leader-isolations 1" \
		"--kafka 3.9.2 --fleet --worker-cuts 1 --leader-isolations 1 --client streams"; do \
		echo "== python -m tools eos-kafka $$run"; \
		$(BIN)/python -m tools eos-kafka $$run || failed=1; \
	done; exit $$failed

bench: kafka-jars ## full benchmark (2M readings, every contender, ~40 min): bench/results/full.*
	$(BIN)/python -m bench

bench-quick: kafka-jars ## every contender on 20k readings: asserts correct windows, not speed
	$(BIN)/python -m bench --quick

.PHONY: analytics bench-snapshot bench-io bench-decode bench-query bench-memory bench-soak
bench-memory: kafka-jars ## RSS per worker process with 1M keys in state (target <= 400 MB): bench/results/memory.json
	$(BIN)/python -m bench.memory

bench-soak: kafka-jars ## 30 min at half of Eddy EOS's max rate (MINUTES=, RATE= to change): bench/results/soak.{json,png}
	$(BIN)/python -m bench.soak $(if $(MINUTES),--minutes $(MINUTES),) $(if $(RATE),--rate $(RATE),)

bench-decode: venv ## decode cost per event, JSON vs Avro vs JSON Schema: bench/results/decode.json
	$(BIN)/python -m bench.decode

.PHONY: fuzz
fuzz: venv ## fuzz every decoder (atheris, coverage-guided): INPUTS= inputs (1,000,000); prints findings, slowest input, RSS growth
	$(BIN)/python -m tools.fuzz --inputs $(or $(INPUTS),1000000)

bench-query: venv ## CPU per REST point query in the query process, FastAPI vs the fast path: bench/results/querycost.json
	$(BIN)/python -m bench.querycost

bench-io: kafka-jars postgres ## enrichment (10 ms lookups, capacity 100) and PostgreSQL upsert rates: bench/results/{enrich,pgsink}.json
	$(BIN)/python -m bench.enrich
	$(BIN)/python -m bench.pgsink

analytics: venv ## every Spark job on the newest snapshot (make run takes one); prints the reports
	$(BIN)/python -m eddy.spark_jobs $(if $(SNAPSHOT),--snapshot $(SNAPSHOT),)

bench-snapshot: venv ## snapshot export rate and Spark job time for 1M keys: bench/results/snapshot.json
	$(BIN)/python -m bench.snapshot

clean: ## stop the broker and PostgreSQL, remove $EDDY_HOME (keeps .venv)
	-$(BIN)/python -m tools kafka stop
	-$(BIN)/python -m tools postgres stop
	-$(BIN)/python -m tools registry stop
	@# Not a folder that holds more than Eddy's files (EDDY_HOME=$$HOME, or the checkout).
	@case "$(abspath $(EDDY_HOME))" in /|$(abspath $(HOME))|$(CURDIR)) \
		echo "make clean: not removing EDDY_HOME=$(EDDY_HOME)"; exit 1;; esac
	rm -rf "$(EDDY_HOME)"

.PHONY: object-store-start object-store-stop spark-jars spark-package
object-store-start: venv ## local S3-compatible server (moto) with a bucket eddy; prints the AWS_* to export
	$(BIN)/python -m tools s3 start

object-store-stop: venv ## stop the local S3 server (its objects are in memory)
	$(BIN)/python -m tools s3 stop

spark-jars: venv ## hadoop-aws for pyspark's Hadoop (s3a://) into $EDDY_HOME/spark; prints the jars
	$(BIN)/python -m tools spark fetch

spark-package: venv ## the jobs' code for spark-submit --py-files: $EDDY_HOME/spark/eddy-jobs.zip
	$(BIN)/python -m tools spark package

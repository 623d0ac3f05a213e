# Eddy's entry points. `make run` and `make test` do all set-up on a fresh machine.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.9
STAMP := $(VENV)/.installed-$(shell cat requirements/lock.txt pyproject.toml | md5sum | cut -c1-12)

.PHONY: help venv lock kafka-jars kafka-start kafka-stop kafka-status topics run worker simulate \
        test test-unit test-integration lint format clean chaos

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

kafka-jars: venv ## fetch Apache Kafka from Maven Central (KAFKA_VERSION, default 3.9.2)
	$(BIN)/python -m service kafka fetch

kafka-start: venv ## start the local broker on 127.0.0.1:9092 (no-op if running or remote)
	$(BIN)/python -m service kafka start

kafka-stop: venv ## stop the local broker
	$(BIN)/python -m service kafka stop

kafka-status: venv
	$(BIN)/python -m service kafka status

topics: kafka-start ## create Eddy's topics (idempotent)
	$(BIN)/python -m service topics create

run: kafka-jars ## broker, topics, worker (API on :8000) and simulator; DURATION=<s> stops by itself
	$(BIN)/python -m service run $(if $(DURATION),--duration $(DURATION),)

worker: topics ## run one worker in the foreground
	$(BIN)/python -m service worker

lint: venv ## ruff (lint + format check) and mypy
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test-unit: venv
	$(BIN)/pytest tests/unit -q

test: lint kafka-jars ## the whole suite: lint, unit, integration and e2e against a real broker
	$(BIN)/pytest -m "not slow" -q

chaos: kafka-jars ## long exactly-once chaos run: 20 seeds x every fault kind, then the negative control
	$(BIN)/python -m service kafka start
	$(BIN)/python -m service chaos --seeds 20 --faults all --faults-per-kind 1 --records 20000 --readings 10000
	$(BIN)/python -m service chaos --seed 1 --guarantee at_least_once --faults kill --faults-per-kind 3 \
		--commit-interval-ms 2000 --expect-duplicates

clean: ## stop the broker and remove local state (keeps .venv)
	-$(BIN)/python -m service kafka stop
	rm -rf .eddy

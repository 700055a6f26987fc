# Moldau: the newcomer's two commands are `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.test-installed

.PHONY: run cluster install test test-deps lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

install: $(STAMP)

## Start a single-node broker (broker+controller) with embedded defaults:
## listener PLAINTEXT://localhost:9092, data under ./data, a schema registry in the same
## process on http://localhost:8081 (Confluent's API; schemas in the _schemas topic) and a
## REST Proxy on http://localhost:8082 (Confluent's API v2 and v3).
run: install
	$(BIN)/moldau serve --override schema.registry.listeners=http://localhost:8081 \
		--override rest.proxy.listeners=http://localhost:8082

## Start a local cluster: a ZooKeeper (Debian package `zookeeper`) and BROKERS=3 brokers on
## free ports of 127.0.0.1, data under ./dev-cluster; prints the addresses, Ctrl-C stops all.
BROKERS ?= 3
cluster: install
	$(BIN)/moldau dev-cluster --brokers $(BROKERS) $(CLUSTER_ARGS)

$(TEST_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,spark]'
	touch $@

## Test clients that do not come from PyPI: Debian's kcat and zookeeper, npm's kafkajs and
## Confluent's JavaScript schema registry client with its own end-to-end suite; and PyPI's kafi
## with its REST Proxy suite, in a venv of its own (tests/compat/kafi/.venv).
test-deps: $(TEST_STAMP)
	$(BIN)/python -m moldau.testing.install_clients

## The default suite (~30 min on 2 cores), then the slow one (Spark, long cluster and fault
## tests: marker `slow`); both always run, and the target fails if either failed.
test: test-deps
	@rc=0; \
	$(BIN)/python -m pytest -q -m "not slow" --durations=10 || rc=1; \
	$(BIN)/python -m pytest -q -m slow --durations=10 || rc=1; \
	exit $$rc

lint: $(TEST_STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) data dev-cluster faults-runs

## The live fuzzer's long run (docs/testing.md, "Fuzzing"): 1,000,000 mutated requests, then
## 1,000,000 CRC-valid lying record batches; 1-2 hours on 2 cores. FUZZ_ARGS="--seed N ...".
.PHONY: fuzz-long
fuzz-long: test-deps
	$(BIN)/python -m tests.faults.fuzz.live --inputs 1000000 --mode requests $(FUZZ_ARGS)
	$(BIN)/python -m tests.faults.fuzz.live --inputs 1000000 --mode batches $(FUZZ_ARGS)

## The replication fault suite's long run (docs/operations.md, "Fault suite"): FAULT_ROUNDS
## rounds drawn from every fault kind against a 3-node ZooKeeper ensemble and 3 brokers, topic
## replication factor 3 and min.insync.replicas=2; history and summary under faults-runs/.
## FAULTS_ARGS="--seed N ..." replays a run; FAULTS_ARGS=--netns adds the partition-leader kind
## (brokers in network namespaces of a private namespace): every kind of issue 13.
FAULT_ROUNDS ?= 100
.PHONY: faults
faults: test-deps
	$(BIN)/python -m tests.faults.replication --rounds $(FAULT_ROUNDS) \
		--out faults-runs/$$(date -u +%Y%m%dT%H%M%SZ) $(FAULTS_ARGS)

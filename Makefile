# vigil — the targets a newcomer can guess. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export VIGIL_CACHE ?= $(HOME)/.cache/vigil
export PIP_CACHE_DIR ?= $(VIGIL_CACHE)/pip
PYTEST := $(BIN)/python -m pytest
ARTIFACTS := test-artifacts

.PHONY: help setup stack-deps lint typecheck test test-unit test-java test-images test-kafka test-kafka3 test-kafka-39 test-kube test-e2e test-demo \
	test-spark demo bench clean generate-crds verify-crds generate-docs verify-docs images lock

help:
	@echo "make demo   - the whole story on a real stack: Kafka, Kubernetes with a real node, vigil by helm; down"
	@echo "make test   - install everything, then lint and every suite (unit, images, Kafka, Kubernetes, e2e, demo, Spark)"
	@echo "make setup  - only the installs (venv, Kafka jars, Kubernetes from Go modules, Spark jars, images) — cached in $(VIGIL_CACHE)"
	@echo "make lint   - ruff check, ruff format --check, mypy --strict, import-linter, verify-crds, verify-docs"
	@echo "make typecheck - mypy --strict alone"
	@echo "make test-unit | test-java | test-images | test-kafka | test-kafka3 | test-kafka-39 | test-kube | test-e2e | test-demo | test-spark - one suite (tests/README.md)"
	@echo "make bench  - benchmarks (never part of make test)"
	@echo "make generate-crds - copy the canonical crds/*.yaml into the operator package and the chart; verify-crds checks they agree"
	@echo "make generate-docs - the sidecar's settings reference in docs/sidecar.md, from its settings model; verify-docs checks it"
	@echo "make images - build the four images without Docker (mmdebstrap, umoci, skopeo; root) into $(VIGIL_CACHE)/images/out"
	@echo "make lock   - regenerate images/*.lock (the images' hash-pinned dependencies)"
	@echo "make clean  - remove the venv, test artifacts and tool caches (not $(VIGIL_CACHE))"

# vigil_dev (dev/) and the test apps (dev/testapps/) are their own distributions: never in the kafka-vigil wheel
$(BIN)/vigil: pyproject.toml dev/pyproject.toml dev/testapps/pyproject.toml
	@scripts/ensure-system-deps
	@scripts/timed "python venv + pip install -e .[dev] -e dev/testapps -e dev" bash -c '\
	  test -x $(BIN)/python || $(PYTHON) -m venv $(VENV); \
	  $(BIN)/python -m pip install -q --upgrade pip; \
	  $(BIN)/python -m pip install -q -e ".[dev]" -e ./dev/testapps -e ./dev'
	@touch $@

stack-deps: $(BIN)/vigil
	@scripts/timed "kafka broker jars, every supported release (maven)" $(BIN)/python -m vigil_dev.kafka.install
	@scripts/timed "spring kafka jars, for the Spring test app (maven)" $(BIN)/python -m vigil_dev.testing.spring_app
	@scripts/timed "kubernetes binaries (go build, cached)" $(BIN)/python -m vigil_dev.kube.build
	@scripts/timed "spark jars: kafka connector (maven), byte readers (javac)" $(BIN)/python -m vigil_dev.spark.install

setup: $(BIN)/vigil stack-deps images

typecheck: $(BIN)/vigil
	@scripts/timed "mypy --strict" $(BIN)/mypy core/vigil_core sidecar/vigil_sidecar operator/vigil_operator spark/vigil_spark cli/vigil_cli dev/vigil_dev dev/testapps/vigil_testapps

lint: $(BIN)/vigil typecheck verify-crds verify-docs
	@scripts/timed "ruff" $(BIN)/ruff check .
	@scripts/timed "ruff format --check" $(BIN)/ruff format --check .
	@scripts/timed "import-linter" $(BIN)/lint-imports

# crds/ is the canonical CRD source; the operator package ships a copy (package data, `vigil crd`), the chart too.
PACKAGE_CRDS := operator/vigil_operator/crds
CHART_CRDS := charts/vigil/crds

# docs/consumergroup.md below its marker line is `vigil crd reference` of the packaged (= canonical) CRD.
CRD_REFERENCE := docs/consumergroup.md

generate-crds: $(BIN)/vigil
	@mkdir -p $(PACKAGE_CRDS)
	@rm -f $(PACKAGE_CRDS)/*.yaml
	@cp crds/*.yaml $(PACKAGE_CRDS)/
	@cp crds/consumergroups.vigil.dev.yaml $(CHART_CRDS)/
	@$(BIN)/vigil crd reference --write $(CRD_REFERENCE)
	@echo "generate-crds: copied $$(ls crds/*.yaml | wc -l) CRD(s) into $(PACKAGE_CRDS)/, the ConsumerGroup CRD into $(CHART_CRDS)/, its reference into $(CRD_REFERENCE)"

verify-crds: $(BIN)/vigil
	@diff -rq crds $(PACKAGE_CRDS) >/dev/null || { \
	  echo "verify-crds: $(PACKAGE_CRDS)/ differs from the canonical crds/ (run: make generate-crds)"; exit 1; }
	@diff -rq crds $(CHART_CRDS) >/dev/null || { \
	  echo "verify-crds: $(CHART_CRDS)/ differs from the canonical crds/ (run: make generate-crds)"; exit 1; }
	@$(BIN)/vigil crd reference --check $(CRD_REFERENCE)

# docs/sidecar.md below its marker line is the settings reference of the sidecar's settings models (--help's text).
SIDECAR_REFERENCE := docs/sidecar.md

generate-docs: $(BIN)/vigil
	@$(BIN)/python -m vigil_sidecar.config --write $(SIDECAR_REFERENCE)

verify-docs: $(BIN)/vigil
	@$(BIN)/python -m vigil_sidecar.config --check $(SIDECAR_REFERENCE)

# The images: OCI and docker archives per image under $(VIGIL_CACHE)/images/out/ (docs/development.md#images)
images: $(BIN)/vigil stack-deps
	@scripts/timed "images (sidecar, operator, report, testapps)" $(BIN)/python -m vigil_dev.images

lock: $(BIN)/vigil
	@$(BIN)/python -m vigil_dev.images --lock

test-unit: $(BIN)/vigil
	@scripts/timed "unit suite" $(PYTEST) tests/unit -m "not spark" -q

# vigil's Java library (java/): built and unit-tested by Maven against the oldest kafka-clients vigil supports (the
# pom's) and the newest (the broker's, dev/vigil_dev/kafka/pom.xml); the integration suites run it from its sources (dev/vigil_dev/testing/java_consumer.py).
JAVA_KAFKA_NEWEST := $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' dev/vigil_dev/kafka/pom.xml)
test-java:
	@scripts/ensure-system-deps
	@scripts/timed "java library (maven: build + unit tests, kafka-clients 3.9.1 and $(JAVA_KAFKA_NEWEST))" bash -c '\
	  mvn -B -q -f java/pom.xml verify && \
	  mvn -B -q -f java/pom.xml verify -Dkafka.version=$(JAVA_KAFKA_NEWEST)'

test-images: setup
	@scripts/timed "image build suite (reproducible digests, the images run under runc)" $(PYTEST) tests/integration -m "images" -q

test-kafka: setup
	@scripts/timed "kafka integration suite" $(PYTEST) tests/integration -m "integration and not kafka3 and not kube and not spark and not images" -q --durations=10

test-kafka3: setup
	@scripts/timed "kafka 3-node suite" $(PYTEST) tests/integration -m "kafka3" -q

# The older release users still run: the suites that speak to the coordinator (group client, stalls — a Kafka
# Streams app's among them —, bridging, the __consumer_offsets decoders and their differential test against Kafka's
# own formatters, the report's ingest and broker-log model)
# on Kafka 3.9.1; tests marked kafka_min are deselected and counted.
KAFKA_39_SUITE := tests/integration/test_group_client.py tests/integration/test_sidecar_stall.py \
	tests/integration/test_sidecar_bridge.py tests/integration/test_offsets_decoders_real.py \
	tests/integration/test_kafka_versions.py tests/integration/test_spark_ingest.py tests/integration/test_spark_broker_logs.py \
	tests/integration/test_streams_stall.py tests/integration/test_kafka_formatters.py
test-kafka-39: setup
	@scripts/timed "kafka integration subset on Kafka 3.9.1 (the report's ingest and broker logs included)" \
	  env VIGIL_TEST_KAFKA_VERSION=3.9.1 \
	  $(PYTEST) $(KAFKA_39_SUITE) -m "integration and not kafka3 and not kafka_secure and not kube and not images" -q --durations=10

test-kube: setup
	@scripts/timed "kubernetes integration suite" $(PYTEST) tests/integration -m "kube and not spark" -q --durations=10

test-e2e: setup
	@scripts/timed "e2e suite (vigil by helm on the real node, Kafka)" $(PYTEST) tests/e2e -m "e2e and not demo" -q --durations=10

# The demo starts a stack of its own: the node is one per machine, so it runs in a session of its own.
test-demo: setup
	@scripts/timed "demo (its own stack: Kafka, Kubernetes with a real node, vigil by helm)" $(PYTEST) tests/e2e -m "demo" -q

test-spark: setup
	@scripts/timed "spark suite" $(PYTEST) tests -m "spark" -q --durations=10

# Order is the test rules' order: unit -> Java library -> images -> Kafka integration (incl. 3-node) -> Kubernetes -> e2e -> demo -> Spark
test: setup lint test-unit test-java test-images test-kafka test-kafka3 test-kafka-39 test-kube test-e2e test-demo test-spark

demo: setup
	@$(BIN)/vigil demo

bench: setup
	$(BIN)/python bench/stall_takeover.py
	$(BIN)/python bench/sidecar_footprint.py --seconds 60
	$(BIN)/python bench/import_memory.py
	$(BIN)/python bench/model_memory.py
	$(BIN)/python bench/image_layers.py
	$(BIN)/python bench/operator_scale.py --groups 200 --resync-seconds 30
	$(BIN)/python bench/rollout.py --replicas 4 8
	$(BIN)/python bench/kip848_static_restart.py
	$(BIN)/python bench/decode_throughput.py

clean:
	rm -rf $(VENV) $(ARTIFACTS) .pytest_cache .mypy_cache .ruff_cache

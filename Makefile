# Two entry points that do all set-up on a fresh machine: `make demo` and `make test`.
# The venv is rebuilt only when pyproject.toml changes (the stamp files record that).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# What the demo, `make serve`/`make lab` and the README's steps need: tierlog with the
# 'spark' extra (pyspark, delta-spark, papermill, JupyterLab) and 'cluster' (kazoo, small).
DEMO_STAMP := $(VENV)/.installed-demo
# Everything, with the 'dev' tools (pytest, moto, mypy, ruff...): tests, lint, benchmarks.
STAMP  := $(VENV)/.installed
JARS   := $(VENV)/.jars

.PHONY: demo serve lab test lint typecheck unit zookeeper chromium kafka-tools hdfs cloud-emulators bench bench-storage bench-throughput bench-cluster bench-spark bench-compaction bench-transactions bench-groups bench-summary clean setup

setup: $(STAMP)

# No --quiet: pip prints its own progress. The first install downloads several hundred MB
# (pyspark alone installs to ~490 MB) and takes minutes, which --quiet made silent.
$(DEMO_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@echo "Installing tierlog, pyspark, delta-spark, papermill, JupyterLab into $(VENV): minutes the first time"
	$(BIN)/python -m pip install -e '.[spark,cluster]'
	touch $(DEMO_STAMP)

# After `make demo` this adds only the dev tools; on a fresh clone it runs after the above.
$(STAMP): $(DEMO_STAMP) pyproject.toml
	@echo "Installing the dev tools (pytest, moto, s3fs, mypy, ruff...) into $(VENV)"
	$(BIN)/python -m pip install -e '.[dev,spark,cluster]'
	touch $(STAMP)

# The Delta jars (and Spark's Kafka source for the benchmark) from Maven Central with mvn,
# once, into the local Maven repository; tierlog.spark.session() finds them there.
# Spark 4.2 needs Java 17+ (Debian 12's default JRE); both come from apt when missing.
# Then the driver JVM's class archive (~30 s once; sessions start ~2 s sooner with it).
$(JARS): $(DEMO_STAMP) tierlog/spark/jars.py tierlog/spark/class_archive.py
	command -v java > /dev/null || (apt-get update -q && apt-get install -y -q default-jre-headless)
	command -v mvn > /dev/null || (apt-get update -q && apt-get install -y -q maven)
	$(BIN)/python -m tierlog.spark.jars --kafka-source > /dev/null
	$(BIN)/python -m tierlog.spark.class_archive > /dev/null
	touch $(JARS)

demo: $(DEMO_STAMP) $(JARS)
	$(BIN)/tierlog demo --data-dir ./data/demo

# What `make demo` left in ./data/demo, served again on 127.0.0.1:9092 (Ctrl-C stops it).
serve: $(DEMO_STAMP)
	$(BIN)/tierlog demo serve --data-dir ./data/demo

# JupyterLab on 127.0.0.1:8888, opened on notebooks/ (runs/ beside it), with the venv's
# kernel registered as "tierlog"; prints the URL with its token. Ctrl-C stops it.
lab: $(DEMO_STAMP) $(JARS)
	$(BIN)/tierlog lab

# ruff, then the layer rules of docs/architecture.md as import-linter contracts
# ([tool.importlinter] in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check tierlog pipelines tests bench
	$(BIN)/ruff format --check tierlog pipelines tests bench
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# The integration tests and `tierlog cluster start` run a real ZooKeeper
# (tierlog/broker/coordination/zk_server.py): Debian's package, from apt when missing.
zookeeper:
	test -x /usr/share/zookeeper/bin/zkServer.sh || (apt-get update -q && apt-get install -y -q zookeeper)

# tests/tools/test_lab.py, test_lab_run_all.py (through Playwright, never its own browser
# download) and tests/jobs/test_notebooks.py open JupyterLab and a run's HTML copy in
# headless Chromium: Debian's package, from apt when missing.
chromium:
	command -v chromium > /dev/null || (apt-get update -q && apt-get install -y -q chromium)

# Apache Kafka's command-line tools (org.apache.kafka:kafka-tools, the version bench/kafka_ref.py
# resolves), its broker's jars and MirrorMaker 2's from Maven Central with mvn, once, into
# bench/.work; tests/integration runs them against tierlog brokers (no test downloads under
# its timeout). Prints what each fetch cost.
kafka-tools: $(STAMP)
	command -v java > /dev/null || (apt-get update -q && apt-get install -y -q default-jre-headless)
	command -v mvn > /dev/null || (apt-get update -q && apt-get install -y -q maven)
	$(BIN)/python -m tests.integration.kafka_tools fetch

# Hadoop's MiniDFSCluster (org.apache.hadoop:hadoop-minicluster) from Maven Central with mvn,
# once, into bench/.work, with its small Java main compiled by javac (a JDK: Debian's
# default-jdk-headless); tests/integration/test_tiered_hdfs.py runs the remote tier on it
# through webhdfs://. Prints what the fetch cost.
hdfs: $(STAMP)
	command -v javac > /dev/null || (apt-get update -q && apt-get install -y -q default-jdk-headless)
	command -v mvn > /dev/null || (apt-get update -q && apt-get install -y -q maven)
	$(BIN)/python -m tests.integration.minihdfs fetch

# The object stores' emulators for tests/integration/test_tiered_cloud_stores.py, once, into
# .tools/: Azurite (Azure Blob) from npm, fake-gcs-server (GCS) built with the go command.
cloud-emulators: $(STAMP)
	$(BIN)/python -m tests.integration.cloud_emulators fetch

# The suite in TEST_WORKERS processes (pytest-xdist): most tests wait on brokers, JVMs and
# kernels rather than compute, so more processes than cores pays; tests/conftest.py keeps
# the ones that share a Spark session, a module's fixtures or port 9092 in one process.
TEST_WORKERS ?= 4
unit: $(STAMP) $(JARS) zookeeper chromium kafka-tools hdfs cloud-emulators
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=25

test: lint typecheck unit

bench: bench-storage bench-throughput bench-cluster bench-spark

bench-storage: $(STAMP)
	$(BIN)/python bench/storage.py

# Fetches Apache Kafka's jars with mvn into bench/.work (once) and runs both brokers.
bench-throughput: $(STAMP)
	$(BIN)/python bench/throughput.py

# Three tierlog brokers + ZooKeeper vs three Kafka brokers + a KRaft controller (same jars).
bench-cluster: $(STAMP) zookeeper
	$(BIN)/python bench/cluster.py

# Arrow decoding per codec, the tierlog source vs Spark's Kafka source on a cold topic, and
# the tierlog sink vs Spark's Kafka sink.
bench-spark: $(STAMP) $(JARS)
	$(BIN)/python bench/spark_read.py

# The log cleaner: tierlog vs Kafka's on the same 1 GiB compacted topic (Kafka's jars as for
# bench-throughput), offset-map bytes per key, and produce p99 while cleaning vs idle.
bench-compaction: $(STAMP)
	$(BIN)/python bench/compaction.py

# Transactional produce (commit every 100 ms, every 1,000 records) and read_committed
# consume: tierlog vs Kafka (jars as for bench-throughput); profiles tierlog where slower.
bench-transactions: $(STAMP)
	$(BIN)/python bench/transactions.py

# KIP-848: time to a stable 100-member group (tierlog vs Kafka, jars as for bench-throughput)
# and the rebalance pause when a member joins (classic eager vs cooperative vs consumer).
bench-groups: $(STAMP)
	$(BIN)/python bench/consumer_protocol.py

# Every side-by-side figure of every benchmark in one table: each benchmark's quick variant
# three times, the median of the runs, a check of the file:// remote tier's two ratios, and
# one JSON line last (bench/summary.py; over two hours on 2 cores). Quick runs are not claims.
bench-summary: $(STAMP) $(JARS) zookeeper
	$(BIN)/python bench/summary.py

clean:
	rm -rf $(VENV) data .tools .pytest_cache .mypy_cache .ruff_cache .import_linter_cache

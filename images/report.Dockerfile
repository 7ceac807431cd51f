# The report job: the `report` extra (pyspark), a Java runtime for Spark, Spark's Kafka source jars resolved
# at build time by the same Maven pom `make setup` uses — never at job time — and vigil's byte readers for the SQL
# decoder, compiled there too (the build stage has a JDK; the final one only a JRE). Local Spark in one pod by default
# (`--master local[*]`); any master when given. Build from the repository root:
#   docker build -f images/report.Dockerfile -t vigil-report:0.2.0 .
ARG PYTHON=python:3.11.7-slim-bookworm

FROM ${PYTHON} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jdk-headless maven \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY core core
COPY sidecar sidecar
COPY operator operator
COPY spark spark
COPY dev dev
ENV VIGIL_CACHE=/opt/vigil/cache
RUN python -m venv /opt/vigil \
 && /opt/vigil/bin/pip install --no-cache-dir ".[report]" \
 && /opt/vigil/bin/python -m vigil_dev.spark.install \
 && rm -rf /root/.m2

FROM ${PYTHON}
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/vigil /opt/vigil
ENV PATH=/opt/vigil/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 VIGIL_CACHE=/opt/vigil/cache
USER 65532:65532
ENTRYPOINT ["vigil", "report"]

# The operator and its admission webhooks: the base install plus the `operator` extra (kopf, kubernetes,
# cryptography, pyyaml). Build from the repository root:
#   docker build -f images/operator.Dockerfile -t vigil-operator:0.1.0 .
ARG PYTHON=python:3.11.7-slim-bookworm

FROM ${PYTHON} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY core core
COPY sidecar sidecar
COPY operator operator
COPY spark spark
COPY dev dev
RUN python -m venv /opt/vigil \
 && /opt/vigil/bin/pip install --no-cache-dir ".[operator]"

FROM ${PYTHON}
COPY --from=build /opt/vigil /opt/vigil
ENV PATH=/opt/vigil/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
# kopf's liveness endpoint, Prometheus /metrics, the admission webhook (TLS)
EXPOSE 8080 8081 9443
ENTRYPOINT ["vigil", "operator"]

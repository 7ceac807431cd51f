# The sidecar: the base install only (no kopf, kubernetes, cryptography or pyspark: `vigil sidecar` never imports
# them; tests/unit/test_cli.py proves it with those blocked). Build from the repository root:
#   docker build -f images/sidecar.Dockerfile -t vigil-sidecar:0.1.0 .
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
 && /opt/vigil/bin/pip install --no-cache-dir .

FROM ${PYTHON}
COPY --from=build /opt/vigil /opt/vigil
ENV PATH=/opt/vigil/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 7390 7391
ENTRYPOINT ["vigil", "sidecar"]

# The harness as an image, for the in-cluster Job (manifests/in-cluster/). Not built on this project's machines
# (no container runtime); build it where you have one:  docker build -t <registry>/gpupoc:<tag> .
# It holds the harness, the suites, the manifests and the profiles (the wheel's package data: setup.py); the record
# is written to /reports.
# It also runs the workload sample (`gpupoc sample train`): NumPy here; `--build-arg SAMPLE_EXTRAS=torch` adds PyTorch.
FROM python:3.11-slim
ARG SAMPLE_EXTRAS=""
WORKDIR /opt/gpupoc
COPY pyproject.toml setup.py conftest.py ./
COPY harness/ harness/
COPY suites/ suites/
COPY manifests/ manifests/
COPY profiles/ profiles/
RUN pip install --no-cache-dir . $SAMPLE_EXTRAS \
    && useradd --uid 10001 --no-create-home gpupoc \
    && mkdir /reports && chown gpupoc /reports
USER 10001
ENV GPUPOC_REPORTS_DIR=/reports
ENTRYPOINT ["python", "-m", "harness.cli"]
CMD ["run", "--queue-model", "keep"]

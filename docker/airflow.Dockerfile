# syntax=docker/dockerfile:1
#
# The lakecleaner runtime image, used by every Airflow service AND by the Spark master and worker
# of docker-compose.yml:
#   - apache/airflow 3.3.2 on Python 3.11 (the project requires Python 3.11);
#   - a Java runtime for Spark (local[*] in Airflow tasks, and the standalone master/worker);
#   - lakecleaner's dependencies at exactly the versions of uv.lock (pyspark 4.x included, so the
#     Spark driver in Airflow and the executors on the worker run the same Spark and Python);
#   - lakecleaner itself, installed editable from /opt/lakecleaner, where compose mounts the
#     working tree so edits to lib/, dags/, plugins/ and config/ apply without a rebuild.
# Build context: the project root (docker compose build does this).

ARG AIRFLOW_IMAGE=apache/airflow:3.3.2-python3.11

# Stage 1: uv.lock -> a pinned requirements list. pyproject.toml overrides pyspark-client away
# (the Spark provider depends on it, and it would overwrite the full pyspark package), and
# `uv export` honours that override where a plain `pip install` of the project would not.
FROM ${AIRFLOW_IMAGE} AS requirements
COPY --chown=airflow:0 pyproject.toml uv.lock README.md /tmp/lakecleaner/
RUN pip install --no-cache-dir "uv==0.13.8" \
 && uv export --project /tmp/lakecleaner --frozen --no-dev --no-emit-project --no-hashes \
      --output-file /tmp/lakecleaner/requirements.txt

FROM ${AIRFLOW_IMAGE}
USER root
# default-jre-headless is OpenJDK 17 on Debian bookworm (21 on trixie); Spark 4 supports both.
# spark-class finds `java` on PATH, so JAVA_HOME is not needed.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends default-jre-headless \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /opt/airflow/auth /opt/spark-work \
 && chown airflow:0 /opt/airflow/auth /opt/spark-work
USER airflow
COPY --from=requirements /tmp/lakecleaner/requirements.txt /tmp/lakecleaner-requirements.txt
# --no-deps: the list is already complete and pinned; letting pip resolve again would bring
# pyspark-client back.
RUN pip install --no-cache-dir --no-deps -r /tmp/lakecleaner-requirements.txt
COPY --chown=airflow:0 pyproject.toml README.md /opt/lakecleaner/
COPY --chown=airflow:0 lib /opt/lakecleaner/lib
RUN pip install --no-cache-dir --no-deps -e /opt/lakecleaner \
 && java -version \
 && python -c "import lakecleaner, pyspark, pyarrow; print('pyspark', pyspark.__version__, 'pyarrow', pyarrow.__version__)"

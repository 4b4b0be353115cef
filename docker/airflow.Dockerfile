# syntax=docker/dockerfile:1
#
# The lakecleaner runtime image, used by every Airflow service AND by the Spark master and worker
# of docker-compose.yml:
#   - apache/airflow 3.3.2 on Python 3.11 (the project requires Python 3.11);
#   - a Java runtime for Spark (local[*] in Airflow tasks, and the standalone master/worker);
#   - lakecleaner[all] from its wheel, with every dependency at exactly the version of uv.lock
#     (pyspark 4.x included, so the Spark driver in Airflow and the executors on the worker run
#     the same Spark and Python);
#   - the DAG files written into /opt/airflow/dags (Airflow's default dags_folder) by
#     `lakecleaner airflow dag-files`, so the image runs the DAGs without compose; the dashboard plugin is found
#     through the package's `airflow.plugins` entry point.
# docker-compose.yml mounts the project's ./dags over /opt/airflow/dags and ./config at
# /opt/lakecleaner/config: the DAG files and config a reader of the repository sees are the ones run.
# Build context: the project root (docker compose build does this).

ARG AIRFLOW_IMAGE=apache/airflow:3.3.2-python3.11

# Stage 1: the wheel, and uv.lock as a pinned requirements list of every extra.
FROM ${AIRFLOW_IMAGE} AS wheel
COPY --chown=airflow:0 pyproject.toml uv.lock README.md /tmp/lakecleaner/
COPY --chown=airflow:0 lib /tmp/lakecleaner/lib
RUN pip install --no-cache-dir "uv==0.13.8" \
 && uv export --project /tmp/lakecleaner --frozen --no-dev --all-extras --no-emit-project --no-hashes \
      --output-file /tmp/lakecleaner/requirements.txt \
 && uv build --project /tmp/lakecleaner --wheel --out-dir /tmp/lakecleaner/dist

FROM ${AIRFLOW_IMAGE}
USER root
# default-jre-headless is OpenJDK 17 on Debian bookworm (21 on trixie); Spark 4 supports both.
# spark-class finds `java` on PATH, so JAVA_HOME is not needed.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends default-jre-headless \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /opt/airflow/auth /opt/airflow/dags /opt/spark-work \
 && chown airflow:0 /opt/airflow/auth /opt/airflow/dags /opt/spark-work
USER airflow
COPY --from=wheel /tmp/lakecleaner/requirements.txt /tmp/lakecleaner-requirements.txt
COPY --from=wheel /tmp/lakecleaner/dist/ /tmp/lakecleaner-dist/
RUN pip install --no-cache-dir -r /tmp/lakecleaner-requirements.txt \
 && pip install --no-cache-dir --no-deps /tmp/lakecleaner-dist/*.whl \
 && lakecleaner airflow dag-files /opt/airflow/dags --count 32 \
 && java -version \
 && python -c "import lakecleaner, pyspark, pyarrow; print('pyspark', pyspark.__version__, 'pyarrow', pyarrow.__version__)"

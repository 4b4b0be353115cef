"""What the tests share, imported by the test files (conftest.py holds only fixtures and hooks):
the harnesses of real parts and the helpers around them, as Airflow's `tests_common` package.

    s3.py                   an S3 endpoint (moto's server, or LAKECLEANER_TEST_S3_ENDPOINT) and SeaweedFS
    backends.py             the storage backends a test runs on
    spark.py                the Spark settings of the tests' sessions and Connect server
    samples.py              the packaged sample config, written for a test
    local_airflow.py        a whole local Airflow (API server, scheduler, dag-processor), Chromium
    browser.py              a browser session signed in to that Airflow
    kafka_mock.py           librdkafka's mock cluster
    kafka_real.py, maven.py a real Kafka broker, its jars from Maven Central
    connect_sink.py         archives as Kafka Connect's S3 sink writes them
    cli_process.py          the `lakecleaner` command in a child process
    lake_process.py         a lake's writers in child processes (crash and race tests)
    fault_hooks.py          named crash points and storage faults
    flaky_proxy.py          an HTTP proxy in front of S3 that drops, delays or strips
    spark_iceberg_reader.py Spark reading the Iceberg tables
    bench_loader.py         the benchmarks, loaded as modules for their smoke tests
"""

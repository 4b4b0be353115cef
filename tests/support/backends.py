"""The storage backends a test runs on (`backend`, `store`, `lake`, `lake_config` in conftest.py)."""

#: The backends every test taking `backend` (or `store`, `lake`, `lake_config`) runs on; a module
#: adds the real object store with `pytestmark = pytest.mark.backends(*ALL_BACKENDS)`.
DEFAULT_BACKENDS = ("local", "s3")
ALL_BACKENDS = ("local", "s3", "seaweedfs")
#: Runs only these of them (comma-separated), e.g. `make test`'s second run of the engine tests,
#: on Spark Connect, which checks the session and not the storage again.
ENV_TEST_BACKENDS = "LAKECLEANER_TEST_BACKENDS"

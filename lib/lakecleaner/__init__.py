"""lakecleaner: Kafka log compaction and retention for data lakes."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lakecleaner")
except PackageNotFoundError:  # the package on PYTHONPATH without its distribution's metadata
    __version__ = "0+unknown"

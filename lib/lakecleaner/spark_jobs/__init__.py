"""The Spark applications lakecleaner submits, shipped inside the package.

spark-submit runs a file, and puts the file's folder first on the driver's `sys.path`: this folder
holds nothing but the applications, so no module of it can shadow an installed one.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def compact_topic_path() -> Path:
    """The installed path of `compact_topic.py`, for spark-submit (`lakecleaner paths` prints it)."""
    return Path(str(files(__package__).joinpath("compact_topic.py")))

"""The installed lakecleaner package, shipped to Spark's executors as a zip (`spark.submit.pyFiles`)
by the sessions the engine builds (`session.py`) and the DAG's spark-submit task."""

from __future__ import annotations

import hashlib
import os
import zipfile
from importlib.resources import files
from pathlib import Path


def package_zip() -> Path:
    """The installed lakecleaner package as a zip for spark.submit.pyFiles, so that executors whose
    Python lacks lakecleaner still import it (they need its core dependencies: pyarrow, numpy,
    xxhash, pyroaring, boto3, pyyaml, click, rich). Made once per content, under the user's cache folder."""
    package = Path(str(files("lakecleaner")))
    sources = sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    digest = hashlib.sha256()
    for path in sources:
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lakecleaner"
    target = cache / f"lakecleaner-{digest.hexdigest()[:16]}.zip"
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zipped:
            for path in sources:
                zipped.write(path, Path("lakecleaner") / path.relative_to(package))
        partial.replace(target)  # atomic: a concurrent run sees the whole zip or none
    return target


__all__ = ["package_zip"]

"""The packaged sample config, written for a test."""

from __future__ import annotations

from pathlib import Path


def write_sample(directory: Path) -> Path:
    """The packaged sample config written to `directory`/lakecleaner.yaml (its lake in `directory`/lake)."""
    from lakecleaner.cli import write_sample_config

    return write_sample_config(directory / "lakecleaner.yaml")

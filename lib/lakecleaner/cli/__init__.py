"""The `lakecleaner` command line. Every command takes `--config` and `--lake`, and `--json`
for output scripts can parse. Errors print one clear message and exit with status 2.

One module per command group (topics, records, status, cleaning, offsets, uncleanable, audit,
setup, demo; `lake_plan` for `plan --all`); `base` holds the group and what the commands share, `output` how they print,
`main` the entry point.
"""

from lakecleaner.cli.base import cli
from lakecleaner.cli.main import main
from lakecleaner.cli.setup import write_sample_config

__all__ = ["cli", "main", "write_sample_config"]

"""The `lakecleaner` group and what every command shares: the context (config, lake, --json),
the parsing of common options, and how failed partitions end a command (one line each, exit 1)."""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import sys
from collections.abc import Callable, Mapping, Sequence

import click

from lakecleaner import __version__
from lakecleaner.clock import parse_time_ms, wall_clock_ms
from lakecleaner.config import (
    ENV_CONFIG_PATH,
    ENV_LAKE_URI,
    LakeConfig,
    find_config,
    load_config,
    parse_config,
)
from lakecleaner.extras import open_lake
from lakecleaner.lake import Lake, failure_runs, partitions_label


class Context:
    def __init__(self, config_path: str | None, lake_uri: str | None, as_json: bool) -> None:
        self.config_path = config_path
        self.lake_uri = lake_uri
        self.as_json = as_json
        self._lake: Lake | None = None

    @functools.cached_property
    def config(self) -> LakeConfig:
        """The config file's settings, with --lake replacing the lake URI (loaded once). With --lake
        and no config file anywhere (`find_config`), Kafka's defaults and no managed topics."""
        if self.lake_uri and find_config(self.config_path) is None:
            return parse_config({"lake": {"uri": self.lake_uri}}, "<--lake>")
        config = load_config(self.config_path)
        return dataclasses.replace(config, lake_uri=self.lake_uri) if self.lake_uri else config

    @property
    def lake(self) -> Lake:
        if self._lake is None:
            self._lake = open_lake(self.config)
        return self._lake

    def emit(self, data: object, human: Callable[[], None]) -> None:
        if self.as_json:
            click.echo(json.dumps(data, indent=1, default=str))
        else:
            human()


pass_ctx = click.make_pass_decorator(Context)


def parse_config_pairs(pairs: tuple[str, ...]) -> dict[str, object]:
    """k=v pairs from --config options."""
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not key=value (e.g. --config cleanup.policy=compact)")
        out[key.strip()] = value.strip()
    return out


@click.group()
@click.version_option(__version__, prog_name="lakecleaner", message="%(prog)s %(version)s")
@click.option("--config", "config_path", envvar=ENV_CONFIG_PATH, help="Path of lakecleaner.yaml.")
@click.option(
    "--lake",
    "lake_uri",
    envvar=ENV_LAKE_URI,
    help=f"Lake URI (s3://bucket/prefix or file:///path); overrides the config (also ${ENV_LAKE_URI}).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, lake_uri: str | None, as_json: bool) -> None:
    """Kafka's log compaction and retention for logs stored in a data lake."""
    ctx.obj = Context(config_path, lake_uri, as_json)


def parse_now(text: str | None) -> int:
    return wall_clock_ms() if text is None else parse_time_ms(text)


NOW_HELP = "Decide as of this time (epoch ms or ISO 8601; default: now)."


def partitions_or_all(values: tuple[int, ...]) -> list[int] | None:
    return sorted(set(values)) or None


def unreadable_lines(topic: str, failures: Mapping[int, str]) -> list[tuple[str, str]]:
    """A topic's unreadable partitions as failure lines: consecutive partitions that fail for the
    same reason share one line (`orders-3..9999`), so a topic.json naming partitions storage does
    not hold is one line, not one per partition."""
    lines: list[tuple[str, str]] = []
    for first, last, reason in failure_runs(failures):
        lines.append((f"{topic}-{partitions_label(first, last)}", reason))
    return lines


def exit_on_failures(failures: Sequence[tuple[str, str | None]]) -> None:
    """Exit with status 1, one line per failure (of a partition `topic-partition`, or a group) on
    stderr, when anything failed; the command has done its work on the rest."""
    for what, error in failures:
        click.echo(f"{what}: FAILED: {error}", err=True)  # one line each, never wrapped
    if failures:
        sys.exit(1)


def exit_on_unreadable(unopened: Mapping[str, str], unreadable: Mapping[str, Mapping[int, str]]) -> None:
    """`exit_on_failures` for commands over many topics: a line per topic that could not be opened
    (`unopened`, its reason) and per run of a topic's unreadable partitions (`unreadable_lines`)."""
    topics = [(f"topic {name}", reason) for name, reason in unopened.items()]
    exit_on_failures(topics + [line for name, errors in unreadable.items() for line in unreadable_lines(name, errors)])


def decode_base64(value: str, what: str) -> bytes:
    """`value` decoded; a clear error naming `what` when it is not base64."""
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise click.ClickException(f"{what} is not valid base64: {exc}") from None

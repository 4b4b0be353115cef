"""The entry point: every command registered, `--json` accepted after each, and errors turned
into one clear line and an exit status."""

from __future__ import annotations

import json
import sys
import warnings
from collections.abc import Callable
from typing import Any

import click

from lakecleaner.cli import (  # noqa: F401  (they register their commands)
    adopt,
    audit,
    cleaning,
    demo,
    dev,
    iceberg,
    mirror,
    offsets,
    records,
    setup,
    status,
    summaries,
    topics,
    uncleanable,
)
from lakecleaner.cli.base import Context, cli
from lakecleaner.deprecation import LakeCleanerDeprecationWarning
from lakecleaner.errors import ConfigError, ConfigFileSyntax, LakeCleanerError
from lakecleaner.process import exit_flushed


def _json_after_the_command(group: click.Group) -> None:
    """Every command takes `--json` after its name too (`lakecleaner status --json`), meaning what
    it means before the command (`lakecleaner --json status`)."""

    def set_json(ctx: click.Context, _: click.Parameter, value: bool) -> None:
        if value:
            ctx.find_object(Context).as_json = True  # type: ignore[union-attr]  # set by `cli` for every command

    for command in group.commands.values():
        if isinstance(command, click.Group):
            _json_after_the_command(command)
        else:
            command.params.append(
                click.Option(
                    ["--json"], is_flag=True, expose_value=False, is_eager=True, callback=set_json, help="Print JSON."
                )
            )


_json_after_the_command(cli)


def main() -> None:
    """Entry point: run the CLI, turning the project's errors into one clear message and exit 2;
    the process ends by `process.exit_flushed` (every command's I/O is done when it returns: its
    thread pools wait for their work). lakecleaner's deprecations are shown (once each) whatever
    the interpreter's warning filters say: Python hides a DeprecationWarning not raised in __main__."""
    warnings.filterwarnings("default", category=LakeCleanerDeprecationWarning)
    warnings.showwarning = _show_warning(warnings.showwarning)
    exit_flushed(_run())


def _show_warning(shown_before: Callable[..., None]) -> Callable[..., None]:
    """Show lakecleaner's deprecations as one line, `warning: …`, like its errors (the frame a
    warning names is click's, which helps no one); other warnings as before."""

    def show(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, LakeCleanerDeprecationWarning):
            click.echo(f"warning: {message}", err=True)
        else:
            shown_before(message, category, *args, **kwargs)

    return show


def _run() -> int:
    """The CLI's exit status, its errors reported: one `error:` line on stderr (and, with `--json`,
    `{"error": …, "exit": …}` on stdout). Bad input of every kind exits 2."""
    try:
        result = cli.main(standalone_mode=False, prog_name="lakecleaner")  # under `python -m` too
    except SystemExit as exc:  # a command's own sys.exit (failed partitions: 1)
        return _status(exc.code)
    except click.exceptions.Abort:
        return 130
    except click.exceptions.NoArgsIsHelpError as exc:  # `lakecleaner` or a group alone: its help
        exc.show()
        return exc.exit_code
    except click.ClickException as exc:  # a bad option, value or argument: bad input
        return _error(_usage_message(exc), 2)
    except ConfigFileSyntax as exc:  # where the file breaks YAML, as editors and linters say it
        return _error(str(exc), 2)
    except ConfigError as exc:
        _echo_config_error(exc)
        return _json_error("configuration: " + "; ".join(exc.problems), 2)
    except (LakeCleanerError, ValueError) as exc:
        return _error(str(exc), 2)
    except ModuleNotFoundError as exc:
        extra = extra_providing(exc.name)
        if extra is None:
            raise
        return _error(f"this command needs {exc.name}: pip install 'lakecleaner[{extra}]'", 2)
    return result if isinstance(result, int) else 0  # click returns an Exit's code (--help: 0)


def _error(message: str, code: int) -> int:
    """Report an error: its line on stderr, and its object on stdout under `--json`."""
    click.echo(f"error: {message}", err=True)
    return _json_error(message, code)


def _json_error(message: str, code: int) -> int:
    """`{"error": message, "exit": code}` on stdout when the command line asks for JSON (`--json`
    before or after the command), so that a script reading stdout sees the error too."""
    if "--json" in sys.argv[1:]:
        click.echo(json.dumps({"error": message, "exit": code}))
    return code


def _usage_message(exc: click.ClickException) -> str:
    """Click's own error (a missing or unknown option, a bad value) as the one `error:` line every
    user error gets, naming the command's help instead of click's three-line usage block."""
    message = exc.format_message().rstrip(".")
    message = message[:1].lower() + message[1:]
    context = exc.ctx if isinstance(exc, click.UsageError) else None
    if context is None:
        return message
    return f"{message}; see `{context.command_path} --help`"


def _echo_config_error(exc: ConfigError) -> None:
    """A configuration's problems: one `error:` line, then each problem on its own line."""
    if len(exc.problems) == 1:
        click.echo(f"error: configuration: {exc.problems[0]}", err=True)
        return
    click.echo(f"error: configuration: {len(exc.problems)} problems:", err=True)
    for problem in exc.problems:
        click.echo(f"  - {problem}", err=True)


def _status(code: object) -> int:
    """The exit status of a SystemExit's code, as the interpreter would make it."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    click.echo(str(code), err=True)
    return 1


#: The package extra that brings each optional top-level module (pyproject.toml).
EXTRAS = {
    "pyspark": "spark",
    "great_expectations": "quality",
    "pandas": "quality",
    "airflow": "airflow",
    "fastapi": "airflow",
    "jinja2": "airflow",
    "confluent_kafka": "kafka",
    "pyiceberg": "iceberg",
    "fastavro": "connect",
}


def extra_providing(module: str | None) -> str | None:
    """The extra to install for a missing module, if it is one an extra brings."""
    return EXTRAS.get((module or "").split(".")[0])

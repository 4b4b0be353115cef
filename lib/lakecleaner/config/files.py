"""Finding and loading the config file (--config, $LAKECLEANER_CONFIG, ./lakecleaner.yaml), with
bounds on its size, aliases and nesting, and the packaged sample."""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib.resources import files
from pathlib import Path

import yaml

from lakecleaner.config.environment import ENV_CONFIG_PATH
from lakecleaner.config.settings import LakeConfig, parse_config
from lakecleaner.config.values import shown
from lakecleaner.config.yaml_select import read_yaml
from lakecleaner.errors import ConfigError, ConfigFileSyntax

#: The config file looked for in the working directory when neither --config nor
#: $LAKECLEANER_CONFIG names one.
LOCAL_CONFIG = "lakecleaner.yaml"


def find_config(path: str | Path | None = None) -> Path | None:
    """The config file, looked for in this order: `path` (the CLI's --config), $LAKECLEANER_CONFIG,
    ./lakecleaner.yaml; None when none is given and ./lakecleaner.yaml does not exist. A file that
    is named but missing is a ConfigError."""
    named = path or os.environ.get(ENV_CONFIG_PATH)
    if named:
        chosen = Path(named)
        if not chosen.is_file():
            raise ConfigError([f"{chosen}: config file not found (named by {'--config' if path else ENV_CONFIG_PATH})"])
        return chosen.resolve()
    local = Path(LOCAL_CONFIG)
    return local.resolve() if local.is_file() else None


def locate_config(path: str | Path | None = None) -> Path:
    """`find_config`, or a ConfigError naming the three places and how to get a config file."""
    found = find_config(path)
    if found is None:
        raise ConfigError(
            [
                f"no config file: pass --config PATH, set {ENV_CONFIG_PATH}, or create ./{LOCAL_CONFIG} "
                "(`lakecleaner init` writes the sample one)"
            ]
        )
    return found


#: A config file of 10,000 topics is about 2 MB; the bound keeps a mistaken path (a segment file, a
#: log) from being read whole. Aliases and nesting are bounded by `yaml_select`.
MAX_CONFIG_BYTES = 32 << 20


def load_config(path: str | Path | None = None, keep_topic: Callable[[str], bool] | None = None) -> LakeConfig:
    """Load and validate the config file `locate_config(path)` finds (bounded: MAX_CONFIG_BYTES, and
    `yaml_select`'s bounds on aliases and nesting). With `keep_topic`, the config holds only the
    topics it accepts, and the others are neither read nor validated (a DAG file's share, issue 50).

    Args:
        path: the file; None for `$LAKECLEANER_CONFIG`, else `./lakecleaner.yaml`.
        keep_topic: which topics to read; None for every one.

    Returns:
        The validated config.

    Raises:
        ConfigError: no such file, a file too large or not YAML, or invalid values (every problem,
            each naming its key and the fix).
    """
    chosen = locate_config(path)
    text = chosen.read_text()
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError([f"{chosen}: {len(text)} characters, more than a config file may have ({MAX_CONFIG_BYTES})"])
    try:
        data = read_yaml(text, keep_topic)
    except yaml.MarkedYAMLError as exc:
        raise ConfigFileSyntax([yaml_problem(chosen, exc)]) from None
    except (yaml.YAMLError, RecursionError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigFileSyntax([f"{chosen}: not valid YAML: {shown(first)}"]) from None
    return parse_config(data or {}, str(chosen))


def yaml_problem(path: Path, exc: yaml.MarkedYAMLError) -> str:
    """A YAML error as one line, `<file>:<line>:<column>: <problem>` (1-based, as editors count),
    at the mark where the parser found the problem (else where the construct it was in began)."""
    mark = exc.problem_mark or exc.context_mark
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    problem = exc.problem or exc.context or "not valid YAML"
    context = f" ({exc.context}, from line {exc.context_mark.line + 1})" if exc.context and exc.context_mark else ""
    return f"{where}: not valid YAML: {problem}{context}"


def sample_config_text() -> str:
    """The sample config file shipped with the package (the demo's two topics, a local lake at ./lake)."""
    return files("lakecleaner").joinpath("samples", LOCAL_CONFIG).read_text()

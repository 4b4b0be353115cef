"""Finding and loading the config file (--config, $LAKECLEANER_CONFIG, ./lakecleaner.yaml), with
bounds on its size, aliases and nesting, and the packaged sample."""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from lakecleaner.config.environment import ENV_CONFIG_PATH
from lakecleaner.config.settings import LakeConfig, parse_config
from lakecleaner.errors import ConfigError

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


#: Bounds on a config file, which is input like any other: a 1 KB "billion laughs" of nested aliases
#: expands to gigabytes wherever the value is walked or printed, and deep nesting exhausts the stack.
MAX_CONFIG_BYTES = 1 << 20
MAX_CONFIG_ALIASES = 1000
MAX_CONFIG_DEPTH = 50


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing more than MAX_CONFIG_ALIASES aliases and nesting deeper than
    MAX_CONFIG_DEPTH."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases, self.depth = 0, 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_CONFIG_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_CONFIG_ALIASES} aliases (*name): a config file needs far fewer")
        self.depth += 1
        try:
            if self.depth > MAX_CONFIG_DEPTH:
                raise yaml.YAMLError(f"nested deeper than {MAX_CONFIG_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_config(path: str | Path | None = None) -> LakeConfig:
    """Load and validate the config file `locate_config(path)` finds (bounded: MAX_CONFIG_BYTES,
    MAX_CONFIG_ALIASES, MAX_CONFIG_DEPTH)."""
    chosen = locate_config(path)
    text = chosen.read_text()
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError([f"{chosen}: {len(text)} characters, more than a config file may have ({MAX_CONFIG_BYTES})"])
    try:
        data = yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader, with bounds
    except (yaml.YAMLError, RecursionError) as exc:
        raise ConfigError([f"{chosen}: not valid YAML: {str(exc)[:500]}"]) from None
    return parse_config(data or {}, str(chosen))


def sample_config_text() -> str:
    """The sample config file shipped with the package (the demo's two topics, a local lake at ./lake)."""
    return files("lakecleaner").joinpath("samples", LOCAL_CONFIG).read_text()

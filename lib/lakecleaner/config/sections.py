"""Helpers of the YAML file's sections: the keys a section may have, and ${VAR} references."""

from __future__ import annotations

import os
import re
from typing import Any

from lakecleaner.config.values import did_you_mean

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: object, where: str, problems: list[str]) -> object:
    """Expand ${VAR} references in a string from the environment."""
    if not isinstance(value, str):
        return value

    def sub(match: re.Match[str]) -> str:
        var = match.group(1)
        if var not in os.environ:
            problems.append(f"{where}: environment variable {var} is not set; export it or remove the reference")
            return ""
        return os.environ[var]

    return _ENV_REF.sub(sub, value)


def check_keys(section: object, allowed: set[str], where: str, problems: list[str]) -> dict[str, Any]:
    if section is None:
        return {}
    if not isinstance(section, dict):
        problems.append(f"{where}: must be a mapping, got {type(section).__name__}")
        return {}
    for key in section:
        if key not in allowed:
            problems.append(f"{where}: unknown key '{key}'{did_you_mean(str(key), allowed)}")
    return section


def client_properties(raw: dict[Any, Any], where: str, what: str, problems: list[str]) -> dict[str, str]:
    """A mapping of a client library's properties (librdkafka's, pyiceberg's) as strings: booleans
    as true/false, ${VAR} expanded; a value that is no string or number is a problem naming `what`."""
    properties: dict[str, str] = {}
    for key, value in raw.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        if not isinstance(value, str | int | float):
            problems.append(f"{where}.{key}: must be a string or a number (a {what})")
            continue
        properties[str(key)] = str(expand_env(str(value), f"{where}.{key}", problems))
    return properties

"""The Great Expectations runner (`lakecleaner.quality`) in a process of its own, as an Airflow task
or a compaction's driver imports it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import lakecleaner

# One validation of each kind of expectation lakecleaner uses, one of them failing, then a look at
# what GX's import ran, then a use of the deferred scipy.stats.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    import pandas as pd
    from lakecleaner import quality

    gxe = quality.expectations()
    frame = pd.DataFrame({"partition": [0, 1, 2], "a": [1, 2, 3], "b": [1, 2, 4], "flag": [0, 0, 5]})
    report = quality.validate(
        "kinds",
        frame,
        [
            quality.Check("in set", gxe.ExpectColumnValuesToBeInSet(column="partition", value_set=[0, 1, 2])),
            quality.Check("pairs", gxe.ExpectColumnPairValuesToBeEqual(column_A="a", column_B="b")),
            quality.Check("max", gxe.ExpectColumnMaxToBeBetween(column="flag", max_value=0)),
        ],
    )
    ran = {name: name in sys.modules for name in ("scipy.stats._stats_py", "altair.vegalite")}
    from scipy import stats

    entropy = float(stats.entropy([0.5, 0.5], [0.25, 0.75]))
    print(json.dumps({
        "outcomes": [[o.rule, o.success, o.unexpected_count] for o in report.outcomes],
        "ran_with_gx": ran,
        "entropy": entropy,
        "stats_ran_once_used": "scipy.stats._stats_py" in sys.modules,
    }))
    """
)


def test_gx_is_imported_without_running_what_only_unused_expectations_need() -> None:
    """scipy.stats and altair, which GX imports for expectations lakecleaner does not use (2 s of
    GX's 5 s import), are deferred: the validations run without them, and they work once used."""
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["outcomes"] == [["in set", True, 0], ["pairs", False, 1], ["max", False, None]]
    assert result["ran_with_gx"] == {"scipy.stats._stats_py": False, "altair.vegalite": False}
    assert abs(result["entropy"] - 0.1438410362258904) < 1e-12  # KL(p || q), natural log
    assert result["stats_ran_once_used"]


def named_modules(node: ast.AST, constants: bool) -> list[str]:
    """The modules an import node imports, or (with `constants`) a string constant, which may name
    a module to `importlib.import_module`."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    if constants and isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    return []


def test_every_import_of_gx_goes_through_the_quality_module() -> None:
    """Elsewhere in the package GX is neither imported nor named to an import: only
    `lakecleaner.quality` imports it (with the deferral and its loggers quiet); the CLI's map of
    optional modules to extras names it as a module a missing extra lacks."""
    package = Path(lakecleaner.__file__).parent
    found = []
    for path in sorted(package.rglob("*.py")):
        if path == package / "quality.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for name in named_modules(node, constants=path.name != "cli.py"):
                if name.split(".")[0] == "great_expectations":
                    found.append(f"{path.relative_to(package)}:{getattr(node, 'lineno', '?')}")
    assert found == []

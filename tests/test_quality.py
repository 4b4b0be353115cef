"""The Great Expectations runner (`lakecleaner.quality`) in a process of its own, as an Airflow task
or a compaction's driver imports it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import lakecleaner
from lakecleaner import quality

# One validation of each kind of expectation lakecleaner uses, one of them failing, in a process
# like a retention task (pyspark not loaded) or like a compaction's driver (pyspark.sql loaded
# first); then a look at what GX's import loaded and ran, then a use of what it left out.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    import pandas as pd
    if sys.argv[1] == "driver":
        import pyspark.sql
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
    watched = ("scipy.stats._stats_py", "altair.vegalite", "pyspark", "pyspark.ml", "pyspark.sql.connect", "sqlalchemy")
    loaded = sorted(name for name in watched if name in sys.modules)
    from scipy import stats
    import pyspark.ml.feature, sqlalchemy  # absent for GX's import only

    print(json.dumps({
        "outcomes": [[o.rule, o.success, o.unexpected_count] for o in report.outcomes],
        "loaded_with_gx": loaded,
        "entropy": float(stats.entropy([0.5, 0.5], [0.25, 0.75])),
        "stats_ran_once_used": "scipy.stats._stats_py" in sys.modules,
        "bucketizer": pyspark.ml.feature.Bucketizer.__name__,
    }))
    """
)


@pytest.mark.parametrize(("setting", "loaded"), [("task", []), ("driver", ["pyspark"])])
def test_gx_imports_as_lakecleaner_uses_it_on_pandas_alone(setting: str, loaded: list[str]) -> None:
    """GX's optional Spark and SQL backends, which lakecleaner never validates on, are not loaded
    with it (what the process loaded before stays), and scipy.stats and altair, which GX imports
    for expectations lakecleaner does not use, are deferred: the validations give their outcomes,
    and each of those modules works once the process uses it."""
    done = subprocess.run([sys.executable, "-c", SCRIPT, setting], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["outcomes"] == [["in set", True, 0], ["pairs", False, 1], ["max", False, None]]
    assert result["loaded_with_gx"] == loaded
    assert abs(result["entropy"] - 0.1438410362258904) < 1e-12  # KL(p || q), natural log
    assert result["stats_ran_once_used"] and result["bucketizer"] == "Bucketizer"


def test_only_the_thread_importing_gx_goes_without_its_backends() -> None:
    """Another thread's imports go on as ever while GX imports: the finder answers only the
    thread that made it."""
    finder = quality._GXImport()
    with pytest.raises(ModuleNotFoundError, match="sqlalchemy"):
        finder.find_spec("sqlalchemy", None)
    elsewhere: list[object] = []
    thread = threading.Thread(target=lambda: elsewhere.append(finder.find_spec("sqlalchemy", None)))
    thread.start()
    thread.join()
    assert elsewhere == [None]  # the next finder finds it, as without this one
    assert finder.find_spec("json", None) is None


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
            for name in named_modules(node, constants=path != package / "cli" / "main.py"):
                if name.split(".")[0] == "great_expectations":
                    found.append(f"{path.relative_to(package)}:{getattr(node, 'lineno', '?')}")
    assert found == []


def test_a_list_of_checks_validated_again_reuses_its_definition_and_judges_each_frame_on_its_own() -> None:
    """The gate validates the same expectations every run: GX's suite and definition are made once
    per process (`quality._definition`), and each run's outcomes are its own frame's, each named by
    its check's rule, whichever check objects the run made."""
    import pandas as pd

    gxe = quality.expectations()

    def checks() -> list[quality.Check]:
        return [
            quality.Check("no flags", gxe.ExpectColumnMaxToBeBetween(column="flag", max_value=0)),
            quality.Check("known", gxe.ExpectColumnValuesToBeInSet(column="p", value_set=[0, 1])),
        ]

    before = len(quality._definitions)
    bad = quality.validate("bad", pd.DataFrame({"flag": [0, 3], "p": [0, 1]}), checks())
    good = quality.validate("good", pd.DataFrame({"flag": [0, 0], "p": [0, 1]}), checks())
    worse = quality.validate("worse", pd.DataFrame({"flag": [1, 0], "p": [0, 7]}), checks())
    assert len(quality._definitions) == before + 1
    assert [(o.rule, o.success) for o in bad.outcomes] == [("no flags", False), ("known", True)]
    assert good.success and [o.rule for o in good.outcomes] == ["no flags", "known"]
    assert [(o.rule, o.success) for o in worse.outcomes] == [("no flags", False), ("known", False)]
    for n in range(quality.MAX_DEFINITIONS + 2):  # lists of other values: the context keeps the latest
        quality.validate(
            "n", pd.DataFrame({"x": [n]}), [quality.Check("x", gxe.ExpectColumnMaxToBeBetween(column="x", max_value=n))]
        )
    assert len(quality._definitions) == quality.MAX_DEFINITIONS

"""`lakecleaner init`, `paths`, `airflow setup|login|env|dag-files` and `connect-server`: setting lakecleaner up."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from lakecleaner.cli.base import Context, cli, parse_config_pairs, pass_ctx
from lakecleaner.cli.output import console
from lakecleaner.config import (
    LOCAL_CONFIG,
    find_config,
    sample_config_text,
)
from lakecleaner.deprecation import deprecated
from lakecleaner.orchestration.dag_files import MAX_DAG_FILES, TOPICS_PER_FILE, auto_count, write_dag_files


@cli.group("airflow")
def airflow_group() -> None:
    """Prepare Airflow for the topics' DAGs."""


@airflow_group.command("setup")
@pass_ctx
def airflow_setup(ctx: Context) -> None:
    """Create or update what the DAGs need in Airflow (the compact tasks' pool); idempotent.

    Run it after `airflow db migrate`, with Airflow's environment (AIRFLOW_HOME or the database
    connection) and the config file the DAGs use."""
    from lakecleaner.orchestration.airflow_setup import setup_airflow

    done = setup_airflow(ctx.config)
    ctx.emit(
        done,
        lambda: console.print(
            f"Airflow is set up for lakecleaner: pool '{done['pool']}' with {done['pool_slots']} slot(s)", markup=False
        ),
    )


@airflow_group.command("login")
@click.option(
    "--file",
    "path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The simple auth manager's password file (AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE).",
)
@click.option("--user", default="admin", show_default=True, help="The user (of SIMPLE_AUTH_MANAGER_USERS).")
@pass_ctx
def airflow_login(ctx: Context, path: Path, user: str) -> None:
    """Make the Airflow login as Airflow's simple auth manager does: $AIRFLOW_ADMIN_PASSWORD when
    set (written, never printed), else the password the file keeps, else a generated one, printed
    this once."""
    from lakecleaner.orchestration.airflow_login import ensure_login

    login = ensure_login(path, user, os.environ.get("AIRFLOW_ADMIN_PASSWORD") or None)

    def human() -> None:
        if login.made is not None:
            console.print(f"Airflow login: {user}, password {login.made} (kept in {path})", markup=False)
        else:
            console.print(f"Airflow login: {user}, its password kept in {path}", markup=False)

    ctx.emit({"user": user, "file": str(path), "generated_password": login.made}, human)


@airflow_group.command("env")
@click.option(
    "--home",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("airflow_home"),
    show_default=True,
    help="The Airflow home (make airflow-ui's).",
)
@click.option(
    "--dags",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("dags"),
    show_default=True,
    help="The DAG folder (make airflow-ui's: the checkout's dags/; `airflow dag-files` writes one).",
)
@pass_ctx
def airflow_env_command(ctx: Context, home: Path, dags: Path) -> None:
    """Print the environment Airflow's own commands need to see the topics' DAGs (the home, the
    DAG folder, the config file, the SQLite settings), as shell exports:
    eval "$(lakecleaner airflow env)" before `airflow backfill create ...`. What the environment
    already holds (a Spark connection with its credentials, say) is not printed."""
    import shlex

    from lakecleaner.orchestration.local import lakecleaner_airflow_env

    found = find_config(ctx.config_path)
    if found is None:
        raise click.UsageError("no config file: pass --config (the DAGs read their topics from it)")
    env = lakecleaner_airflow_env(home.resolve(), found.resolve(), dags.resolve())
    lines = "\n".join(f"export {key}={shlex.quote(value)}" for key, value in sorted(env.items()))
    ctx.emit(env, lambda: console.print(lines, markup=False, highlight=False, soft_wrap=True))


class DagFileCount(click.ParamType[int | None, Any]):
    """`--count`: a number of files (1 to MAX_DAG_FILES), or `auto`."""

    name = "count"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | None:
        if value is None or value == "auto":
            return None
        try:
            count = int(value)
        except ValueError:
            count = 0
        if not 1 <= count <= MAX_DAG_FILES:
            self.fail(f"{value!r}: give `auto` or a number of files from 1 to {MAX_DAG_FILES}", param, ctx)
        return count


@airflow_group.command("dag-files")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option(
    "--count",
    type=DagFileCount(),
    default="auto",
    show_default=True,
    help=f"How many files to spread the topics' DAGs over; auto: about {TOPICS_PER_FILE} topics a file, "
    "a power of two (bench/README.md has parse times).",
)
@click.option("--files", "old_count", type=click.IntRange(1, MAX_DAG_FILES), hidden=True)
@click.option("--config-beside", is_flag=True, hidden=True)
@pass_ctx
def airflow_dag_files(
    ctx: Context, folder: Path, count: int | None, old_count: int | None, config_beside: bool
) -> None:
    """Write the DAG files into FOLDER (Airflow's dags_folder): the topics' DAGs spread over --count
    files by a hash of the topic's name, so each parses quickly and Airflow parses them in parallel.
    Every file is the same text; its name says its share. A topic added later lands in one file;
    DAG ids never depend on the file. The folder's DAG files of another count are removed, so no
    DAG is in two files. A file reads $LAKECLEANER_CONFIG, else config/lakecleaner.yaml beside
    FOLDER (a checkout's dags/), else ./lakecleaner.yaml."""
    if old_count is not None:
        deprecated("`airflow dag-files --files N`", instead="use --count N", removed_in="0.3")
        count = old_count
    if config_beside:
        deprecated(
            "`airflow dag-files --config-beside`",
            instead="drop it: every DAG file reads config/lakecleaner.yaml beside its folder when there is one",
            removed_in="0.3",
        )
    if count is None:
        count = auto_count(len(ctx.config.topics))
    written, removed = write_dag_files(folder, count)
    data = {"folder": str(folder.resolve()), "written": [p.name for p in written], "removed": [p.name for p in removed]}
    gone = f"; removed {', '.join(data['removed'])}" if removed else ""
    ctx.emit(
        data,
        lambda: console.print(f"{len(written)} DAG files in {data['folder']}{gone}", markup=False, highlight=False),
    )


# -- set-up ------------------------------------------------------------------------------------
@cli.command()
@click.argument("path", default=LOCAL_CONFIG, type=click.Path(dir_okay=False, path_type=Path))
def init(path: Path) -> None:
    """Write the sample config file to PATH (default ./lakecleaner.yaml), with its lake in a folder
    `lake` beside it; an existing file is never overwritten."""
    console.print(f"wrote the sample config to {write_sample_config(path)}", markup=False, highlight=False)


@cli.command()
@pass_ctx
def paths(ctx: Context) -> None:
    """Where the installed package keeps what a deployment points at: the spark-submit application,
    and the config file in use (if any). The DAG files are written where Airflow reads them, by
    `lakecleaner airflow dag-files DIR`."""
    from lakecleaner.spark_jobs import compact_topic_path

    found = find_config(ctx.config_path)
    data = {
        "compact_job": str(compact_topic_path()),
        "config": None if found is None else str(found),
    }
    lines = "\n".join(f"{k}: {v}" for k, v in data.items())
    ctx.emit(data, lambda: console.print(lines, markup=False, highlight=False))


def write_sample_config(path: Path) -> Path:
    """Write the sample config to `path` with an absolute lake URI (the folder `lake` beside it)."""
    path = path.resolve()
    if path.exists():
        raise click.ClickException(f"{path} exists; remove it or choose another path")
    lake = path.parent / "lake"
    text = sample_config_text().replace("uri: file://./lake", f"uri: file://{lake}")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- a Spark Connect server -------------------------------------------------------------------
@cli.group("connect-server")
def connect_server() -> None:
    """A Spark Connect server for compaction runs (pyspark's bundled one, set up for lakecleaner)."""


_SERVER_FOLDER = click.option(
    "--folder",
    default=".spark-connect",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the server keeps its logs and pid.",
)


@connect_server.command("start")
@_SERVER_FOLDER
@click.option("--port", default=15002, show_default=True, type=click.IntRange(1, 65535))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0 for all).")
@click.option("--master", default="local[*]", show_default=True, help="Spark master the server runs on.")
@click.option("--conf", "pairs", multiple=True, help="Extra Spark setting, key=value (repeatable).")
@click.option("--foreground", is_flag=True, help="Run in this process's place (a container's main process).")
def connect_server_start(
    folder: Path, port: int, host: str, master: str, pairs: tuple[str, ...], foreground: bool
) -> None:
    """Start the server and wait until it listens; prints its URL (for spark.remote / --remote)."""
    from lakecleaner.engine.connect_server import ConnectServer

    conf = {key: str(value) for key, value in parse_config_pairs(pairs).items()}
    server = ConnectServer(folder.resolve(), port=port, master=master, host=host, conf=conf)
    if foreground:
        server.run_foreground()
    click.echo(server.start())


@connect_server.command("stop")
@_SERVER_FOLDER
def connect_server_stop(folder: Path) -> None:
    """Stop the server started with this folder."""
    from lakecleaner.engine.connect_server import ConnectServer

    ConnectServer(folder.resolve()).stop()

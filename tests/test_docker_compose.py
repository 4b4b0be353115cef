"""docker-compose.yml is consistent with itself, its docs, its Dockerfile and lakecleaner's config.

There is no Docker engine in CI, so these checks read the files: pinned images, the service table of
docs/docker-compose.md, depends_on targets, lakecleaner's environment variable names, the mounted
config file (parsed with parse_config under the compose environment) and the Spark connection.
Each check is a function returning its problems, so the tests can also show it catches a bad file.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from lakecleaner.config import ENV_CONFIG_PATH, ENVIRONMENT_VARIABLES, parse_config

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
COMPOSE_DOC = ROOT / "docs" / "docker-compose.md"
LAKE_URI = "s3://lake/lakecleaner"
SPARK_CONN_VAR = "AIRFLOW_CONN_SPARK_LAKECLEANER"
LAKECLEANER_PREFIXES = ("LAKECLEANER_", "AWS_")
DEPENDS_ON_CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")

Compose = dict[str, Any]


def load_compose() -> Compose:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict)
    return data


def services(compose: Compose) -> dict[str, dict[str, Any]]:
    result = compose.get("services") or {}
    assert isinstance(result, dict)
    return result


def interpolate(value: object) -> str:
    """A compose value as compose would pass it with no .env file: ${VAR:-default} → default, $$ → $."""
    text = str(value)
    unresolved = [m.group(1) for m in _INTERPOLATION.finditer(text) if m.group(2) is None]
    assert not unresolved, f"{text!r} needs {unresolved} from the host; give it a default"
    return _INTERPOLATION.sub(lambda m: m.group(2), text).replace("$$", "$")


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment, in either compose form (mapping or list of NAME=value)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    """Target → condition of a service's depends_on (the list form means service_started)."""
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


# --------------------------------------------------------------------------------------------
# The checks


def image_problems(compose: Compose) -> list[str]:
    """Every service has a build or an image with an explicit tag other than latest."""
    problems = []
    for name, service in services(compose).items():
        image, build = service.get("image"), service.get("build")
        if image is None:
            if build is None:
                problems.append(f"{name}: neither image nor build")
            continue
        image = str(image).split("@", 1)[0]
        last = image.rsplit("/", 1)[-1]
        if "$" in image:
            problems.append(f"{name}: image {image!r} is interpolated; pin it in the file")
        elif ":" not in last:
            problems.append(f"{name}: image {image!r} has no tag")
        elif last.split(":", 1)[1] in ("latest", ""):
            problems.append(f"{name}: image {image!r} is not pinned")
    return problems


def dockerfile_bases(text: str) -> list[str]:
    """The external images a Dockerfile's FROM lines use, with ARG defaults substituted."""
    args = dict(re.findall(r"^ARG\s+(\w+)=(\S+)", text, re.MULTILINE))
    stages = set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, re.MULTILINE | re.IGNORECASE))

    def substitute(match: re.Match[str]) -> str:
        return str(args.get(match.group(1) or match.group(2), match.group(0)))

    bases = [
        re.sub(r"\$\{(\w+)\}|\$(\w+)", substitute, raw) for raw in re.findall(r"^FROM\s+(\S+)", text, re.MULTILINE)
    ]
    return [base for base in bases if base not in stages]


def dockerfile_problems(compose: Compose) -> list[str]:
    """Every build's Dockerfile exists and bases its stages on pinned images."""
    problems = []
    for name, service in services(compose).items():
        build = service.get("build")
        if build is None:
            continue
        context = ROOT / (build if isinstance(build, str) else build.get("context", "."))
        dockerfile = context / ("Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile"))
        if not dockerfile.is_file():
            problems.append(f"{name}: {dockerfile} does not exist")
            continue
        bases = {f"FROM {base}": {"image": base} for base in dockerfile_bases(dockerfile.read_text())}
        problems += [f"{name} ({dockerfile.name}): {p}" for p in image_problems({"services": bases})]
    return problems


def doc_service_names(markdown: str) -> list[str]:
    """The first column of the table whose header starts with `| Service |`."""
    names: list[str] = []
    in_table = False
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else None
        if cells is None:
            if in_table:
                break
            continue
        if not in_table:
            in_table = cells[0] == "Service"
        elif not set(cells[0]) <= set("-: "):
            names.append(cells[0].strip("`"))
    return names


def doc_problems(compose: Compose, markdown: str) -> list[str]:
    documented, defined = doc_service_names(markdown), set(services(compose))
    problems = [f"documented service {n!r} is not in docker-compose.yml" for n in documented if n not in defined]
    problems += [f"service {n!r} is missing from the service table" for n in sorted(defined - set(documented))]
    if len(documented) != len(set(documented)):
        problems.append("the service table names a service twice")
    return problems


def depends_on_problems(compose: Compose) -> list[str]:
    problems = []
    defined = services(compose)
    for name, service in defined.items():
        for target, condition in depends_on(service).items():
            if target not in defined:
                problems.append(f"{name}: depends_on {target!r}, which is not a service")
            elif condition not in DEPENDS_ON_CONDITIONS:
                problems.append(f"{name}: depends_on {target!r} with unknown condition {condition!r}")
            elif condition == "service_healthy" and "healthcheck" not in defined[target]:
                problems.append(f"{name}: waits for {target!r} to be healthy, but it has no healthcheck")
    return problems


def env_name_problems(compose: Compose) -> list[str]:
    """Every LAKECLEANER_* / AWS_* name set anywhere is one lakecleaner reads."""
    problems = []
    sections = {f"services.{n}": environment(s) for n, s in services(compose).items()}
    sections |= {k: v for k, v in compose.items() if k.startswith("x-") and isinstance(v, dict)}
    for where, env in sections.items():
        names = set(env) | set(environment(env) if "environment" in env else {})
        for var in sorted(names):
            if var.startswith(LAKECLEANER_PREFIXES) and var not in ENVIRONMENT_VARIABLES:
                problems.append(f"{where}: {var} is not one of lakecleaner.config.ENVIRONMENT_VARIABLES")
    return problems


def port_problems(compose: Compose) -> list[str]:
    seen: dict[str, str] = {}
    problems = []
    for name, service in services(compose).items():
        for port in service.get("ports") or []:
            host = interpolate(port).rsplit(":", 1)[0]
            if host in seen:
                problems.append(f"{name}: host port {host} is also published by {seen[host]}")
            seen[host] = name
    return problems


def lakecleaner_services(compose: Compose) -> dict[str, dict[str, str]]:
    """Services that run lakecleaner code (those given LAKECLEANER_LAKE_URI), with their environment."""
    envs = {name: environment(s) for name, s in services(compose).items()}
    return {name: env for name, env in envs.items() if "LAKECLEANER_LAKE_URI" in env}


# --------------------------------------------------------------------------------------------
# The tests


def test_the_init_service_sets_airflow_up_for_the_dags_after_migrating() -> None:
    init = services(load_compose())["airflow-init"]
    script = " ".join(map(str, init["command"]))
    assert 0 <= script.index("airflow db migrate") < script.index("lakecleaner airflow setup")
    # issue 78: no fixed password; the login is made as `make airflow-ui` makes it
    assert "lakecleaner airflow login --file" in script
    assert environment(init)["AIRFLOW_ADMIN_PASSWORD"] == "${AIRFLOW_ADMIN_PASSWORD:-}"


def test_compose_file_parses_and_shares_airflow_settings_through_an_anchor() -> None:
    compose = load_compose()
    assert "x-airflow-common" in compose
    airflow = [n for n in services(compose) if n.startswith("airflow-")]
    assert set(airflow) == {
        "airflow-init",
        "airflow-api-server",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
    }
    for name in airflow:
        env = environment(services(compose)[name])
        assert env["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/airflow/dags", name
        mounts = services(compose)[name]["volumes"]
        assert "./dags:/opt/airflow/dags:ro" in mounts and "./config:/opt/lakecleaner/config:ro" in mounts, name
        assert "AIRFLOW__CORE__PLUGINS_FOLDER" not in env, name  # the plugin comes by its entry point
        assert services(compose)[name]["image"] == compose["x-airflow-common"]["image"], name


def test_images_are_pinned() -> None:
    assert image_problems(load_compose()) == []
    assert dockerfile_problems(load_compose()) == []


def test_dockerfile_bases_resolve_args_and_skip_stages() -> None:
    text = "ARG BASE=python:3.11-slim\nFROM ${BASE} AS build\nFROM build\nFROM $BASE\nFROM debian\n"
    assert dockerfile_bases(text) == ["python:3.11-slim", "python:3.11-slim", "debian"]


def test_image_check_catches_unpinned_images() -> None:
    bad = {"services": {"a": {"image": "minio/minio"}, "b": {"image": "postgres:latest"}, "c": {"command": "x"}}}
    assert len(image_problems(bad)) == 3
    assert image_problems({"services": {"d": {"image": "localhost:5000/tool"}}}) != []
    assert image_problems({"services": {"e": {"image": "localhost:5000/tool:1.2"}}}) == []


def test_documented_services_match_the_compose_file() -> None:
    compose, markdown = load_compose(), COMPOSE_DOC.read_text()
    assert len(doc_service_names(markdown)) >= 10
    assert doc_problems(compose, markdown) == []


def test_doc_check_catches_a_missing_or_unknown_service() -> None:
    compose = load_compose()
    markdown = COMPOSE_DOC.read_text()
    renamed = markdown.replace("| `spark-worker` |", "| `spark-slave` |")
    assert renamed != markdown
    assert sorted(doc_problems(compose, renamed)) == [
        "documented service 'spark-slave' is not in docker-compose.yml",
        "service 'spark-worker' is missing from the service table",
    ]


def test_depends_on_targets_exist() -> None:
    assert depends_on_problems(load_compose()) == []
    broken = copy.deepcopy(load_compose())
    services(broken)["airflow-scheduler"]["depends_on"]["redis"] = {"condition": "service_healthy"}
    assert depends_on_problems(broken) == ["airflow-scheduler: depends_on 'redis', which is not a service"]


def test_lakecleaner_environment_variable_names_are_known() -> None:
    compose = load_compose()
    assert env_name_problems(compose) == []
    names = {var for env in lakecleaner_services(compose).values() for var in env}
    assert {"LAKECLEANER_CONFIG", "LAKECLEANER_LAKE_URI", "LAKECLEANER_S3_ENDPOINT_URL"} <= names


@pytest.mark.parametrize("form", ["mapping", "list"])
def test_env_check_catches_an_unknown_name(form: str) -> None:
    broken = copy.deepcopy(load_compose())
    worker = services(broken)["spark-worker"]
    env = environment(worker) | {"LAKECLEANER_LAKE_URL": "s3://lake/x"}
    worker["environment"] = env if form == "mapping" else [f"{k}={v}" for k, v in env.items()]
    assert env_name_problems(broken) == [
        "services.spark-worker: LAKECLEANER_LAKE_URL is not one of lakecleaner.config.ENVIRONMENT_VARIABLES"
    ]


def test_every_lakecleaner_service_uses_the_same_lake() -> None:
    by_service = lakecleaner_services(load_compose())
    assert {"airflow-scheduler", "airflow-dag-processor", "spark-worker"} <= set(by_service)
    for name, env in by_service.items():
        assert env["LAKECLEANER_LAKE_URI"] == LAKE_URI, name
        assert env["LAKECLEANER_S3_ENDPOINT_URL"] == "http://minio:9000", name
        assert interpolate(env["AWS_ACCESS_KEY_ID"]) == interpolate(
            environment(services(load_compose())["minio"])["MINIO_ROOT_USER"]
        ), name


def test_host_ports_are_unique() -> None:
    assert port_problems(load_compose()) == []


def test_mounted_config_parses_under_the_compose_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    compose = load_compose()
    scheduler = services(compose)["airflow-scheduler"]
    env = {k: interpolate(v) for k, v in environment(scheduler).items()}
    for var in ENVIRONMENT_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    for var, value in env.items():
        if var in ENVIRONMENT_VARIABLES:
            monkeypatch.setenv(var, value)
    container_path = PurePosixPath(env[ENV_CONFIG_PATH])
    host_path = None
    for volume in scheduler.get("volumes") or []:
        source, target = str(volume).split(":")[:2]
        if source.startswith(".") and container_path.is_relative_to(target):
            host_path = ROOT / source / container_path.relative_to(target)
    assert host_path is not None, f"{container_path} is not inside a mounted project directory"
    config = parse_config(yaml.safe_load(host_path.read_text()), str(host_path))
    assert config.lake_uri == LAKE_URI
    assert config.storage.endpoint_url == "http://minio:9000"
    assert config.storage.access_key_id == env["AWS_ACCESS_KEY_ID"]
    assert config.topics, "the docker config declares example topics"
    connection = urlsplit(env[SPARK_CONN_VAR])
    assert connection.scheme == "spark-connect", "the DAGs' compact tasks are Spark Connect clients by default"
    assert config.spark.remote == f"sc://{connection.netloc}", "the CLI and the DAGs use the same Connect server"


def test_spark_connection_points_at_the_connect_server_on_the_spark_master() -> None:
    """The Airflow connection (conn type spark_connect, from the URI's scheme) names the
    spark-connect service and its port; that server runs on the standalone master, which the
    worker joins."""
    compose = load_compose()
    defined = services(compose)
    for name in ("airflow-scheduler", "airflow-api-server", "airflow-dag-processor", "airflow-triggerer"):
        assert SPARK_CONN_VAR in environment(defined[name]), name
    uri = urlsplit(interpolate(environment(defined["airflow-scheduler"])[SPARK_CONN_VAR]))
    assert uri.scheme.replace("-", "_") == "spark_connect"  # Airflow's reading of a URI's scheme
    assert uri.hostname in defined
    server = [str(part) for part in defined[uri.hostname]["command"]]
    assert server[:3] == ["lakecleaner", "connect-server", "start"] and "--foreground" in server
    assert server[server.index("--port") + 1] == str(uri.port)
    assert depends_on(defined["airflow-scheduler"])[uri.hostname] == "service_healthy"
    master = urlsplit(server[server.index("--master") + 1])
    master_command = defined[str(master.hostname)]["command"]
    assert "org.apache.spark.deploy.master.Master" in master_command
    assert str(master.port) == master_command[master_command.index("--port") + 1]
    assert f"spark://{master.hostname}:{master.port}" in defined["spark-worker"]["command"]


def test_minio_init_creates_the_lake_bucket() -> None:
    defined = services(load_compose())
    bucket = urlsplit(LAKE_URI).netloc
    script = " ".join(map(str, defined["minio-init"]["command"]))
    assert f"mc mb --ignore-existing lake/{bucket}" in script
    assert depends_on(defined["minio-init"]) == {"minio": "service_healthy"}

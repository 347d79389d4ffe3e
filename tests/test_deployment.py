"""The production deployment files: docker-compose.yml, .env.example, the Dockerfile.

Nothing here starts a container (there is no Docker engine in CI): these tests read the files
and check them against the code, so that a setting renamed in app/settings.py, a variable
missing from .env.example or an image left on `latest` fails here and not in production.
"""

import ast
import importlib.metadata
import os
import re
import sys
import tomllib
import urllib.parse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import coredis
import pytest
import yaml
from fastapi import HTTPException
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from app.api.rate_limits import TurnLimits
from app.settings import ApiSettings, Settings, environment_variables
from tests.conftest import redis_server

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
DOCKERFILE = ROOT / "Dockerfile"

# What the stack must run. `telegram-worker` is the polling worker (compose profile `polling`).
REQUIRED_SERVICES = {
    "api",
    "migrate",
    "telegram-worker",
    "postgres",
    "qdrant",
    "searxng",
    "langfuse-web",
    "langfuse-worker",
    "langfuse-postgres",
    "clickhouse",
    "redis",
    "minio",
}
# Services built from our Dockerfile.
APP_SERVICES = {"api", "migrate", "telegram-worker"}
# Settings production cannot do without, and what their value must contain: where they
# point inside the stack, or the .env variable of the same name they are read from.
PRODUCTION_SETTINGS = {
    "SUPPORTBOT_DB__URL": "@postgres:5432/",
    "SUPPORTBOT_KNOWLEDGE__QDRANT_URL": "http://qdrant:6333",
    "SUPPORTBOT_LANGFUSE__BASE_URL": "http://langfuse-web:3000",
    "SUPPORTBOT_LANGFUSE__PUBLIC_KEY": "${SUPPORTBOT_LANGFUSE__PUBLIC_KEY",
    "SUPPORTBOT_LANGFUSE__SECRET_KEY": "${SUPPORTBOT_LANGFUSE__SECRET_KEY",
    "SUPPORTBOT_EXPERT__SEARXNG_URL": "http://searxng:8080",
}
# Settings the compose file passes before app/settings.py has them. The `expert` group comes
# with the expert subagent (web search through SearXNG). Once a group exists in Settings its
# fields are checked like any other, so a typo here cannot hide for long.
EXPECTED_FUTURE_SETTINGS = {"SUPPORTBOT_EXPERT__SEARXNG_URL"}
HEALTH_CHECKED = {"postgres", "qdrant", "api"}
FIRST_PARTY = {"app", "bot", "knowledge", "evals", "migrations"}
# The code the service runs (evals/ is installed too but is a developer tool).
SERVED_PACKAGES = ("app", "bot", "knowledge")

_VARIABLE = re.compile(
    r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}"
    r"|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
)
_ENV_LINE = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>.*)$")


def _compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict)
    return data


def _services() -> dict[str, dict[str, Any]]:
    services = _compose()["services"]
    assert isinstance(services, dict)
    return services


def _environment(service: Mapping[str, Any]) -> dict[str, str]:
    environment = service.get("environment") or {}
    if isinstance(environment, list):  # the `- KEY=value` form
        return dict(item.split("=", 1) for item in environment)
    return {str(key): str(value) for key, value in environment.items()}


def _compose_variables() -> set[str]:
    """Variables docker-compose.yml interpolates (`$$` is an escaped, literal `$`)."""
    names = set()
    for match in _VARIABLE.finditer(COMPOSE_FILE.read_text()):
        name = match.group("name") or match.group("bare")
        if name:
            names.add(name)
    return names


def _env_example() -> dict[str, str]:
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        match = _ENV_LINE.match(line.strip())
        if match:
            values[match.group("name")] = match.group("value")
    return values


def _interpolate(value: str, variables: Mapping[str, str]) -> str:
    """Compose's interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error}."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group("name") or match.group("bare")
        op, arg = match.group("op"), match.group("arg") or ""
        present = name in variables
        current = variables.get(name, "")
        if op == ":-":
            return current if current else arg
        if op == "-":
            return current if present else arg
        if op in (":?", "?") and (not present or (op == ":?" and not current)):
            raise ValueError(f"compose would refuse to start: {name}: {arg}")
        return current

    return _VARIABLE.sub(replace, value)


def _settings_groups() -> set[str]:
    return {name.upper() for name in Settings.model_fields}


def _image_is_pinned(image: str) -> bool:
    reference = image.split("@", 1)[0]
    name, _, tag = reference.rpartition(":")
    if not name or "/" in tag:  # no tag at all (a `:` belongs to a registry port)
        return False
    return tag != "latest" and "$" not in tag and bool(re.search(r"\d", tag))


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined: list[str] = []
    buffer = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not buffer and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            buffer += line[:-1] + " "
            continue
        joined.append(buffer + line)
        buffer = ""
    instructions = []
    for line in joined:
        keyword, _, arguments = line.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    return instructions


# ---------------------------------------------------------------- docker-compose.yml


def test_compose_file_parses_and_has_every_service() -> None:
    services = _services()
    assert set(services) >= REQUIRED_SERVICES, REQUIRED_SERVICES - set(services)
    for name, service in services.items():
        assert "image" in service or "build" in service, name


def test_app_services_are_built_from_the_dockerfile() -> None:
    services = _services()
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    for name in APP_SERVICES:
        build = services[name]["build"]
        build = {"context": build} if isinstance(build, str) else build
        assert build["context"] == ".", name
        assert build.get("dockerfile", "Dockerfile") == "Dockerfile", name
        # the tag of the built image follows the project version
        assert services[name]["image"] == f"supportbot:{version}", name


def test_every_image_is_pinned_to_a_version() -> None:
    for name, service in _services().items():
        if "build" in service:
            continue
        image = service["image"]
        assert _image_is_pinned(image), f"{name}: {image} has no explicit version tag"


def test_image_pin_check_rejects_floating_tags() -> None:
    assert _image_is_pinned("postgres:17.10")
    assert _image_is_pinned("localhost:5000/qdrant/qdrant:v1.20.0")
    for floating in ("postgres", "postgres:latest", "localhost:5000/postgres", "redis:${TAG}"):
        assert not _image_is_pinned(floating), floating


def test_supportbot_variables_exist_in_settings() -> None:
    """The app ignores unknown SUPPORTBOT_* variables (extra="ignore"): a misspelt one in the
    compose file would silently do nothing."""
    known = environment_variables()
    groups = _settings_groups()
    for name in APP_SERVICES:
        for variable in _environment(_services()[name]):
            if not variable.startswith("SUPPORTBOT_"):
                continue
            if variable in known:
                continue
            group = variable.removeprefix("SUPPORTBOT_").split("__", 1)[0]
            assert variable in EXPECTED_FUTURE_SETTINGS and group not in groups, (
                f"{name}: {variable} is not a setting of app.settings.Settings"
            )


def test_settings_walk_finds_nested_and_top_level_fields() -> None:
    known = environment_variables()
    for name in ("SUPPORTBOT_DB__URL", "SUPPORTBOT_LANGFUSE__SECRET_KEY", "SUPPORTBOT_ADMIN_TOKEN"):
        assert name in known, name
    assert "SUPPORTBOT_DB" not in known


@pytest.mark.parametrize("service", sorted(APP_SERVICES))
def test_app_services_get_the_production_settings(service: str) -> None:
    environment = _environment(_services()[service])
    for variable, expected in PRODUCTION_SETTINGS.items():
        assert variable in environment, f"{service} lacks {variable}"
        assert expected in environment[variable], f"{service}: {variable}"


def test_env_example_lists_exactly_the_compose_variables() -> None:
    in_compose = _compose_variables()
    in_example = set(_env_example())
    assert not in_compose - in_example, f"missing from .env.example: {in_compose - in_example}"
    assert not in_example - in_compose, f"unused by docker-compose.yml: {in_example - in_compose}"


def test_every_env_example_variable_is_commented() -> None:
    """Each variable, or block of variables, comes right after a comment saying what it is."""
    commented = False
    for line in ENV_EXAMPLE.read_text().splitlines():
        stripped = line.strip()
        if not stripped:
            commented = False
        elif stripped.startswith("#"):
            commented = True
        else:
            match = _ENV_LINE.match(stripped)
            assert match, f"not a VAR=value line: {line!r}"
            assert commented, f"{match.group('name')} has no comment"


def test_health_checks() -> None:
    services = _services()
    for name in HEALTH_CHECKED:
        test = services[name].get("healthcheck", {}).get("test")
        assert test, f"{name} has no health check"
    # whatever another service waits for as healthy must have a health check
    for name, service in services.items():
        depends_on = service.get("depends_on") or {}
        if isinstance(depends_on, list):
            continue
        for dependency, condition in depends_on.items():
            if condition.get("condition") == "service_healthy":
                assert services[dependency].get("healthcheck"), f"{name} waits on {dependency}"


def test_migrations_run_once_before_the_api() -> None:
    services = _services()
    assert services["migrate"]["command"] == ["supportbot", "db", "upgrade"]
    assert services["migrate"].get("restart", "no") == "no"
    for name in ("api", "telegram-worker"):
        condition = services[name]["depends_on"]["migrate"]["condition"]
        assert condition == "service_completed_successfully", name
    assert "command" not in services["api"]  # the image's default: supportbot serve


def test_polling_worker_is_behind_its_profile() -> None:
    worker = _services()["telegram-worker"]
    assert worker["profiles"] == ["polling"]
    assert worker["command"] == ["supportbot", "telegram", "run"]
    assert _environment(worker)["SUPPORTBOT_TELEGRAM__MODE"] == "polling"


def test_named_volumes_are_declared_and_bind_mounts_exist() -> None:
    compose = _compose()
    declared = set(compose.get("volumes") or {})
    used = set()
    for name, service in compose["services"].items():
        for volume in service.get("volumes") or []:
            source = volume.split(":", 1)[0] if isinstance(volume, str) else volume["source"]
            if source.startswith((".", "/", "$")):
                if not source.startswith("$"):
                    assert (ROOT / source).exists(), f"{name} mounts missing {source}"
                continue
            assert source in declared, f"{name} uses undeclared volume {source}"
            used.add(source)
    assert used == declared, f"declared but unused: {declared - used}"


def test_searxng_answers_json() -> None:
    settings = yaml.safe_load((ROOT / "deploy" / "searxng" / "settings.yml").read_text())
    assert "json" in settings["search"]["formats"]
    assert settings["use_default_settings"] is True


def _with_secrets() -> dict[str, str]:
    """.env.example's values, each REQUIRED secret (empty there) a hex string of its own."""
    return {
        name: value or f"{n:02x}" * 32 for n, (name, value) in enumerate(_env_example().items())
    }


def test_settings_load_from_the_compose_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Interpolate the app services' environment with .env.example's values (secrets filled
    in) and load Settings from it: blank optional values must not break validation."""
    variables = _with_secrets()
    for optional in (
        "SUPPORTBOT_LANGFUSE__PUBLIC_KEY",
        "SUPPORTBOT_LANGFUSE__SECRET_KEY",
        "SUPPORTBOT_LLM__BASE_URL",
        "SUPPORTBOT_LLM__API_KEY",
        "SUPPORTBOT_TELEGRAM__TOKEN",
        "SUPPORTBOT_TELEGRAM__WEBHOOK_URL",
        "SUPPORTBOT_TELEGRAM__WEBHOOK_SECRET",
        "SUPPORTBOT_ADMIN_TOKEN",
    ):
        variables[optional] = ""
    for name in [name for name in os.environ if name.startswith("SUPPORTBOT_")]:
        monkeypatch.delenv(name)
    for service in sorted(APP_SERVICES):
        environment = {
            key: _interpolate(value, variables)
            for key, value in _environment(_services()[service]).items()
        }
        for key, value in environment.items():
            monkeypatch.setenv(key, value)
        settings = Settings(_env_file=None)
        assert settings.db.url == (
            f"postgresql://supportbot:{variables['POSTGRES_PASSWORD']}@postgres:5432/supportbot"
        ), service
        assert settings.knowledge.qdrant_url == "http://qdrant:6333"
        assert settings.langfuse.base_url == "http://langfuse-web:3000"
        assert not settings.langfuse.enabled  # no keys yet: tracing off, not broken
        assert settings.llm.model == "offline"
        assert settings.telegram.staff_chat_ids == []
        assert settings.widget.staff_tokens == {}
        expected_mode = "polling" if service == "telegram-worker" else "webhook"
        assert settings.telegram.mode == expected_mode


async def test_the_api_replicas_share_their_limits_through_redis(tmp_path: Path) -> None:
    """The API counts in the stack's Redis as a user of its own (its own password, its own
    keys, a database Langfuse does not use), and that user, on a server started with the
    redis service's own arguments, takes and refuses turns."""
    services, variables = _services(), _with_secrets()
    api = _environment(services["api"])
    url = urllib.parse.urlsplit(
        _interpolate(api["SUPPORTBOT_API__RATE_LIMIT_STORAGE_URL"], variables)
    )
    # Langfuse's REDIS_HOST/REDIS_PORT/REDIS_AUTH name no database: it uses 0.
    assert (url.scheme, url.hostname, url.port, url.path) == ("async+redis", "redis", 6379, "/1")
    assert url.username == "supportbot"
    assert url.password == variables["SUPPORTBOT_REDIS_PASSWORD"] != variables["REDIS_AUTH"]
    assert services["api"]["depends_on"]["redis"] == {"condition": "service_healthy"}

    program, *arguments = [_interpolate(part, variables) for part in services["redis"]["command"]]
    assert program == "redis-server"
    with redis_server(tmp_path, *arguments) as port:
        local = url._replace(netloc=f"{url.username}:{url.password}@127.0.0.1:{port}").geturl()
        settings = ApiSettings(caller_rate="1/hour", rate_limit_storage_url=local)
        limits = TurnLimits(settings, metrics_enabled=False)
        await limits.take("api:a", "backend:shop")
        with pytest.raises(HTTPException, match="too many turns for this caller"):
            await limits.take("api:b", "backend:shop")
        with pytest.raises(coredis.exceptions.AuthorizationError, match="no permissions"):
            await coredis.Redis.from_url(local.removeprefix("async+")).get("bull:langfuse")


def test_compose_refuses_to_start_without_secrets() -> None:
    environment = _environment(_services()["migrate"])
    with pytest.raises(ValueError, match="POSTGRES_PASSWORD"):
        _interpolate(environment["SUPPORTBOT_DB__URL"], _env_example())


# ---------------------------------------------------------------- Dockerfile


def test_dockerfile_base_images_are_pinned() -> None:
    bases = [args.split()[0] for keyword, args in _dockerfile_instructions() if keyword == "FROM"]
    assert bases
    for base in bases:
        assert _image_is_pinned(base), base
        assert base.startswith("python:3.11") and "slim" in base, base


def test_dockerfile_installs_the_project_without_dev_extras() -> None:
    runs = [args for keyword, args in _dockerfile_instructions() if keyword == "RUN"]
    installs = [run for run in runs if "pip install" in run]
    assert any(re.search(r"pip install( --\S+)* \.(\s|$|&)", run) for run in installs), installs
    for run in installs:
        assert "[dev]" not in run and " -e " not in run, run


def test_dockerfile_runs_as_a_non_root_user() -> None:
    users = [args for keyword, args in _dockerfile_instructions() if keyword == "USER"]
    assert users, "no USER: the container would run as root"
    user = users[-1].split(":", 1)[0]
    assert user not in ("root", "0"), user


def test_dockerfile_serves_the_api_by_default() -> None:
    commands = [args for keyword, args in _dockerfile_instructions() if keyword == "CMD"]
    assert commands[-1] == '["supportbot", "serve", "--host", "0.0.0.0", "--port", "8000"]'


def test_the_image_serves_with_the_embedder_graph_its_build_made() -> None:
    """A new container's first turn would otherwise wait for the graph to be built."""
    instructions = _dockerfile_instructions()
    built = [args for keyword, args in instructions if keyword == "RUN" and "get_embedder" in args]
    (folder,) = re.findall(r"Path\('([^']+)'\)", built[0])
    environment = " ".join(args for keyword, args in instructions if keyword == "ENV")
    assert f"SUPPORTBOT_KNOWLEDGE__MODEL_CACHE_DIR={folder}" in environment
    copies = [args for keyword, args in instructions if keyword == "COPY"]
    assert any(
        "--from=build" in copy
        and "--chown=supportbot" in copy
        and copy.endswith(f"{folder} {folder}")
        for copy in copies
    ), copies


def test_dockerignore_keeps_secrets_out_of_the_image() -> None:
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    for pattern in (".env", ".venv", ".git"):
        assert pattern in ignored, pattern


# ---------------------------------------------------------------- `pip install .`


def _declared_closure() -> set[str]:
    """The distributions `pip install .` brings: [project.dependencies] and theirs."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pending = [Requirement(spec) for spec in pyproject["project"]["dependencies"]]
    seen: set[str] = set()
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(requirement.name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        extras = {"", *requirement.extras}
        for spec in requires:
            child = Requirement(spec)
            if child.marker is None or any(
                child.marker.evaluate({"extra": extra}) for extra in extras
            ):
                pending.append(child)
    return seen


def _is_optional(handlers: list[ast.ExceptHandler]) -> bool:
    for handler in handlers:
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(
            isinstance(name, ast.Name) and name.id in ("ImportError", "ModuleNotFoundError")
            for name in names
        ):
            return True
    return False


def _third_party_imports(tree: ast.AST) -> Iterator[str]:
    """Top-level modules imported unconditionally (not in try/except ImportError, not under
    `if TYPE_CHECKING`)."""

    def visit(node: ast.AST) -> Iterator[str]:
        if isinstance(node, ast.Try) and _is_optional(node.handlers):
            for statement in node.orelse + node.finalbody:
                yield from visit(statement)
            return
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".", 1)[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".", 1)[0]
        for child in ast.iter_child_nodes(node):
            yield from visit(child)

    for module in visit(tree):
        if module not in sys.stdlib_module_names and module not in FIRST_PARTY:
            yield module


def test_the_installed_project_declares_what_it_imports() -> None:
    """The image has only what pyproject.toml declares (the dev venv may have more): every
    third-party module the service imports must come from a declared dependency."""
    closure = _declared_closure()
    providers = importlib.metadata.packages_distributions()
    undeclared: dict[str, set[str]] = {}
    for package in SERVED_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            for module in _third_party_imports(tree):
                distributions = {canonicalize_name(d) for d in providers.get(module, [])}
                if not distributions & closure:
                    where = str(path.relative_to(ROOT))
                    undeclared.setdefault(module, set()).add(where)
    assert not undeclared, f"imported but not in [project.dependencies]: {undeclared}"

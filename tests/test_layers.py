"""The layers of `app/` point one way, read from the code's own imports (docs/architecture.md draws them).

A module may import its own package and any package of a lower layer. Routers are HTTP only: besides the
infrastructure they import their own package and `app.deps`. Nothing in `spark_jobs/` imports `app`: the report
ships to a Spark cluster without the web service; nor does the SDK (`sdk/python`), which installs without it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_MODULE_LINES = 350

# Lowest first. Infrastructure knows no domain; a domain knows the infrastructure and the domains below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "config",
        "db",
        "errors",
        "queues",
        "ttl_cache",
        "http",
        "metrics",
        "broadcast",
        "embedded_redis",
        "wildcards",
        "schemas",
        "shutdown",
        "migrate",
        "repeated_failures",
        "custom_methods",
    ),
    ("audit", "events"),
    ("auth",),
    ("policy",),
    ("connections", "reports", "resource_groups"),
    ("servers",),
    ("operator",),
    ("routing",),
    ("sweeper",),
    ("work",),
    ("dead_letters",),
    # The elected scheduler's duties orchestrate every domain over the assembled process state.
    ("scheduler", "state"),
    # Composition: the app, its dependencies, the command line, the OpenAPI document, the examples.
    ("deps", "health", "main", "cli", "openapi", "models", "examples"),
)
INFRASTRUCTURE = frozenset(LAYERS[0])
LAYER_OF = {package: level for level, packages in enumerate(LAYERS) for package in packages}


def _parsed(path: Path) -> ast.Module:
    """`path`'s syntax tree. CPython 3.11 counts the AST constructor's depth per interpreter, not per thread, so a
    parse racing another thread's (a traceback formatted elsewhere parses its line) can fail with a spurious
    SystemError (python/cpython#106905): it is parsed again."""
    for _ in range(2):
        try:
            return ast.parse(path.read_text(), filename=str(path))
        except SystemError:
            continue
    return ast.parse(path.read_text(), filename=str(path))


def _imports(path: Path) -> list[str]:
    tree = _parsed(path)
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
    return names


def _package(module: str) -> str | None:
    """'app.work.select' -> 'work'; None outside `app`."""
    parts = module.split(".")
    if parts[0] != "app" or len(parts) < 2:
        return None
    return parts[1]


def _app_modules() -> list[Path]:
    return sorted(p for p in (ROOT / "app").rglob("*.py") if p.name != "__init__.py" or p.parent != ROOT / "app")


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def test_every_package_has_a_layer() -> None:
    packages = {p.stem if p.is_file() else p.name for p in (ROOT / "app").iterdir() if not p.name.startswith("__")}
    assert sorted(packages - set(LAYER_OF)) == []


def test_imports_point_down() -> None:
    wrong: list[str] = []
    for path in _app_modules():
        module = _module_name(path)
        own = _package(module)
        assert own is not None
        for imported in _imports(path):
            target = _package(imported)
            if target is None or target == own:
                continue
            if path.name == "router.py":
                if target not in INFRASTRUCTURE and target != "deps":
                    wrong.append(f"{module} -> {imported} (a router imports its own package, deps and infrastructure)")
            elif LAYER_OF.get(target, len(LAYERS)) > LAYER_OF[own]:
                wrong.append(f"{module} -> {imported}")
    assert wrong == []


def test_spark_jobs_import_no_app() -> None:
    wrong = [
        f"{_module_name(path)} -> {imported}"
        for path in sorted((ROOT / "spark_jobs").rglob("*.py"))
        for imported in _imports(path)
        if imported == "app" or imported.startswith("app.")
    ]
    assert wrong == []


def test_the_sdk_imports_only_itself_httpx_and_the_standard_library() -> None:
    wrong = [
        f"{path.relative_to(ROOT)} -> {imported}"
        for path in sorted((ROOT / "sdk" / "python" / "wlm_client").rglob("*.py"))
        for imported in _imports(path)
        if imported.split(".")[0] not in {"wlm_client", "httpx", *sys.stdlib_module_names}
    ]
    assert wrong == []


def test_modules_stay_small() -> None:
    too_long = {_module_name(path): lines for path in _app_modules() if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert too_long == {}

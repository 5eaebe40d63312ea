"""The layers of `app/` point one way, read from the code's own imports (docs/architecture.md draws them, and is
read here so that the drawing cannot drift from the rule).

A module may import its own package and any package of a lower layer. Routers are HTTP only: besides the
infrastructure they import their own package and `app.deps`. Nothing in `spark_jobs/` imports `app`: the report
ships to a Spark cluster without the web service; nor does the SDK (`sdk/python`), which installs without it. Every
call of a queue script is built by its specification (app/queues/script_specs.py). The queue store holds its parts
as attributes: no class is built of more than three of its classes.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from app.queues import script_specs

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MAX_MODULE_LINES = 500

# Lowest first. Infrastructure knows no domain; a domain knows the infrastructure and the domains below it.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "config",
        "db",
        "errors",
        "queues",
        "redis",
        "processes",
        "shared",
        "web",
        "migrate",
    ),
    ("audit", "events"),
    ("auth",),
    ("policy",),
    ("connections", "reports", "resource_groups", "what_if"),
    ("servers",),
    ("operator",),
    ("routing",),
    # The application environment's API, over the domains that hold its parts (operator, servers, routing, policy).
    ("sweeper", "environments"),
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


def test_the_redis_plumbing_knows_no_domain() -> None:
    """app/redis/ (connections, scripts, pub/sub, the embedded server) imports of app only itself and the error
    hierarchy (which maps an outage to 503) and the child processes' helper."""
    allowed = {"redis", "errors", "processes"}
    wrong = [
        f"{_module_name(path)} -> {imported}"
        for path in sorted((ROOT / "app" / "redis").rglob("*.py"))
        for imported in _imports(path)
        if _package(imported) not in {None, *allowed}
    ]
    assert wrong == []


def test_other_domains_own_their_redis_records_beside_the_queue_store_not_in_it() -> None:
    """A domain's Redis records are a class of its own over the shared RedisContext: nothing outside app/queues
    extends the queue store, its base or its parts', and the store is made of the queues' own parts only."""
    wrong: list[str] = []
    for path in _app_modules():
        module = _module_name(path)
        for node in ast.walk(_parsed(path)):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(base) for base in node.bases}
                if not module.startswith("app.queues.") and bases & {"StoreBase", "StorePart", "QueueStore"}:
                    wrong.append(f"{module}.{node.name}")
    store = _parsed(ROOT / "app" / "queues" / "store.py")
    imported = [n.module for n in ast.walk(store) if isinstance(n, ast.ImportFrom) and n.module and n.module != "__future__"]
    foreign = [name for name in imported if not name.startswith("app.queues.") and name.split(".")[0] not in sys.stdlib_module_names]
    assert wrong == [] and foreign == [], (wrong, foreign)


# How many of the queue store's classes one class of app/ may be built of, its bases' bases counted.
MAX_STORE_BASES = 3


def _store_bases() -> dict[str, list[str]]:
    """Per class of app/ (by name), the classes of the queue store it is built of: StoreBase, StorePart and what
    extends them, among its bases and their bases."""
    bases: dict[str, set[str]] = {}
    for path in _app_modules():
        for node in ast.walk(_parsed(path)):
            if isinstance(node, ast.ClassDef):
                bases.setdefault(node.name, set()).update(ast.unparse(base).rsplit(".", 1)[-1] for base in node.bases)

    def ancestors(name: str) -> set[str]:
        found: set[str] = set()
        todo = list(bases.get(name, ()))
        while todo:
            if (base := todo.pop()) not in found:
                found.add(base)
                todo += bases.get(base, ())
        return found

    roots = {"StoreBase", "StorePart"}
    store = {name for name in bases if name in roots or ancestors(name) & roots}
    return {name: sorted(ancestors(name) & store) for name in bases}


def test_no_class_composes_more_than_three_bases_of_the_store() -> None:
    """The queue store holds its parts as attributes (app/queues/store.py), each over its one base: a class built of
    the store's mixins, calling each other through `self`, is what the store was before, and is refused."""
    composed = {name: found for name, found in _store_bases().items() if len(found) > MAX_STORE_BASES}
    assert composed == {}


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
    modules = [*(ROOT / "app").rglob("*.py"), *(ROOT / "app").rglob("*.lua"), *(ROOT / "spark_jobs").rglob("*.py")]
    too_long = {str(path.relative_to(ROOT)): lines for path in modules if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert too_long == {}


def _drawn_layers() -> dict[str, set[int]]:
    """Per package named in docs/architecture.md's drawing of the layers, the numbers of the rows it is drawn in (a
    row without a number goes on the one above it)."""
    drawing = ARCHITECTURE.read_text().split("## Layers", 1)[1].split("```", 2)[1]
    drawn: dict[str, set[int]] = {}
    level = None
    for line in drawing.splitlines():
        if not (match := re.fullmatch(r"\s*│\s*(\d*)\s*│(.*)│", line)):
            continue
        level = int(match[1]) if match[1] else level
        for name in re.findall(r"(?<![\w/])([a-z_]+)/?(?![\w/])", match[2]):
            if name in LAYER_OF and level is not None:
                drawn.setdefault(name, set()).add(level)
    return drawn


def test_the_architecture_drawing_puts_each_package_in_its_layer() -> None:
    assert _drawn_layers() == {package: {level} for package, level in LAYER_OF.items()}


def test_the_architecture_table_lists_every_package_from_the_bottom_layer_up() -> None:
    table = ARCHITECTURE.read_text().split("| package | modules | pure modules |", 1)[1].split("\n\n", 1)[0]
    listed = re.findall(r"^\| `(\w+)/` \|", table, re.MULTILINE)
    assert sorted(listed) == sorted(p.name for p in (ROOT / "app").iterdir() if p.is_dir() and not p.name.startswith("__"))
    levels = [LAYER_OF[package] for package in listed]
    assert levels == sorted(levels), list(zip(listed, levels, strict=True))


def test_every_script_call_is_built_from_its_specification() -> None:
    """A script's call (`ScriptCall`) is made by its ScriptSpec only, never by hand or by a script's name, and every
    script's specification is used."""
    by_hand: list[str] = []
    used: set[str] = set()
    for path in _app_modules():
        module = _module_name(path)
        for node in ast.walk(_parsed(path)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "ScriptCall":
                if module != "app.redis.script_spec":
                    by_hand.append(f"{module}:{node.lineno}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and "scripts" in ast.unparse(node.func.value):
                if node.args and isinstance(node.args[0], ast.Constant):
                    by_hand.append(f"{module}:{node.lineno}")
            elif isinstance(node, ast.Attribute) and module != "app.queues.script_specs":
                used.add(node.attr)
            elif isinstance(node, ast.alias) and module != "app.queues.script_specs":
                used.add(node.name)
    assert by_hand == []
    names = {name for name, value in vars(script_specs).items() if value in script_specs.SPECS}
    assert sorted(names - used) == []


# A request's JSON keys and states, which only its definition (and the Lua scripts) may name.
REQUEST_KEYS = frozenset({"sc", "rc", "dep", "qm", "ae"})
REQUEST_STATES = frozenset({"q", "s", "b"})


def _named_keys(node: ast.AST) -> list[ast.expr]:
    """The expressions `node` uses as a mapping's keys: a subscript, a dict's keys, a get's, a keyword's name."""
    if isinstance(node, ast.Subscript):
        return [node.slice]
    if isinstance(node, ast.Dict):
        return [key for key in node.keys if key is not None]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop", "setdefault"):
        return node.args[:1]
    if isinstance(node, ast.keyword) and node.arg is not None:
        return [ast.Constant(node.arg)]
    return []


def _compared(node: ast.AST) -> list[ast.expr]:
    """The constants `node` compares with, within a tuple, list or set too."""
    if not isinstance(node, ast.Compare):
        return []
    operands = [node.left, *node.comparators]
    return [e for o in operands for e in (o.elts if isinstance(o, ast.Tuple | ast.List | ast.Set) else [o])]


def test_a_requests_keys_are_named_by_its_definition_only() -> None:
    """The two-letter keys of a request's metadata and its states are app/queues/request_meta.py's: every other
    module reads and writes a request by its typed fields."""
    named: list[str] = []
    for path in _app_modules():
        module = _module_name(path)
        if module == "app.queues.request_meta":
            continue
        for node in ast.walk(_parsed(path)):
            for key in _named_keys(node):
                if isinstance(key, ast.Constant) and key.value in REQUEST_KEYS:
                    named.append(f"{module}:{getattr(node, 'lineno', '?')} {key.value!r}")
            for value in _compared(node):
                if isinstance(value, ast.Constant) and value.value in REQUEST_STATES:
                    named.append(f"{module}:{node.lineno} {value.value!r}")
    assert named == []

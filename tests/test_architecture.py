"""The house's rooms and who may import whom (docs/design-notes.md, "A map of the house").

Each folder of ``src/memfs`` has one job and an import rule, checked here on the source
(the import statements, so a lazy import inside a function counts too):

- ``domain``: pure rules; imports nothing of memfs but ``errors``.
- ``canonical``: the truth (layout, durable writes, backends); may import ``domain``.
- ``derived``: rebuildable state (index, working trees); may import ``canonical`` and
  ``domain``.
- ``core``: the use cases; may import all three.
- edges (``http``, ``console``, ``cli``, ``mcp``, and the ``wire`` shapes they render):
  import ``core``, ``domain``, ``errors``, ``config`` and ``wire``, never ``derived`` or
  ``canonical``. ``http`` mounts the console and serves the ``mcp`` tool table, as does
  ``cli``; ``mcp`` and ``cli`` also reach a server through the ``client``.
- ``client`` and ``integrations``: talk HTTP; import no server code at all.
- ``testing``: the shipped contract suites; may import every layer but the edges.

A new top-level module or folder must be placed in a room on purpose.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "memfs"

# Top-level modules every room may use: the error tree and the package version.
SHARED = {"memfs", "memfs.errors"}
EDGE_MAY = {"memfs.core", "memfs.domain", "memfs.config", "memfs.wire"}
RULES: dict[str, set[str]] = {
    "domain": {"memfs.domain"},
    "canonical": {"memfs.domain", "memfs.canonical"},
    "derived": {"memfs.domain", "memfs.canonical", "memfs.derived"},
    "core": {"memfs.domain", "memfs.canonical", "memfs.derived", "memfs.core", "memfs.config"},
    # http/app.py mounts the console, and MCP at /mcp.
    "http": EDGE_MAY | {"memfs.http", "memfs.console", "memfs.mcp"},
    "console": EDGE_MAY | {"memfs.console"},
    # The CLI pages inspect with the client and runs `memfs mcp` on stdio.
    "cli": EDGE_MAY | {"memfs.cli", "memfs.client", "memfs.mcp"},
    # MCP's tool table; `memfs mcp --url` answers it through the client.
    "mcp": EDGE_MAY | {"memfs.mcp", "memfs.client"},
    "wire": EDGE_MAY,
    "config": set(),
    "errors": set(),
    "__init__": set(),
    # The client is a library of its own: it speaks HTTP and shares only pure rules.
    "client": {"memfs.client", "memfs.domain"},
    "integrations": {"memfs.client", "memfs.integrations"},
    # Contract suites a new Backend or Index subclasses; they drive the real layers.
    "testing": {"memfs.domain", "memfs.canonical", "memfs.derived", "memfs.core", "memfs.testing"},
}

# Imports a room's rule forbids but that wait for a core function: (module, imported),
# each with its reason. Empty today; an entry added is a debt, and the list only shrinks.
ALLOWED_EXCEPTIONS: set[tuple[str, str]] = set()

WEB_STACK = ("starlette", "uvicorn", "httpx", "anthropic", "mcp", "mcp_types")
WEB_ROOMS = {"http", "console", "cli", "client", "integrations", "mcp"}


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            package = SRC.parent.joinpath(*node.module.split("."))
            if node.module.startswith("memfs") and package.is_dir():
                # ``from memfs.core import store`` imports memfs.core.store
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
            else:
                names.add(node.module)
    return names


def module_name(path: Path) -> str:
    """``core.store``, ``cli`` (for cli/__init__.py), ``wire``."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


MODULES = sorted(SRC.rglob("*.py"))


def room_of(module: str) -> str:
    return module.split(".")[0]


def allowed(importer: str, imported: str) -> bool:
    if imported in SHARED or not imported.startswith("memfs"):
        return True
    if imported == "memfs.__version__":
        return True
    return any(imported == r or imported.startswith(r + ".") for r in RULES[room_of(importer)])


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_module_imports_only_what_its_room_may(path: Path) -> None:
    module = module_name(path)
    room = room_of(module)
    assert room in RULES, f"memfs.{module} is in no room: add it to RULES on purpose"
    imported = imports_of(path)
    leaks = sorted(
        name
        for name in imported
        if not allowed(module, name)
        and (module, name) not in ALLOWED_EXCEPTIONS
        and not any(name.startswith(n + ".") for (m, n) in ALLOWED_EXCEPTIONS if m == module)
    )
    if room not in WEB_ROOMS:
        leaks += sorted(name for name in imported if name.split(".")[0] in WEB_STACK)
    assert leaks == [], f"memfs.{module} ({room}) imports {leaks}"


def test_every_allowed_exception_is_still_needed() -> None:
    """An exception that no longer matches is removed, so the list only shrinks."""
    by_module = {module_name(p): imports_of(p) for p in MODULES}
    stale = sorted(
        (module, name)
        for module, name in ALLOWED_EXCEPTIONS
        if not any(i == name or i.startswith(name + ".") for i in by_module.get(module, set()))
    )
    assert stale == []


# Modules still over the limit, with their line count: the list only shrinks.
OVERSIZE: dict[str, int] = {}


def test_no_module_is_over_the_size_limit() -> None:
    """One module, one job: split before ~800 lines."""
    big = sorted(
        f"{module_name(p)}: {n}"
        for p in MODULES
        if (n := len(p.read_text().splitlines())) > OVERSIZE.get(module_name(p), 850)
    )
    assert big == []


def test_no_store_file_is_opened_for_writing_outside_the_helper() -> None:
    """Durable writes go through memfs.canonical.durable (temp file, fsync, publish)."""
    offenders = []
    for path in SRC.rglob("*.py"):
        if path.name == "durable.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "open"
                and any(
                    isinstance(a, ast.Constant) and isinstance(a.value, str) and "w" in a.value
                    for a in node.args[1:2]
                )
            ):
                offenders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert offenders == []


# Modules that still run their own SQL, each a debt: the list only shrinks (empty today).
SQL_OUTSIDE_THE_INDEX: set[str] = set()
SQL_WORDS = ("SELECT ", "INSERT ", "UPDATE ", "DELETE ", "CREATE ", "SAVEPOINT", "PRAGMA ")


def _runs_sql(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("execute", "executemany", "executescript")
        ):
            return True
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.lstrip().startswith(SQL_WORDS)
        ):
            return True
    return False


def test_no_sql_outside_the_index_package() -> None:
    """The SQLite index owns every query: no other module runs or holds SQL."""
    index_package = SRC / "derived" / "index"
    offenders = sorted(
        module_name(p) for p in MODULES if index_package not in p.parents and _runs_sql(p)
    )
    assert set(offenders) - SQL_OUTSIDE_THE_INDEX == set()
    assert SQL_OUTSIDE_THE_INDEX - set(offenders) == set(), "an exception no longer needed"


def test_the_sql_check_catches_a_query_or_a_statement_outside_the_index(
    tmp_path: Path,
) -> None:
    """With the allow-list empty, the check above must still see SQL where it appears."""
    run = tmp_path / "run.py"
    run.write_text("def f(conn):\n    return conn.execute(query)\n")
    held = tmp_path / "held.py"
    held.write_text('QUERY = "SELECT version FROM versions"\n')
    clean = tmp_path / "clean.py"
    clean.write_text('NOTE = "selected versions"\n')
    assert _runs_sql(run) and _runs_sql(held) and not _runs_sql(clean)


def test_the_visibility_clock_is_raised_in_one_place() -> None:
    """``asOf`` pinning rests on the clock only moving forward, through one statement
    per index engine (SQLite's ``raise_clock``; PostgreSQL's clock step, the last
    statement of a write session before its COMMIT, whose first CTE it is)."""
    raising = sorted(
        f"{module_name(p)}:{n}"
        for p in MODULES
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "key='clock'" in line and "UPDATE" in line
    )
    assert raising == [
        f"derived.index.postgres.writes:{_line_of('postgres/writes.py', '_CLOCK_RAISE = ')}",
        f"derived.index.writes:{_line_of_raise_clock('writes.py')}",
    ]


def _line_of(name: str, start: str) -> int:
    text = (SRC / "derived" / "index" / name).read_text().splitlines()
    return next(i for i, line in enumerate(text, 1) if line.startswith(start))


def _line_of_raise_clock(name: str) -> int:
    text = (SRC / "derived" / "index" / name).read_text().splitlines()
    start = next(
        i for i, line in enumerate(text, 1) if line.lstrip().startswith("def raise_clock(")
    )
    return next(i for i, line in enumerate(text, 1) if i > start and "key='clock'" in line)


def _raw_index_uses(path: Path) -> list[str]:
    """Where a module opens the index's raw connection (``….index.read()`` /
    ``.write()``), imports sqlite3 or names the index's ``Connection``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("read", "write")
            and not node.args
            and not node.keywords
            and (
                (isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "index")
                or (isinstance(node.func.value, ast.Name) and node.func.value.id == "index")
            )
        ):
            found.append(f"{node.lineno}: .index.{node.func.attr}()")
        elif isinstance(node, ast.Import) and any(
            a.name.split(".")[0] == "sqlite3" for a in node.names
        ):
            found.append(f"{node.lineno}: import sqlite3")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "sqlite3":
            found.append(f"{node.lineno}: from sqlite3")
        elif (
            isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("memfs.derived.index")
            and any(a.name == "Connection" for a in node.names)
        ) or (
            isinstance(node, ast.Attribute)
            and node.attr == "Connection"
            and isinstance(node.value, ast.Name)
            and node.value.id == "index"
        ):
            found.append(f"{node.lineno}: the index's Connection")
    return found


def test_only_the_index_package_sees_a_database_connection() -> None:
    """Outside ``derived/index/`` the index is reached through its sessions (the Index
    protocol), so another engine plugs in by implementing the protocol alone."""
    index_package = SRC / "derived" / "index"
    offenders = {
        module_name(p): uses
        for p in MODULES
        if index_package not in p.parents and (uses := _raw_index_uses(p))
    }
    assert offenders == {}


def test_the_connection_check_sees_each_way_in(tmp_path: Path) -> None:
    cases = {
        "read": "def f(store):\n    with store.index.read() as conn:\n        pass\n",
        "write": "def f(index):\n    with index.write() as conn:\n        pass\n",
        "sqlite": "import sqlite3\n",
        "typed": "from memfs.derived import index\nX: index.Connection\n",
        "named": "from memfs.derived.index import Connection\n",
    }
    for name, text in cases.items():
        (tmp_path / f"{name}.py").write_text(text)
        assert _raw_index_uses(tmp_path / f"{name}.py"), name
    clean = tmp_path / "clean.py"
    clean.write_text(
        "def f(store, fh):\n    with store.index.read_session() as ix:\n"
        "        return fh.read(), ix.clock()\n"
    )
    assert _raw_index_uses(clean) == []


EDGE_ROOMS = {"http", "console", "cli", "mcp", "wire"}


def _backend_uses(path: Path) -> list[int]:
    return [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute) and node.attr == "backend"
    ]


def test_no_edge_reaches_the_backend() -> None:
    """Edges parse, call a core function and render: the objects are the core's."""
    offenders = {
        module_name(p): lines
        for p in MODULES
        if room_of(module_name(p)) in EDGE_ROOMS and (lines := _backend_uses(p))
    }
    assert offenders == {}


def test_the_backend_check_sees_an_attribute(tmp_path: Path) -> None:
    edge = tmp_path / "edge.py"
    edge.write_text("def f(store):\n    return Triggers(store.backend)\n")
    assert _backend_uses(edge) == [2]


def _import_graph() -> dict[str, set[str]]:
    """memfs module → the memfs modules it imports (lazy imports too), as dotted names."""
    names = {"memfs." + module_name(p): p for p in MODULES if module_name(p) != "__init__"}

    def module_of(imported: str) -> str | None:
        # ``from memfs.derived.index import IndexGone`` imports the package's __init__
        for name in (imported, imported.rpartition(".")[0]):
            if name in names:
                return name
        return None

    return {
        name: {m for i in imports_of(path) if (m := module_of(i)) not in (None, name)}
        for name, path in names.items()
    }


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in order:
            visit(v)
    return found


def test_memfs_modules_import_each_other_without_a_cycle() -> None:
    """Layers stack: a module never needs, even lazily, a module that needs it. (The
    store reaches the healing above it through a hook, ``Store.on_index_replaced``.)"""
    assert _cycles(_import_graph()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []

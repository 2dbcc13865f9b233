"""The house's rooms and who may import whom (docs/design-notes.md, "A map of the house").

Each folder of ``src/memfs`` has one job and an import rule, checked here on the source
(the import statements, so a lazy import inside a function counts too):

- ``domain``: pure rules; imports nothing of memfs but ``errors``.
- ``canonical``: the truth (layout, durable writes, backends); may import ``domain``.
- ``derived``: rebuildable state (index, working trees); may import ``canonical`` and
  ``domain``.
- ``core``: the use cases; may import all three.
- edges (``http``, ``cli``, ``mcp``, and the ``wire`` shapes they render): import
  ``core``, ``domain``, ``errors``, ``config`` and ``wire``, never ``derived`` or
  ``canonical``. ``http`` and ``cli`` also serve the ``mcp`` tool table; ``mcp`` and
  ``cli`` also reach a server through the ``client``.
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
    "http": EDGE_MAY | {"memfs.http", "memfs.mcp"},  # serve mounts MCP at /mcp
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
WEB_ROOMS = {"http", "cli", "client", "integrations", "mcp"}


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
    """``asOf`` pinning rests on the clock only moving forward, through one function."""
    raising = sorted(
        f"{module_name(p)}:{n}"
        for p in MODULES
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "key='clock'" in line and "UPDATE" in line
    )
    assert raising == [f"derived.index.writes:{_line_of_raise_clock()}"]


def _line_of_raise_clock() -> int:
    text = (SRC / "derived" / "index" / "writes.py").read_text().splitlines()
    start = next(i for i, line in enumerate(text, 1) if line.startswith("def raise_clock("))
    return next(i for i, line in enumerate(text, 1) if i > start and "key='clock'" in line)

"""Import boundaries: the core knows nothing of its edges.

The store, its index, backends and the run machinery must not import the HTTP layer,
the CLI or the client, nor the web stack; the edges call the core, never the
reverse. Checked on the source (the import statements), so a lazy import inside a
function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "memfs"

CORE = [
    "backend",
    "commits",
    "content",
    "durable",
    "errors",
    "export",
    "gitexport",
    "index",
    "inspect",
    "layout",
    "links",
    "chunking",
    "maintenance",
    "memory_tool",
    "paths",
    "readiness",
    "runs",
    "sandbox",
    "store",
    "triggers",
    "webhook_verify",
    "worktree",
    "keys",
    "tokens",
    "faults",
    "healing",
    "backup",
]
EDGES = ("memfs.http", "memfs.cli", "memfs.client", "memfs.serve", "memfs.integrations")
WEB_STACK = ("starlette", "uvicorn", "httpx", "anthropic")


def imports_of(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("module", CORE)
def test_core_module_does_not_import_the_edges(module: str) -> None:
    imported = imports_of(SRC / f"{module}.py")
    leaks = sorted(
        name for name in imported if name.startswith(EDGES) or name.split(".")[0] in WEB_STACK
    )
    assert leaks == [], f"memfs.{module} imports {leaks}"


def test_every_module_is_classified() -> None:
    """A new module must be placed on one side of the boundary on purpose."""
    # metrics: prometheus_client instruments, fed by the HTTP edge and the runner
    edge_modules = {"cli", "serve", "config", "render", "auth", "runner", "metrics", "__init__"}
    edge_modules |= {"cli_base", "cli_keys", "cli_backup"}
    modules = {p.stem for p in SRC.glob("*.py")}
    assert modules - set(CORE) - edge_modules == set()


def test_no_store_file_is_opened_for_writing_outside_the_helper() -> None:
    """Durable writes go through memfs.durable (temp file, fsync, publish)."""
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

"""Docs are tested: every route, setting and CLI command is documented.

- each route of ``ROUTES`` has a section ``### METHOD /path/{template}`` in docs/api.md;
- each ``MEMFS_*`` setting is in docs/api.md and in README.md, and each ``memfs serve``
  flag is in docs/api.md;
- each command and subcommand of ``memfs`` is in README.md or docs/cli.md.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.cli import build_parser
from memfs.config import ENVIRONMENT
from memfs.http.app import ROUTES
from memfs.http.openapi import openapi_path

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api.md"
CLI = ROOT / "docs" / "cli.md"
README = ROOT / "README.md"


def _read(path: Path) -> str:
    assert path.exists(), f"{path.relative_to(ROOT)} is missing"
    return path.read_text(encoding="utf-8")


def _headings(text: str) -> set[str]:
    return {m.group(1).strip() for m in re.finditer(r"^#{2,4} (.+)$", text, re.M)}


def _commands(parser: argparse.ArgumentParser, prefix: str = "memfs") -> Iterator[str]:
    """``memfs agents``, ``memfs agents create``, … for every (sub)command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}"
                yield from _commands(sub, f"{prefix} {name}")


def _serve_flags() -> list[str]:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            serve = action.choices["serve"]
            return [
                option
                for a in serve._actions
                for option in a.option_strings
                if option.startswith("--") and option not in ("--help", "--json", "--actor")
            ]
    raise AssertionError("memfs has no serve command")


ROUTE_IDS = [f"{r.method} {openapi_path(r)}" for r in ROUTES]


@pytest.mark.parametrize("route", ROUTE_IDS)
def test_every_route_has_a_section_in_api_md(route: str) -> None:
    assert route in _headings(_read(API)), (
        f"docs/api.md has no '### {route}' section: add one with a curl example"
    )


def test_api_md_documents_no_route_that_does_not_exist() -> None:
    documented = {h for h in _headings(_read(API)) if re.match(r"(GET|PUT|POST|DELETE|PATCH) /", h)}
    assert documented - {*ROUTE_IDS, "GET /openapi.json", MCP_ROUTE} == set()


MCP_ROUTE = "POST /mcp/agents/{agentId}"  # served by the SDK, outside the /v1 router


def test_api_md_and_mcp_md_document_the_mcp_endpoint_and_every_tool() -> None:
    from memfs.mcp.tools import TOOLS

    assert MCP_ROUTE in _headings(_read(API))
    mcp_md = _read(ROOT / "docs" / "mcp.md")
    for tool in TOOLS:
        assert f"| `{tool.name}` |" in mcp_md, f"docs/mcp.md's tool table lacks {tool.name}"
    for client in ("claude mcp add", "claude_desktop_config.json", "Authorization: Bearer"):
        assert client in mcp_md


@pytest.mark.parametrize("variable", ENVIRONMENT)
def test_every_setting_is_in_api_md_and_readme(variable: str) -> None:
    assert f"`{variable}`" in _read(API), f"docs/api.md does not list {variable}"
    assert f"`{variable}`" in _read(README), f"README.md does not list {variable}"


@pytest.mark.parametrize("flag", _serve_flags())
def test_every_serve_flag_is_in_api_md(flag: str) -> None:
    assert f"`{flag}`" in _read(API), f"docs/api.md's settings table lacks memfs serve {flag}"


def test_every_setting_has_its_serve_flag() -> None:
    # MEMFS_PAGE_ITEMS ↔ --page-items: the docs promise the pairing, so check it holds.
    flags = set(_serve_flags())
    for variable in ENVIRONMENT:
        flag = "--" + variable.removeprefix("MEMFS_").lower().replace("_", "-")
        assert flag in flags, f"memfs serve has no {flag} for {variable}"


@pytest.mark.parametrize("command", list(_commands(build_parser())))
def test_every_cli_command_is_documented(command: str) -> None:
    text = _read(README) + "\n" + _read(CLI)
    assert re.search(rf"(^|[^\w-]){re.escape(command)}(?![\w-])", text), (
        f"'{command}' appears in neither README.md nor docs/cli.md: add a section "
        "(usage, an example, what it prints) to docs/cli.md"
    )


def test_api_md_says_what_total_counts_with_depth_one() -> None:
    # tests/test_http_listing.py checks the count itself; a reader must find the rule.
    text = " ".join(_read(API).split())
    assert "With `depth=1` it counts what that listing lists" in text


# ---- the docs stand alone, and their examples run ------------------------------------

DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_links_stay_inside_the_repository(doc: Path) -> None:
    text = _read(doc)
    prose = re.sub(r"```.*?```|`[^`\n]*`", "", text, flags=re.S)  # code may show any link
    assert "shared/design.md" not in text and "/work/" not in text, (
        f"{doc.name} refers to a file outside the repository; docs/design.md is the contract"
    )
    for target in LINK.findall(prose):
        path, _, _anchor = target.partition("#")
        if "://" in path and doc != README:
            continue  # docs may cite a specification; the README stays inside the repository
        assert "://" not in path and not path.startswith(("/", "mailto:")), (
            f"{doc.name} links outside the repository: {target}"
        )
        if path:
            resolved = (doc.parent / path).resolve()
            assert resolved.is_relative_to(ROOT) and resolved.exists(), (
                f"{doc.name} links to {target}, which is not a file of the repository"
            )


def test_readme_keeps_its_first_screen_and_writes_scratch_output_to_a_temp_folder() -> None:
    text = _read(README)
    first_screen = "\n".join(text.splitlines()[:25])
    assert "scripts/serve" in first_screen and "scripts/test" in first_screen
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            command = line.split("  #", 1)[0]
            for target in re.findall(r"(?<![>&\d])>>?\s*(\S+)", command):
                # data/ is the data folder itself (a hand edit in a working tree).
                assert target.startswith(('"$SCRATCH', "$SCRATCH", "/dev/null", "data/")), (
                    f"README writes {target} into the clone: {line.strip()}"
                )
            if "git init" in command:
                assert '"$SCRATCH/' in command.split("git init", 1)[1].split("&&")[0], line


def test_design_md_is_the_contract_in_the_projects_own_words() -> None:
    text = _read(ROOT / "docs" / "design.md")
    for heading in (
        "1. Architecture",
        "2. Identifiers, paths, content",
        "3. HTTP API",
        "4. Command line",
        "5. Settings",
    ):
        assert heading in _headings(text), f"docs/design.md lacks '## {heading}'"
    for promise in ("Durable before acknowledged", "Exactly one run per webhook-id", "0600"):
        assert promise in text, f"docs/design.md does not state {promise!r}"
    assert "](docs/design.md)" in _read(README), "README.md does not point to docs/design.md"


def test_operations_md_covers_running_one_machine() -> None:
    text = _read(ROOT / "docs" / "operations.md")
    headings = _headings(text)
    for heading in ("Deployment on one machine", "systemd", "Backups", "Upgrades", "Monitoring"):
        assert heading in headings, f"docs/operations.md lacks a section '{heading}'"
    for endpoint in ("GET /healthz", "GET /readyz", "GET /metrics", "MEMFS_ADMIN_KEY"):
        assert endpoint in text, f"docs/operations.md does not describe {endpoint}"
    assert "ExecStart=" in text and "memfs backup" in text and "memfs restore" in text


def _examples(doc: Path) -> list[str]:
    # ```python blocks are complete programs; ```python no-run ones need outside help
    # (an Anthropic API key) and are only compiled.
    text = _read(doc)
    for block in re.findall(r"```python no-run\n(.*?)```", text, re.S):
        compile(block, str(doc), "exec")
    return re.findall(r"```python\n(.*?)```", text, re.S)


def test_client_md_examples_run_against_a_real_server(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from servers_real import ADMIN_KEY, RealServer

    doc = ROOT / "docs" / "client.md"
    examples = _examples(doc)
    assert len(examples) == 2, "docs/client.md: one client example, one MemfsMemoryTool example"
    assert "MemfsMemoryTool" in examples[1]
    printed = re.findall(r"It prints:\n\n```\n(.*?)```", _read(doc), re.S)
    with RealServer(tmp_path / "data") as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
        env.update(MEMFS_URL=server.url, MEMFS_KEY=ADMIN_KEY)
        outputs = []
        for number, source in enumerate(examples):
            script = tmp_path / f"example{number}.py"
            script.write_text(source)
            done = subprocess.run(
                [sys.executable, str(script)],
                capture_output=True,
                text=True,
                env=env,
                cwd=tmp_path,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, f"docs/client.md example {number + 1}:\n{done.stderr}"
            outputs.append(done.stdout)
    client_out, tool_out = outputs
    assert "now version 2\nwhat Alice likes | - likes green tea\n" in client_out
    assert client_out.startswith("created /memories/preferences.md v 1 ")
    assert [tool_out] == printed, "docs/client.md: the tool example's output is not as shown"

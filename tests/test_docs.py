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
    assert documented - {*ROUTE_IDS, "GET /openapi.json"} == set()


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

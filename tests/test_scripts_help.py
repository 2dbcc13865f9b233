"""Every script under scripts/ teaches through ``--help``: its whole module docstring
(how to run it, what it measures, how to read it) and a line of help for every option.

Each script's ``main`` is run in this process with ``--help``; ``parse_args`` is
intercepted, so the parser the script built is inspected and nothing is measured.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
PROGRAMS = sorted(
    p for p in SCRIPTS.glob("*.py") if p.name != "benchkit.py" and "def main(" in p.read_text()
)


class _Built(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__()
        self.parser = parser


def _load(path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    name = f"script_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _parser_of(path: Path, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    monkeypatch.syspath_prepend(str(SCRIPTS))  # the scripts import benchkit as a sibling
    monkeypatch.setattr(sys, "argv", [str(path), "--help"])

    def built(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise _Built(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", built)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", built)
    main = _load(path, monkeypatch).main
    with pytest.raises(_Built) as caught:
        main(["--help"]) if inspect.signature(main).parameters else main()
    return caught.value.parser


def test_every_script_is_found() -> None:
    names = {p.name for p in PROGRAMS}
    assert {"bench_peers.py", "bench_store.py", "commit_instructions.py"} <= names


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_help_shows_the_whole_docstring_and_explains_every_option(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = _parser_of(path, monkeypatch)
    doc = _load(path, monkeypatch).__doc__ or ""
    assert doc.strip(), f"{path.name} has no module docstring"
    assert parser.description is not None
    assert parser.description.strip() == doc.strip(), (
        f"{path.name}: --help shows {parser.description.splitlines()[:1]}, not its docstring"
    )
    assert isinstance(parser.formatter_class, type)
    assert issubclass(parser.formatter_class, argparse.RawDescriptionHelpFormatter), (
        f"{path.name}: its docstring's layout (usage lines, lists) must survive --help"
    )
    silent = [
        "/".join(action.option_strings)
        for action in parser._actions
        if action.option_strings
        and action.help != argparse.SUPPRESS
        and not isinstance(action, argparse._HelpAction)
        and not (action.help or "").strip()
    ]
    assert not silent, f"{path.name}: options without help: {silent}"
    rendered = parser.format_help()
    assert "%(default)" not in rendered

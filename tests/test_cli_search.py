"""``memfs search``: full-text search from the command line, on the data folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memfs.cli import main


def run(capsys: pytest.CaptureFixture[str], data: Path, *args: str) -> tuple[int, str, str]:
    try:
        code = main(["--data", str(data), *args])
    except SystemExit as exit_:  # argparse's refusals
        code = int(exit_.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    folder = tmp_path / "data"
    for agent in ("team/a", "team/b"):
        assert main(["--data", str(folder), "agents", "create", agent]) == 0
    notes = tmp_path / "notes.md"
    for agent, name, text in [
        ("team/a", "ferry.md", "---\ndescription: Ferry times\n---\nThe ferry leaves at nine.\n"),
        ("team/a", "ferry-old.md", "Old: the ferry left at ten.\n"),
        ("team/b", "boat.md", "Take the ferry, then the bus.\n"),
    ]:
        notes.write_text(text)
        assert main(["--data", str(folder), "put", agent, name, str(notes)]) == 0
    capsys.readouterr()
    return folder


def test_search_prints_path_version_score_and_the_marked_passage(
    capsys: pytest.CaptureFixture[str], data: Path
) -> None:
    # One quoted QUERY (or words after --): a -word alone would read as an option.
    code, out, _ = run(capsys, data, "search", "team/a", "ferry -old")
    assert code == 0
    assert run(capsys, data, "search", "team/a", "--", "ferry", "-old")[1] == out
    lines = out.splitlines()
    assert lines[0].startswith("/memories/ferry.md  v1  ")
    assert lines[1] == "    The «ferry» leaves at nine."
    assert len(lines) == 2


def test_search_json_and_scope_and_limit(capsys: pytest.CaptureFixture[str], data: Path) -> None:
    code, out, _ = run(capsys, data, "search", "--scope", "team", "ferry", "--json")
    assert code == 0
    results = json.loads(out)["results"]
    assert [r["agentId"] for r in results].count("team/b") == 1 and len(results) == 3
    assert results[0]["path"] == "/memories/ferry.md"  # the description counts more
    code, out, _ = run(capsys, data, "search", "--scope", "team", "ferry", "--limit", "1", "--json")
    assert code == 0 and len(json.loads(out)["results"]) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["search", "team/a", '"unclosed'],
        ["search", "team/a", "-only"],
        ["search", "team/a"],
        ["search", "team/a", "ferry", "--limit", "0"],
        ["search", "team/a", "ferry", "--meta", "novalue"],
        ["search", "no/such/agent/..", "ferry"],
    ],
)
def test_bad_search_arguments_exit_2_with_a_message(
    capsys: pytest.CaptureFixture[str], data: Path, args: list[str]
) -> None:
    code, _, err = run(capsys, data, *args)
    assert code == 2 and err.strip()

"""Claude's memory tool (``memory_20250818``) on top of memfs.

``execute`` runs one command (``view``, ``create``, ``str_replace``, ``insert``,
``delete``, ``rename``; the Anthropic API's field names) against a ``ToolStore``
and answers the text the model would read from the Anthropic Python SDK's
``BetaLocalFilesystemMemoryTool`` (anthropic 2.14.0,
``anthropic/lib/tools/_beta_builtin_memory_tool.py``), character for character:
its results, its ``ToolError`` refusals, and the ``repr`` of the OS errors its
tool runner passes on (``NotADirectoryError(20, 'Not a directory')`` and co.).

Where memfs differs from a local filesystem:

- memfs has no directories, only files under a path: every folder is listed as
  ``4K`` (an ext4 directory), and a folder vanishes with its last file, while the
  SDK keeps empty directories (and makes a rename's parents even when it fails).
- No symlinks or special files, so the SDK's symlink-escape and "Unsupported
  file type" refusals never happen; dotfiles are hidden from listings as there.
- Missing or mistyped fields, and strings holding lone surrogates, are refused
  with ``Error: ...`` instead of the SDK's lax coercion or a Python ``repr``.
- Text the SDK would store is stored: NUL, any frontmatter (one that does not parse
  just gives no description or metadata). The only other refusals are memfs's
  documented limits, worded like the SDK's own refusals: a memory over
  ``MEMFS_MEMORY_BYTES`` (``File P exceeds maximum size of N bytes.``), a path over
  1024 bytes, a name over 255 bytes, a control character or backslash in a path,
  and names the store reserves (``The path P ...``).
- Paths are NFC-normalised, as every memfs path: ``/memories/e\u0301.md`` and
  ``/memories/\u00e9.md`` are one file (on Linux they would be two).
- Like the SDK, only the ``/memories`` prefix is checked: ``/memoriesfoo`` means
  ``/memories/foo``, and ``..``/``.`` are resolved before the escape check.
"""

from __future__ import annotations

import enum
import posixpath
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeGuard

from memfs.domain import paths
from memfs.errors import Conflict, InvalidRequest, NotFound, PayloadTooLarge

__all__ = ["COMMAND_FIELDS", "READ_ONLY", "ToolResult", "ToolStore", "execute"]

ROOT = "/memories"

# The fields of each command of memory_20250818. Every edge refuses any other field
# (a typo such as "file_txt" must not pass as a missing field).
COMMAND_FIELDS: dict[str, tuple[str, ...]] = {
    "view": ("command", "path", "view_range"),
    "create": ("command", "path", "file_text"),
    "str_replace": ("command", "path", "old_str", "new_str"),
    "insert": ("command", "path", "insert_line", "insert_text"),
    "delete": ("command", "path"),
    "rename": ("command", "old_path", "new_path"),
}
READ_ONLY = frozenset({"view"})  # the commands that commit nothing

_MAX_LINES = 999999
_LINE_NUMBER_WIDTH = len(str(_MAX_LINES))
# An ext4 directory's st_size, which the SDK prints for every directory.
_FOLDER_SIZE = "4K"
# The SDK lets these OS errors through; its runner shows the model their repr.
_NOT_A_DIRECTORY = "NotADirectoryError(20, 'Not a directory')"
_INVALID_ARGUMENT = "OSError(22, 'Invalid argument')"
_EMBEDDED_NULL = "ValueError('embedded null byte')"
# Python refuses str() of an int past 4300 digits; no line number is that long.
_MAX_INT_BITS = 4096
# Any surrogate in a str decoded from JSON is unpaired: UTF-8 cannot hold it.
_SURROGATE = re.compile("[\ud800-\udfff]")
_BAD_PATH_CHAR = re.compile(r"[\x00-\x1f\x7f-\x9f\\]")


class ToolStore(Protocol):
    """The memfs storage the tool works against; folders exist only implicitly."""

    memory_bytes: int  # the largest memory it stores (MEMFS_MEMORY_BYTES)

    def read_file(self, path: str) -> str | None:
        """UTF-8 text of the memory at ``path``, None if no such file."""
        ...

    def is_folder(self, path: str) -> bool:
        """True if some file exists under ``path + "/"`` (``/memories`` always)."""
        ...

    def files_under(self, folder: str) -> list[tuple[str, int]]:
        """(path, bytes) of every file under ``folder + "/"``, sorted bytewise."""
        ...

    def write_file(self, path: str, content: str, *, create_only: bool) -> None:
        """One versioned commit; ``create_only`` raises Conflict if it exists."""
        ...

    def delete_paths(self, paths: list[str]) -> None:
        """Delete these files in one commit."""
        ...

    def move_paths(self, moves: list[tuple[str, str]]) -> None:
        """Rename (old, new) pairs in one commit."""
        ...


@dataclass(frozen=True)
class ToolResult:
    """``ok`` is False where the SDK's runner would send ``is_error: true``."""

    ok: bool
    result: str


class _Refused(Exception):
    """Ends a command with ``text`` as its (error) result."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class _Kind(enum.Enum):
    FILE = "file"
    FOLDER = "folder"
    MISSING = "missing"
    # A proper ancestor is a file: the OS answers ENOTDIR, not ENOENT.
    BLOCKED = "blocked"


def execute(store: ToolStore, command: Mapping[str, object]) -> ToolResult:
    """Run one memory-tool command; never raises for a malformed command.

    Storage failures that are no fault of the command (``Unavailable``,
    ``CorruptionError``, ...) propagate for the caller to report.
    """
    if not isinstance(command, Mapping):
        return ToolResult(False, "Error: the command must be a JSON object")
    name = command.get("command")
    if not isinstance(name, str):
        return ToolResult(False, f"Error: `command` must be one of: {', '.join(_COMMANDS)}")
    handler = _COMMANDS.get(name)
    if handler is None:
        # The SDK's own text for it (NotImplementedError from its dispatcher).
        return ToolResult(False, repr(NotImplementedError(f"Unknown command: {name}")))
    try:
        return ToolResult(True, handler(store, command))
    except _Refused as refused:
        return ToolResult(False, refused.text)
    except Conflict as err:
        # Only a race gets here (existence is checked first): a create that lost
        # reads as the SDK's O_EXCL failure.
        if name == "create":
            return ToolResult(False, f"File {command.get('path')} already exists")
        return ToolResult(False, f"Error: {err.message}")
    except (InvalidRequest, NotFound, PayloadTooLarge) as err:
        return ToolResult(False, f"Error: {err.message}")


# -- fields ---------------------------------------------------------------


def _text_field(command: Mapping[str, object], field: str) -> str:
    value = command.get(field)
    if not isinstance(value, str):
        raise _Refused(f"Error: `{field}` must be a string")
    if _SURROGATE.search(value):
        raise _Refused(f"Error: `{field}` holds an unpaired surrogate")
    return value


def _is_int(value: object) -> TypeGuard[int]:
    # bool is an int subclass, but true/false is no line number.
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and value.bit_length() <= _MAX_INT_BITS
    )


def _int_field(command: Mapping[str, object], field: str) -> int:
    value = command.get(field)
    if not _is_int(value):
        raise _Refused(f"Error: `{field}` must be an integer")
    return value


def _view_range(command: Mapping[str, object]) -> list[int] | None:
    value = command.get("view_range")
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(_is_int(n) for n in value):
        raise _Refused("Error: `view_range` must be a list of two integers")
    return [int(n) for n in value]


# -- paths ----------------------------------------------------------------


def _resolve(path: str) -> str:
    """The memfs path the SDK's ``_validate_path`` maps ``path`` to."""
    if not path.startswith(ROOT):
        raise _Refused(f"Path must start with /memories, got: {path}")
    if "\0" in path:
        # Path.resolve() lstat()s every component and the OS refuses NUL.
        raise _Refused(_EMBEDDED_NULL)
    relative = path[len(ROOT) :].lstrip("/")
    # No symlinks in memfs, so resolve() is purely lexical here.
    full = posixpath.normpath(f"{ROOT}/{relative}")
    if full != ROOT and not full.startswith(ROOT + "/"):
        raise _Refused(f"Path {path} would escape /memories directory")
    if full != ROOT:
        _check_limits(full, path)
    return full


def _check_limits(full: str, path: str) -> None:
    """memfs's documented path limits, refused in the SDK's wording style."""
    full = unicodedata.normalize("NFC", full)
    if len(full.encode("utf-8", "surrogatepass")) > paths.MAX_PATH_BYTES:
        raise _Refused(
            f"The path {path} exceeds the maximum length of {paths.MAX_PATH_BYTES:,} bytes."
        )
    if any(len(s.encode("utf-8", "surrogatepass")) > paths.MAX_SEGMENT_BYTES for s in full.split("/")):
        raise _Refused(
            f"The path {path} has a name longer than the maximum of "
            f"{paths.MAX_SEGMENT_BYTES} bytes."
        )
    if _BAD_PATH_CHAR.search(full):
        raise _Refused(
            f"The path {path} contains a control character or backslash, "
            "which memory paths can't hold."
        )
    try:
        paths.memory_path(full)
    except InvalidRequest as err:  # a name the store reserves
        raise _Refused(f"The path {path} can't be used: {err.message}.") from None


def _check_size(store: ToolStore, content: str, path: str) -> None:
    if len(content.encode()) > store.memory_bytes:
        raise _Refused(f"File {path} exceeds maximum size of {store.memory_bytes:,} bytes.")


def _parent(path: str) -> str:
    return posixpath.dirname(path)


def _lookup(store: ToolStore, path: str) -> tuple[_Kind, str | None]:
    """What the OS would find at ``path``, with the file's text if it is one."""
    if path == ROOT:
        return _Kind.FOLDER, None
    content = store.read_file(path)
    if content is not None:
        return _Kind.FILE, content
    if store.is_folder(path):
        return _Kind.FOLDER, None
    ancestor = _parent(path)
    while ancestor != ROOT:
        if store.read_file(ancestor) is not None:
            return _Kind.BLOCKED, None
        ancestor = _parent(ancestor)
    return _Kind.MISSING, None


def _kind(store: ToolStore, path: str) -> _Kind:
    return _lookup(store, path)[0]


def _read_existing_file(store: ToolStore, full: str, path: str) -> str:
    """The text of the file ``str_replace``/``insert`` edits, or their refusal."""
    kind, content = _lookup(store, full)
    if kind is _Kind.FOLDER:
        raise _Refused(f"The path {path} is not a file.")
    if content is None:
        raise _Refused(f"The path {path} does not exist. Please provide a valid path.")
    return content


# -- commands -------------------------------------------------------------


def _view(store: ToolStore, command: Mapping[str, object]) -> str:
    path = _text_field(command, "path")
    view_range = _view_range(command)
    full = _resolve(path)
    kind, content = _lookup(store, full)
    if kind is _Kind.FOLDER:
        return _list_folder(store, full, path)
    if content is None:
        raise _Refused(f"The path {path} does not exist. Please provide a valid path.")

    lines = content.split("\n")
    if len(lines) > _MAX_LINES:
        raise _Refused(f"File {path} exceeds maximum line limit of 999,999 lines.")
    start_num = 1
    # The SDK ignores a range that is not a pair and never refuses one: the
    # start is clamped to 1, -1 means the end, anything else is a Python slice.
    if view_range and len(view_range) == 2:
        start_line = max(1, view_range[0]) - 1
        end_line = len(lines) if view_range[1] == -1 else view_range[1]
        lines = lines[start_line:end_line]
        start_num = start_line + 1
    numbered = [_numbered(i + start_num, line) for i, line in enumerate(lines)]
    return f"Here's the content of {path} with line numbers:\n" + "\n".join(numbered)


def _list_folder(store: ToolStore, folder: str, path: str) -> str:
    # name -> size of a file, or name -> {child -> size, None for a folder}.
    tree: dict[str, int | dict[str, int | None]] = {}
    for file_path, size in store.files_under(folder):
        parts = file_path[len(folder) + 1 :].split("/")
        if parts[0].startswith("."):
            continue
        if len(parts) == 1:
            tree[parts[0]] = size
            continue
        children = tree.setdefault(parts[0], {})
        if isinstance(children, dict) and not parts[1].startswith("."):
            children[parts[1]] = size if len(parts) == 2 else None

    lines = [f"{_FOLDER_SIZE}\t{path}"]
    # Sorted per folder by name, as the SDK walks: "a/" comes before "a-b".
    for name in sorted(tree):
        node = tree[name]
        if isinstance(node, int):
            lines.append(f"{_format_file_size(node)}\t{path}/{name}")
            continue
        lines.append(f"{_FOLDER_SIZE}\t{path}/{name}/")
        for child in sorted(node):
            child_size = node[child]
            if child_size is None:
                lines.append(f"{_FOLDER_SIZE}\t{path}/{name}/{child}/")
            else:
                lines.append(f"{_format_file_size(child_size)}\t{path}/{name}/{child}")
    header = (
        f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:"
    )
    return f"{header}\n" + "\n".join(lines)


def _create(store: ToolStore, command: Mapping[str, object]) -> str:
    path = _text_field(command, "path")
    file_text = _text_field(command, "file_text")
    full = _resolve(path)
    kind = _kind(store, full)
    if kind is _Kind.BLOCKED:
        raise _Refused(_NOT_A_DIRECTORY)
    if kind is not _Kind.MISSING:
        # O_CREAT | O_EXCL: a folder (or /memories itself) "exists" as well.
        raise _Refused(f"File {path} already exists")
    _check_size(store, file_text, path)
    store.write_file(full, file_text, create_only=True)
    return f"File created successfully at: {path}"


def _str_replace(store: ToolStore, command: Mapping[str, object]) -> str:
    path = _text_field(command, "path")
    old_str = _text_field(command, "old_str")
    new_str = _text_field(command, "new_str")
    full = _resolve(path)
    content = _read_existing_file(store, full, path)

    count = content.count(old_str)
    if count == 0:
        raise _Refused(
            f"No replacement was performed, old_str `{old_str}` did not appear verbatim in {path}."
        )
    if count > 1:
        matching_lines: list[int] = []
        start = counted_to = 0
        line = 1
        # Overlapping matches count, one step at a time, as in the SDK; the
        # newlines are counted incrementally (the SDK recounts from the top).
        while (pos := content.find(old_str, start)) != -1:
            line += content.count("\n", counted_to, pos)
            counted_to = pos
            matching_lines.append(line)
            start = pos + 1
        raise _Refused(
            f"No replacement was performed. Multiple occurrences of old_str "
            f"`{old_str}` in lines: {', '.join(map(str, matching_lines))}. "
            "Please ensure it is unique"
        )

    changed_line_index = content[: content.find(old_str)].count("\n")
    new_content = content.replace(old_str, new_str)
    _check_size(store, new_content, path)
    store.write_file(full, new_content, create_only=False)

    new_lines = new_content.split("\n")
    context_start = max(0, changed_line_index - 2)
    context_end = min(len(new_lines), changed_line_index + 3)
    snippet = [_numbered(n, new_lines[n - 1]) for n in range(context_start + 1, context_end + 1)]
    return (
        "The memory file has been edited. Here is the snippet showing the change "
        "(with line numbers):\n" + "\n".join(snippet)
    )


def _insert(store: ToolStore, command: Mapping[str, object]) -> str:
    path = _text_field(command, "path")
    insert_line = _int_field(command, "insert_line")
    insert_text = _text_field(command, "insert_text")
    full = _resolve(path)
    content = _read_existing_file(store, full, path)

    # Split on LF only (a CR stays), without the empty tail of a final newline.
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    if insert_line < 0 or insert_line > len(lines):
        raise _Refused(
            f"Invalid `insert_line` parameter: {insert_line}. "
            f"It should be within the range [0, {len(lines)}]."
        )
    lines.insert(insert_line, insert_text.rstrip("\n"))
    new_content = "\n".join(lines)
    if not new_content.endswith("\n"):
        new_content += "\n"
    _check_size(store, new_content, path)
    store.write_file(full, new_content, create_only=False)
    return f"The file {path} has been edited."


def _delete(store: ToolStore, command: Mapping[str, object]) -> str:
    path = _text_field(command, "path")
    full = _resolve(path)
    if full == ROOT:
        raise _Refused("Cannot delete the /memories directory itself")
    kind = _kind(store, full)
    if kind is _Kind.FILE:
        store.delete_paths([full])
    elif kind is _Kind.FOLDER:
        store.delete_paths([file_path for file_path, _ in store.files_under(full)])
    else:
        raise _Refused(f"The path {path} does not exist")
    return f"Successfully deleted {path}"


def _rename(store: ToolStore, command: Mapping[str, object]) -> str:
    old_path = _text_field(command, "old_path")
    new_path = _text_field(command, "new_path")
    old_full = _resolve(old_path)
    new_full = _resolve(new_path)
    if old_full == ROOT:
        raise _Refused("Cannot rename the /memories directory itself")
    new_kind = _kind(store, new_full)
    if new_kind in (_Kind.FILE, _Kind.FOLDER):
        raise _Refused(f"The destination {new_path} already exists")

    # The refusals below come in the order the SDK meets them: its mkdir -p of
    # the new parent, then rename(2) looking up the old parent, the new parent,
    # the old name, and last refusing to move a folder into itself.
    new_parent_kind = _kind(store, _parent(new_full))
    if new_parent_kind is _Kind.BLOCKED:
        raise _Refused(_NOT_A_DIRECTORY)
    old_kind = _kind(store, old_full)
    if old_kind is _Kind.BLOCKED:
        raise _Refused(_NOT_A_DIRECTORY)
    if old_kind is _Kind.MISSING and new_full.startswith(old_full + "/"):
        # That mkdir -p has just made the missing old path a folder, which
        # rename(2) then refuses to move into itself.
        raise _Refused(_INVALID_ARGUMENT)
    missing = f"The path {old_path} does not exist"
    if old_kind is _Kind.MISSING and _kind(store, _parent(old_full)) is _Kind.MISSING:
        raise _Refused(missing)
    if new_parent_kind is _Kind.FILE:
        raise _Refused(_NOT_A_DIRECTORY)
    if old_kind is _Kind.MISSING:
        raise _Refused(missing)

    if old_kind is _Kind.FILE:
        store.move_paths([(old_full, new_full)])
    else:
        if new_full.startswith(old_full + "/"):
            raise _Refused(_INVALID_ARGUMENT)
        moves = [
            (file_path, new_full + file_path[len(old_full) :])
            for file_path, _ in store.files_under(old_full)
        ]
        for _old, moved in moves:  # a file deep in the folder may now be too long
            _check_limits(moved, new_path)
        store.move_paths(moves)
    return f"Successfully renamed {old_path} to {new_path}"


# -- formatting -----------------------------------------------------------


def _numbered(number: int, line: str) -> str:
    return f"{str(number).rjust(_LINE_NUMBER_WIDTH)}\t{line}"


def _format_file_size(size: int) -> str:
    """The SDK's size: 0B, 512B, 1.5K, 4K, 2.0M (one decimal unless whole)."""
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((size.bit_length() - 1) // 10, len(units) - 1)
    scaled = size / (1024**i)
    if scaled == int(scaled):
        return f"{int(scaled)}{units[i]}"
    return f"{scaled:.1f}{units[i]}"


_COMMANDS: dict[str, Callable[[ToolStore, Mapping[str, object]], str]] = {
    "view": _view,
    "create": _create,
    "str_replace": _str_replace,
    "insert": _insert,
    "delete": _delete,
    "rename": _rename,
}

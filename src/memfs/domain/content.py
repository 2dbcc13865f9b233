"""What memfs reads out of a memory's bytes: UTF-8 text, frontmatter, description.

The bytes are stored exactly as given; parsing only derives ``description`` and the
scalar ``metadata`` that listings filter on. Parsing uses python-frontmatter's YAML
handler so the frontmatter rules are the ones people already know; the common case,
lines of ``key: plain value``, is read without YAML (``plain_mapping``), giving what
YAML gives (property-tested against it) at a tenth of the cost.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import re
from dataclasses import dataclass, field

import frontmatter.default_handlers
import yaml

from memfs.errors import InvalidRequest, PayloadTooLarge

Scalar = str | int | float | bool | None

_HANDLER = frontmatter.default_handlers.YAMLHandler()


@dataclass(frozen=True)
class Parsed:
    sha256: str
    size: int
    description: str | None
    metadata: dict[str, Scalar] = field(default_factory=dict)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def decode(data: bytes, *, field_name: str = "content") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRequest(
            f"content is not valid UTF-8 (byte {exc.start})", field=field_name
        ) from None


def parse(data: bytes, *, limit: int, lenient: bool = False) -> Parsed:
    """Check size, encoding and frontmatter of a memory; raise InvalidRequest/PayloadTooLarge.

    ``lenient`` (what Claude's memory tool writes): NUL is allowed, and frontmatter
    that does not parse, or whose description is no string, gives no description
    (nor, if it does not parse, metadata) instead of a refusal.
    """
    if len(data) > limit:
        raise PayloadTooLarge(
            f"memory is {len(data)} bytes; the limit is {limit} (MEMFS_MEMORY_BYTES)",
            field="content",
        )
    text = decode(data)
    if "\x00" in text and not lenient:
        raise InvalidRequest("content must not contain NUL characters", field="content")
    try:
        meta = _frontmatter(text)
    except InvalidRequest:
        if not lenient:
            raise
        meta = {}
    description = meta.pop("description", None)
    if description is not None and not isinstance(description, str):
        if not lenient:
            raise InvalidRequest("frontmatter 'description' must be a string", field="content")
        description = None
    metadata: dict[str, Scalar] = {}
    for key, value in meta.items():
        if isinstance(value, float) and not math.isfinite(value):
            metadata[key] = str(value)  # JSON has no NaN or infinity
        elif value is None or isinstance(value, (str, bool, int, float)):
            metadata[key] = value
        elif isinstance(value, (dt.date, dt.datetime, dt.time)):
            metadata[key] = value.isoformat()
        # Lists and mappings stay in the file but are not filterable metadata.
    return Parsed(sha256_hex(data), len(data), description, metadata)


def body_text(data: bytes) -> str:
    """A memory's text without its frontmatter: what full-text search indexes as the
    body (the description is indexed on its own, with more weight)."""
    text = data.decode("utf-8", "replace")
    if _HANDLER.detect(text):
        try:
            return _HANDLER.split(text)[1]
        except ValueError:
            pass  # no closing '---': a thematic break, the text is all body
    return text


def _frontmatter(text: str) -> dict[str, object]:
    if not _HANDLER.detect(text):
        return {}
    try:
        head, _ = _HANDLER.split(text)
    except ValueError:
        return {}  # an opening '---' with no closing one is a thematic break, not YAML
    plain = plain_mapping(head)
    if plain is not None:
        return plain
    try:
        loaded = _HANDLER.load(head)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        # The frontmatter text starts where the opening '---' match ends: on line 1
        # (its rest), or further down when the match swallowed blank lines after it.
        boundary = _HANDLER.FM_BOUNDARY
        opening = boundary.match(text) if boundary is not None else None
        first = text.count("\n", 0, opening.end()) if opening is not None else 0
        where = f" on line {first + mark.line + 1}" if mark is not None else ""
        raise InvalidRequest(
            f"invalid YAML frontmatter{where}: {problem}", field="content"
        ) from None
    except (ValueError, KeyError, TypeError, OverflowError) as exc:
        # Well-formed YAML whose value its type can't hold: 'date: 2024-13-01', '!!int x'.
        boundary = _HANDLER.FM_BOUNDARY
        opening = boundary.match(text) if boundary is not None else None
        first = text.count("\n", 0, opening.end()) if opening is not None else 0
        line = _unreadable_value_line(head)
        where = f" on line {first + line + 1}" if line is not None else ""
        raise InvalidRequest(
            f"invalid YAML frontmatter{where}: a value can't be read ({exc})", field="content"
        ) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise InvalidRequest(
            "YAML frontmatter must be a mapping of keys to values", field="content"
        )
    return {str(k): v for k, v in loaded.items()}


# One line of the plain case: a key of word characters (YAML refuses a key over 1024
# characters; these stay far below), then ': ' and a value that YAML
# can only read as the same string, a decimal integer, true/false, or nothing (null).
# A string value starts with an ASCII letter (so it is no number, date or indicator)
# and holds no character YAML gives a meaning to inside a plain scalar of a block
# mapping: no '#' (a comment after a space), no tab, no ':' before a space or the end
# (a mapping: ``plain_mapping`` checks that), nothing from ``_NOT_PLAIN``. Indicators
# (quotes, brackets, '&', '*', '!', '|', '>', '%', '@', '`', '?', ...) only mean
# something at a scalar's start, so past the first letter they are text, as are
# printable non-ASCII characters (accents, dashes, emoji): what descriptions hold.
# One ASCII class plus one non-ASCII range: finer Unicode ranges made the match 2-6x
# slower, so the few non-ASCII characters YAML treats apart are refused afterwards.
_PLAIN_LINE = re.compile(
    r"([A-Za-z_][A-Za-z0-9_-]{0,199}):(?: +([A-Za-z][A-Za-z0-9 _.,/()+'\-;:!?&*%@=~\"\[\]{}|<>`^$"
    "\x80-\U0010ffff]*?|0|[1-9][0-9]*))? *"
)
# Non-ASCII YAML does not read as text: C1 controls (unprintable to YAML) and NEL,
# U+2028 and U+2029 (line breaks to YAML), surrogates, U+FFFE/U+FFFF, and the BOM.
_NOT_PLAIN = re.compile("[\x80-\x9f\u2028\u2029\ud800-\udfff\ufeff\ufffe\uffff]")
# Words YAML 1.1 reads as booleans or null in some spelling; only 'true' and 'false'
# are taken here (as YAML takes them), the rest go to the YAML parser.
_YAML_WORDS = frozenset(("yes", "no", "true", "false", "on", "off", "null"))


def plain_mapping(head: str) -> dict[str, object] | None:
    """The frontmatter ``head`` read without YAML when every line is blank or
    ``key: plain value``; None when any line needs the YAML parser."""
    if not head.isascii() and _NOT_PLAIN.search(head):
        return None
    out: dict[str, object] = {}
    for line in head.split("\n"):
        if not line:
            continue
        match = _PLAIN_LINE.fullmatch(line)
        if match is None:
            return None
        key, value = match.groups()
        if key.lower() in _YAML_WORDS:
            return None  # YAML reads such a key as a boolean or null
        if value is None:
            out[key] = None
        elif value[0] <= "9":
            out[key] = int(value)
        elif value.lower() in _YAML_WORDS:
            if value not in ("true", "false"):
                return None
            out[key] = value == "true"
        elif ": " in value or value[-1] == ":":
            return None  # a mapping inside the value: YAML refuses it
        else:
            out[key] = value
    return out


def _unreadable_value_line(head: str) -> int | None:
    """0-based line in ``head`` of the first scalar YAML can't construct, if any."""
    try:
        stack = [yaml.compose(head, Loader=yaml.SafeLoader)]
    except yaml.YAMLError:
        return None
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.ScalarNode):
            try:
                yaml.SafeLoader("").construct_object(node)
            except (yaml.YAMLError, ValueError, KeyError, TypeError, OverflowError):
                return int(node.start_mark.line)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
        elif isinstance(node, yaml.MappingNode):
            stack.extend(reversed([n for pair in node.value for n in pair]))
    return None


def metadata_text(value: Scalar) -> str:
    """The text a ``metadata.KEY=VALUE`` filter compares with (YAML spelling of scalars)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)

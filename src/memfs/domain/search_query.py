"""The memory:query language, parsed into terms and written as an FTS5 MATCH expression.

The language is small on purpose: plain words (all must match), ``"exact phrases"``,
``prefix*`` and ``-excluded`` (a word or a phrase). Nothing a user types reaches FTS5
as syntax: every term is written as an FTS5 string (``"..."``, quotes doubled), so
``NEAR``, ``OR``, ``col:``, parentheses or ``^`` are searched for as words, never obeyed.
Case, accents and English word endings are folded by the index's tokenizer
(``porter unicode61 remove_diacritics 2``), not here.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from memfs.errors import InvalidRequest

MAX_QUERY_BYTES = 1024


@dataclass(frozen=True)
class Term:
    """One word or phrase; ``prefix``: its last word matches any word it begins."""

    text: str
    phrase: bool = False
    prefix: bool = False

    def fts(self) -> str:
        quoted = '"' + self.text.replace('"', '""') + '"'
        return quoted + "*" if self.prefix else quoted


@dataclass(frozen=True)
class SearchQuery:
    include: tuple[Term, ...]  # every one must match
    exclude: tuple[Term, ...]  # none may match

    def match_expression(self) -> str:
        """The FTS5 MATCH text: ``("a" AND "b c") NOT ("d" OR "e"*)``."""
        wanted = " AND ".join(t.fts() for t in self.include)
        if not self.exclude:
            return wanted
        unwanted = " OR ".join(t.fts() for t in self.exclude)
        return f"({wanted}) NOT ({unwanted})"

    def canonical(self) -> str:
        """The query as a normalised text: what a page token is bound to."""
        return self.match_expression()


_NOT_WORD = re.compile(r"[\W_]+")


def words_of(text: str) -> list[str]:
    """The words of ``text`` as FTS5's unicode61 tokenizer cuts them: runs of letters
    and digits, every other character a separator (so "docs/api.md" is three words).
    An engine whose own parser keeps such runs whole (PostgreSQL reads a path, a URL or
    an e-mail address as one token) is given these words instead."""
    return _NOT_WORD.sub(" ", unicodedata.normalize("NFC", text)).split()


def _accent_table() -> dict[int, int]:
    """Each letter that is an ASCII letter plus combining marks (é, Å, ṩ …) mapped to
    that ASCII letter: what FTS5's ``remove_diacritics 2`` folds. Checked against FTS5
    over every letter of Unicode, where they differ only for Ǡ and ǡ, which FTS5 keeps
    (left out here too). One character to one, so a folded text keeps its length and
    a position in it is a position in the original (the PostgreSQL index's snippets)."""
    table: dict[int, int] = {}
    for point in range(0xC0, 0x10000):  # no such letter lies outside the BMP
        parts = unicodedata.normalize("NFD", chr(point))
        if (
            len(parts) > 1
            and parts[0].isascii()
            and all(unicodedata.combining(c) for c in parts[1:])
        ):
            table[point] = ord(parts[0])
    for kept in "Ǡǡ":
        del table[ord(kept)]
    return table


ACCENTS = _accent_table()


def fold_accents(text: str) -> str:
    """``text`` with its accented Latin letters folded as the SQLite index's tokenizer
    folds them (``é`` → ``e``), one character for one; everything else kept. An engine
    without that folding (PostgreSQL without the ``unaccent`` extension) is given its
    words folded, on the index path and the query path alike."""
    return text.translate(ACCENTS)


def parse_match(match: str) -> SearchQuery:
    """The query a ``SearchQuery.match_expression()`` was written from: how an engine
    without FTS5 reads the match expression the Index seam hands it. Only the quoted
    terms carry text (quotes doubled inside), so nothing in them is read as syntax."""
    include: list[Term] = []
    exclude: list[Term] = []
    negated = False
    i, n = 0, len(match)
    while i < n:
        if match.startswith(" NOT ", i):
            negated = True
            i += 5
            continue
        if match[i] != '"':
            i += 1
            continue
        parts: list[str] = []
        i += 1
        while i < n:
            if match[i] == '"':
                if match.startswith('""', i):
                    parts.append('"')
                    i += 2
                    continue
                i += 1
                break
            parts.append(match[i])
            i += 1
        prefix = i < n and match[i] == "*"
        text = "".join(parts)
        (exclude if negated else include).append(Term(text, " " in text, prefix))
    return SearchQuery(tuple(include), tuple(exclude))


def _searchable(text: str) -> bool:
    # unicode61 makes tokens of letters and numbers (and private-use characters); a
    # term without one (say "--" or "*") would be an empty FTS5 phrase: it is dropped.
    return any(c.isalnum() or unicodedata.category(c) == "Co" for c in text)


def parse_query(text: object, *, field: str = "query") -> SearchQuery:
    """Parse a user's query; InvalidRequest naming ``field`` when it is empty, longer
    than 1 KiB, has an unbalanced quote, or excludes without including anything."""
    if not isinstance(text, str):
        raise InvalidRequest("query must be a string", field=field)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate (JSON "\ud800") is no text
        raise InvalidRequest("query must be valid Unicode text", field=field) from None
    if size > MAX_QUERY_BYTES:
        raise InvalidRequest(f"query is longer than {MAX_QUERY_BYTES} bytes", field=field)
    if not text.strip():
        raise InvalidRequest("query must not be empty", field=field)
    if "\x00" in text:
        raise InvalidRequest("query must not contain NUL characters", field=field)
    if text.count('"') % 2:
        raise InvalidRequest(
            'query has an unbalanced quote: close each "exact phrase"', field=field
        )
    text = unicodedata.normalize("NFC", text)
    include: list[Term] = []
    exclude: list[Term] = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        negated = text[i] == "-"
        if negated:
            i += 1
        if i < n and text[i] == '"':
            end = text.index('"', i + 1)  # balanced: there is a closing quote
            body, phrase = text[i + 1 : end], True
            i = end + 1
            prefix = i < n and text[i] == "*"
            while i < n and text[i] == "*":
                i += 1
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] != '"':
                i += 1
            body, phrase = text[start:i], False
            prefix = body.endswith("*")
            body = body.rstrip("*")
        if not _searchable(body):
            continue
        term = Term(" ".join(body.split()), phrase=phrase, prefix=prefix)
        (exclude if negated else include).append(term)
    if not include:
        if exclude:
            raise InvalidRequest(
                "query only excludes: add at least one word to search for", field=field
            )
        raise InvalidRequest("query has no word to search for", field=field)
    return SearchQuery(tuple(include), tuple(exclude))

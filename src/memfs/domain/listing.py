"""A memory as listings show it: the one definition of the listing shape.

The index keeps it as JSON text in each live row (so a page is its rows' texts joined),
``--json`` prints it, HTTP pages carry it; all build it here.
"""

from __future__ import annotations

from typing import Any

from memfs.domain.commits import format_ts
from memfs.domain.shapes import LISTING


def listing_fields(
    path: str, size: int, sha256: str, description: str | None, version: int, updated_at: int
) -> dict[str, Any]:
    return LISTING.build(path, size, sha256, description, version, format_ts(updated_at))

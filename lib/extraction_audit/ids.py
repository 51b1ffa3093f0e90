"""Run and corpus ids: validated once where they enter, then only ever used as data.

Filters are Column expressions (``F.col("run_id") == run_id``).  Delta's writer options
(``replaceWhere``), MERGE conditions and the report's named SQL (``spark.sql(args=...)``
fails under the Delta extension) take SQL *text*; ``id_literal`` is the one place that
renders an id into SQL, and only a value that passed ``validate_id``: the pattern admits
no quote, backslash, space or comment marker, so the literal cannot end early.
"""

from __future__ import annotations

import re

from .errors import UserFacingError

ID_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
ID_RULE = "1-128 characters: letters, digits and . _ : - (starting with a letter or digit)"
_ID = re.compile(ID_PATTERN)
_COLUMN = re.compile(r"(?:[a-z]\.)?[a-z_][a-z0-9_]*")


def validate_id(value, what: str = "run id") -> str:
    """Return ``value`` when it is a legal id, else raise a one-line error naming it."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        shown = repr(value) if not isinstance(value, str) or len(value) <= 60 else repr(value[:60]) + "..."
        raise UserFacingError(f"{what} {shown} is not valid: use {ID_RULE}")
    return value


def is_valid_id(value) -> bool:
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def id_literal(value, what: str = "run id") -> str:
    """A validated id as a SQL string literal (the pattern leaves nothing to escape)."""
    return "'" + validate_id(value, what) + "'"


def id_predicate(column: str, value: str, what: str = "run id") -> str:
    """``column = 'value'`` for Delta options that only take SQL text (replaceWhere, MERGE
    conditions).  ``column`` is a name from our code (optionally ``t.``-qualified)."""
    if not _COLUMN.fullmatch(column):
        raise ValueError(f"not a column name: {column!r}")
    return f"{column} = {id_literal(value, what)}"

"""`tracelake query` is for reading: the statement's words decide, before the engine sees it.

Spark SQL executes DELETE, INSERT OVERWRITE, MERGE, DROP … on Delta tables as readily as a SELECT,
and a CTE may front a write (`WITH t AS (…) INSERT …`). So a statement is accepted only when its
first keyword reads (SELECT, WITH, SHOW, …) and no write keyword appears outside quotes and
comments; several statements at once are refused too.
"""

from __future__ import annotations

import re

from tracelake.errors import TracelakeError

READ_FIRST = {"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "VALUES", "TABLE", "FROM"}
WRITES = {"INSERT", "DELETE", "UPDATE", "MERGE", "DROP", "CREATE", "ALTER", "TRUNCATE", "OVERWRITE",
          "REPAIR", "MSCK", "VACUUM", "OPTIMIZE", "RESTORE", "LOAD", "REFRESH", "CACHE", "UNCACHE"}
_QUOTED_OR_COMMENT = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`|--[^\n]*|/\*.*?\*/", re.S)


def _words_and_separators(sql: str) -> tuple[list[str], bool]:
    """The statement's bare words (upper case) and whether a `;` separates two statements."""
    bare = _QUOTED_OR_COMMENT.sub(" ", sql)
    several = bool(re.search(r";\s*\S", bare))
    return re.findall(r"[A-Za-z_]+", bare.upper()), several


def check_read_only(sql: str) -> None:
    """Raise a one-line TracelakeError (exit 2) unless `sql` is one statement that only reads."""
    words, several = _words_and_separators(sql)
    if not words:
        raise TracelakeError("query: empty statement")
    if several:
        raise TracelakeError("query runs one statement at a time; send each separately")
    writes = [w for w in words if w in WRITES]
    if words[0] not in READ_FIRST or writes:
        verb = writes[0] if writes else words[0]
        raise TracelakeError(
            f"query is read-only: {verb} statements are refused "
            "(tables change only through `tracelake ingest` and `tracelake maintain`)"
        )

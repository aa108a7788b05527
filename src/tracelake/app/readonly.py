"""`tracelake query` is for reading: the statement's words decide, before the engine sees it.

Spark SQL executes DELETE, INSERT OVERWRITE, MERGE, DROP … on Delta tables as readily as a SELECT,
and a CTE may front a write (`WITH t AS (…) INSERT …`). So a statement is accepted only when its
first keyword reads (SELECT, WITH, SHOW, …) and no write keyword appears outside quotes and
comments; several statements at once are refused too.

Where a quote or comment ends is where engines differ: Spark's r'…' takes no backslash escape,
its `--` comment goes on past a backslash-newline and its /*+ … */ is a hint (code); Sail reads
$tag$…$tag$ strings and may read '''…'''. A wrong guess hides words from the guard (`r'\\'`
would swallow what follows), so the statement is read under every combination of these rules and
refused when any reading shows a write. Nested /* */ comments, where Spark and Sail disagree on
the end, are refused outright.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from tracelake.errors import TracelakeError

READ_FIRST = {"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "VALUES", "TABLE", "FROM"}
WRITES = {"INSERT", "DELETE", "UPDATE", "MERGE", "DROP", "CREATE", "ALTER", "TRUNCATE", "OVERWRITE",
          "REPAIR", "MSCK", "VACUUM", "OPTIMIZE", "RESTORE", "LOAD", "REFRESH", "CACHE", "UNCACHE"}
_STARTS = re.compile(r"--|/\*|['\"`$]|(?<!\w)[rR](?=['\"])")  # where a quote or comment may begin
_LINE_END = re.compile(r"[\r\n]")


@dataclass(frozen=True)
class Lexer:
    """One way to read quotes and comments; the defaults are Spark's."""

    backslash: bool = True  # \ escapes the next character in '…' and "…"
    raw: bool = True  # r'…' / R"…" take no escape (Spark)
    continued: bool = True  # a -- comment goes on past a backslash-newline (Spark)
    hint_is_comment: bool = False  # /*+ … */ is a comment (Sail), not a hint's code (Spark)
    dollar: bool = False  # $tag$…$tag$ strings (Sail)
    triple: bool = False  # triple-quoted strings, '''…''' (Sail, as an option)


SPARK = Lexer()
LEXERS = (SPARK, *(lx for lx in itertools.starmap(Lexer, itertools.product((True, False), repeat=6)) if lx != SPARK))


def _closed_by(sql: str, start: int, closer: str) -> int:
    """Just past the first `closer` from `start`; the end of the text when it never comes."""
    end = sql.find(closer, start)
    return len(sql) if end < 0 else end + len(closer)


def _quoted_end(sql: str, start: int, quote: str, backslash: bool) -> int:
    i = start
    while i < len(sql):
        if sql[i] == quote:
            return i + 1
        i += 2 if backslash and sql[i] == "\\" else 1
    return len(sql)


def _line_comment_end(sql: str, start: int, continued: bool) -> int:
    while match := _LINE_END.search(sql, start):
        if not (continued and match.group() == "\n" and sql[match.start() - 1] == "\\"):
            return match.start()
        start = match.end()
    return len(sql)


def _block_comment_end(sql: str, start: int) -> int:
    """A /* */ comment ends at the first */; one with /* inside (or opening /*/) is refused,
    as engines that nest comments end it elsewhere."""
    end = _closed_by(sql, start + 2, "*/")
    body = sql[start + 2:end]
    if "/*" in body or body.startswith("/"):
        raise TracelakeError("query: nested /* */ comments are refused (engines disagree where they end)")
    return end


def _dollar_end(sql: str, start: int) -> int | None:
    """$tag$…$tag$; None when the tag never closes (then `$` is a plain character)."""
    tag_end = sql.find("$", start + 1)
    if tag_end < 0:
        return None
    tag = sql[start:tag_end + 1]
    end = sql.find(tag, tag_end + 1)
    return None if end < 0 else end + len(tag)


def _skip(sql: str, i: int, lx: Lexer) -> int | None:
    """The end of the string, quoted name or comment that starts at `i`; None if none does."""
    head = sql[i:i + 3]
    if head.startswith("--"):
        return _line_comment_end(sql, i + 2, lx.continued)
    if head.startswith("/*"):
        return None if head == "/*+" and not lx.hint_is_comment else _block_comment_end(sql, i)
    if lx.triple and head in ("'''", '"""') and sql.find(head, i + 3) >= 0:
        return _closed_by(sql, i + 3, head)
    if head[0] in "'\"":
        return _quoted_end(sql, i + 1, head[0], lx.backslash)
    if head[0] == "`":
        return _closed_by(sql, i + 1, "`")
    if head[0] == "$":
        return _dollar_end(sql, i) if lx.dollar else None
    return _closed_by(sql, i + 2, head[1]) if lx.raw else None  # r'…' (_STARTS stops only there)


def _bare(sql: str, lx: Lexer) -> str:
    """`sql` with its strings, quoted names and comments blanked, as `lx` reads them."""
    parts, i = [], 0
    while match := _STARTS.search(sql, i):
        end = _skip(sql, match.start(), lx)
        parts.append(sql[i:match.start()] + " " if end is not None else sql[i:match.start() + 1])
        i = end if end is not None else match.start() + 1
    parts.append(sql[i:])
    return "".join(parts)


def _words_and_separators(bare: str) -> tuple[list[str], bool]:
    """The bare words (upper case) and whether a `;` separates two statements."""
    return re.findall(r"[A-Za-z_]+", bare.upper()), bool(re.search(r";\s*\S", bare))


def _refused_verb(words: list[str]) -> str | None:
    """The word that makes a statement a write (or not a read); None for a read."""
    writes = [w for w in words if w in WRITES]
    if writes:
        return writes[0]
    return words[0] if words and words[0] not in READ_FIRST else None


def check_read_only(sql: str) -> None:
    """Raise a one-line TracelakeError (exit 2) unless `sql` is one statement that only reads,
    however an engine reads its quotes and comments."""
    readings = [_words_and_separators(_bare(sql, lx)) for lx in LEXERS]  # Spark's first
    if not readings[0][0]:
        raise TracelakeError("query: empty statement")
    if any(several for _, several in readings):
        raise TracelakeError("query runs one statement at a time; send each separately")
    for words, _ in readings:
        verb = _refused_verb(words)
        if verb:
            raise TracelakeError(
                f"query is read-only: {verb} statements are refused "
                "(tables change only through `tracelake ingest` and `tracelake maintain`)"
            )

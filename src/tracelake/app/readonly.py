"""`tracelake query` is for reading: the statement's words decide, before the engine sees it.

Spark SQL executes DELETE, INSERT OVERWRITE, MERGE, DROP … on Delta tables as readily as a SELECT,
and a CTE may front a write (`WITH t AS (…) INSERT …`). So a statement is accepted only when its
first keyword reads (SELECT, WITH, SHOW, …) and no write keyword appears outside quotes and
comments; several statements at once are refused too. It reads the lake's tables by name and
nothing else: a source addressed by its path (``text.`/etc/passwd` ``, ``delta.`<another lake>` ``),
a file-reading table function, or IDENTIFIER(…) (a name in a string) is refused, the name quoted.

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

from tracelake.errors import TracelakeError, printable

READ_FIRST = {"SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "VALUES", "TABLE", "FROM"}
WRITES = {"INSERT", "DELETE", "UPDATE", "MERGE", "DROP", "CREATE", "ALTER", "TRUNCATE", "OVERWRITE",
          "REPAIR", "MSCK", "VACUUM", "OPTIMIZE", "RESTORE", "LOAD", "REFRESH", "CACHE", "UNCACHE"}
# words that begin a statement in Spark or Sail besides READ_FIRST and WRITES: a statement led by
# one of these is refused as not a read, never handed to the engine
OTHER_STATEMENTS = {
    "SET", "RESET", "USE", "ADD", "LIST", "GRANT", "REVOKE", "COMMENT", "CALL", "EXECUTE", "DECLARE",
    "CLEAR", "ANALYZE", "COPY", "REPLACE", "CONVERT", "GENERATE", "UNSET", "CLONE", "UNDROP", "RENAME",
    "KILL", "START", "COMMIT", "ROLLBACK", "BEGIN", "END", "FSCK", "SYNC", "PUT", "GET", "REMOVE",
    "LOCK", "UNLOCK", "PREPARE", "DEALLOCATE", "DISCARD", "ATTACH", "DETACH", "INSTALL", "LOAD",
    "PRAGMA", "CHECKPOINT", "UPSERT", "REINDEX", "IF", "WHILE", "FOR", "LOOP", "REPEAT", "CASE",
    "LEAVE", "ITERATE", "SIGNAL", "RESIGNAL", "DROP", "MAP", "REDUCE",
}
TYPO_DISTANCE = 2  # edits between a first word and a read keyword that make it a typo of one
# data sources Spark or Sail read a path with, as `format.`path``: the qualifier alone is refused
FILE_FORMATS = {"text", "csv", "json", "parquet", "orc", "avro", "delta", "binaryfile", "iceberg", "hudi",
                "xml", "arrow", "jdbc", "lance", "python", "console", "noop", "rate", "socket", "kafka",
                "libsvm", "image", "file", "files"}
# table functions that read files (read_files, read_csv, …), call Java (classic Spark), or take a
# name as a string the guard cannot read
FILE_FUNCTIONS = re.compile(r"\b(read_\w+|cloud_files|reflect|try_reflect|java_method|identifier)\s*\(", re.I)
_PART = r"(?:[A-Za-z_]\w*|`\d+`)"
DOTTED = re.compile(rf"(?<![\w`.]){_PART}(?:\s*\.\s*{_PART})+")  # a dotted name, all its parts
PATH_LIKE = re.compile(r"[/\\:~]|^\.")
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


def _bare(sql: str, lx: Lexer, names: list[str] | None = None) -> str:
    """`sql` with its strings, quoted names and comments blanked, as `lx` reads them; with
    `names`, a `quoted name` becomes `<n>` instead (its n-th item: the name without quotes)."""
    parts, i = [], 0
    while match := _STARTS.search(sql, i):
        start = match.start()
        end = _skip(sql, start, lx)
        if end is None:
            parts.append(sql[i:start + 1])
        elif names is not None and sql[start] == "`":
            parts.append(f"{sql[i:start]} `{len(names)}` ")
            names.append(sql[start + 1:end - 1] if end > start + 1 and sql[end - 1] == "`" else sql[start + 1:end])
        else:
            parts.append(sql[i:start] + " ")
        i = end if end is not None else start + 1
    parts.append(sql[i:])
    return "".join(parts)


def split_statements(text: str) -> list[str]:
    """`text` cut at each `;` outside Spark's quotes and comments, the pieces stripped, empty
    ones (or only a comment) left out. Each piece still passes `check_read_only` under every lexer on its own."""
    pieces, start, i = [], 0, 0
    while i < len(text):
        if text[i] == ";":
            pieces.append(text[start:i])
            start = i + 1
            i += 1
            continue
        end = _skip(text, i, SPARK) if _STARTS.match(text, i) else None
        i = end if end is not None else i + 1
    pieces.append(text[start:])
    return [p.strip() for p in pieces if _bare(p, SPARK).strip()]


def spark_reading(sql: str) -> tuple[str, list[str]]:
    """The statement as Spark reads it: strings and comments blanked, quoted names as `<n>`
    placeholders into the list of names (for matching a statement's shape)."""
    names: list[str] = []
    return _bare(sql, SPARK, names), names


def _words_and_separators(bare: str) -> tuple[list[str], bool]:
    """The bare words (upper case) and whether a `;` separates two statements."""
    return re.findall(r"[A-Za-z_]+", bare.upper()), bool(re.search(r";\s*\S", bare))


def _refused_verb(words: list[str]) -> str | None:
    """The word that makes a statement a write (or not a read); None for a read."""
    ddl = words[:3] == ["SHOW", "CREATE", "TABLE"]  # prints a table's DDL: a read
    writes = [w for w in words[3 if ddl else 0:] if w in WRITES]
    if writes:
        return writes[0]
    return words[0] if words and words[0] not in READ_FIRST else None


def _name(part: str, names: list[str]) -> str:
    """A part of a dotted name as written: a placeholder back in its backticks."""
    return f"`{names[int(part[1:-1])]}`" if part.startswith("`") else part


def _unquoted(part: str, names: list[str]) -> str:
    return names[int(part[1:-1])] if part.startswith("`") else part


def _file_read(sql: str, lx: Lexer) -> str | None:
    """What in `sql`, as `lx` reads it, reads something other than a lake table by name: a
    source addressed by its path (`csv.`/etc/passwd``, `delta.`<another lake>``, a format before
    any name), a file-reading table function, IDENTIFIER(…), whose string the guard cannot see
    into; None when there is none."""
    names: list[str] = []
    bare = _bare(sql, lx, names)
    for chain in DOTTED.finditer(bare):
        parts = re.split(r"\s*\.\s*", chain.group())
        for qualifier, target in zip(parts, parts[1:]):
            plain = _unquoted(qualifier, names).lower()
            if plain in FILE_FORMATS or (target.startswith("`") and PATH_LIKE.search(_unquoted(target, names))):
                return f"{_name(qualifier, names)}.{_name(target, names)}"
    if call := FILE_FUNCTIONS.search(bare):
        return f"{call.group(1)}(…)"
    return None


class NotAStatement(TracelakeError):
    """The statement's first word is a misspelt read keyword (`SELEC`), no statement's word: the
    engine's parser is the one to say what is wrong (`word` is safe to hand it: a parser
    rejects it at its first token)."""

    def __init__(self, word: str) -> None:
        super().__init__(f"query failed: {word} begins no statement")
        self.word = word


def _edits(a: str, b: str) -> int:
    """Insertions, deletions, substitutions and swaps of neighbours from `a` to `b`."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def _misspelt_read(word: str) -> bool:
    """A word that begins no statement we know of but is a few edits from a read keyword."""
    return (word.isalpha() and word not in READ_FIRST | WRITES | OTHER_STATEMENTS
            and any(_edits(word, read) <= TYPO_DISTANCE for read in READ_FIRST if len(read) > TYPO_DISTANCE))


def check_read_only(sql: str) -> None:
    """Raise a one-line TracelakeError (exit 2) unless `sql` is one statement that only reads,
    however an engine reads its quotes and comments."""
    readings = [_words_and_separators(_bare(sql, lx)) for lx in LEXERS]  # Spark's first
    if not readings[0][0]:
        raise TracelakeError("query: empty statement")
    if any(several for _, several in readings):
        raise TracelakeError("query runs one statement at a time; send each separately")
    verbs = [_refused_verb(words) for words, _ in readings]
    if all(verb and verb == words[0] and _misspelt_read(verb) for verb, (words, _) in zip(verbs, readings)):
        raise NotAStatement(verbs[0])
    for verb in verbs:
        if verb:
            raise TracelakeError(
                f"query is read-only: {verb} statements are refused "
                "(tables change only through `tracelake ingest` and `tracelake maintain`)"
            )
    for lx in LEXERS:
        if refused := _file_read(sql, lx):
            raise TracelakeError(
                f"query reads the lake's tables (layer.table) only: {printable(refused)} is refused "
                "(files and other lakes are not read through query)"
            )

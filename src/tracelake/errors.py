"""One exception type for problems a user can fix; the CLI prints it as one line."""

import re


class TracelakeError(Exception):
    """A user-facing error: bad input, bad config, a missing engine piece."""

    exit_code = 2


class HourNotThere(TracelakeError):
    """An hour asked for by name has no folder (yet): a scheduler skips or retries it, where any
    other bad input fails at once, so it has its own exit code."""

    exit_code = 4


class QualityGateFailed(TracelakeError):
    """A critical expectation failed; nothing was committed to the target table."""

    exit_code = 3


# control characters, line and paragraph separators, and the marks that reorder text on screen
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with every character that could break or disguise a one-line message (a newline
    or NUL in a file name, an escape sequence in a file's first line) written as its escape."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def first_line(exc: BaseException) -> str:
    """The first line of an error's text (its type's name when it has none): what a one-line
    message can quote of an error raised below us."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

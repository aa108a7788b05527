"""One exception type for problems a user can fix; the CLI prints it as one line."""


class TracelakeError(Exception):
    """A user-facing error: bad input, bad config, a missing engine piece."""

    exit_code = 2


class QualityGateFailed(TracelakeError):
    """A critical expectation failed; nothing was committed to the target table."""

    exit_code = 3

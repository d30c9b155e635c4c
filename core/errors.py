"""The one exception root: every error a user can cause derives from `WorkerTierError`.

Both CLIs catch it and print one `error: …` line; anything else is a bug and keeps its
traceback. Each package names its own branch (`serve.errors.ServeError`,
`replay.errors.ReplayError`) so a caller can catch one half's errors without the other's.
"""


class WorkerTierError(Exception):
    """An error the user can fix: bad input, a bad config, a missing file, an engine that is down."""

"""The replay half's branch of the exception root: catch `ReplayError` for any error a user of
`worker-replay` can cause (bad suites, run configs, results, policies, memory files, ledger input)."""

from core.errors import WorkerTierError


class ReplayError(WorkerTierError):
    """A replay-side error the user can fix; the message names the file and line where there is one."""

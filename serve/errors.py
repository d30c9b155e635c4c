"""The serving half's branch of the exception root: catch `ServeError` for any error a user of
`worker-serve` (or of the gateway's admin API) can cause.

HTTP errors the gateway answers with are a different thing: `serve.gateway.errors.GatewayError`.
"""

from core.errors import WorkerTierError


class ServeError(WorkerTierError):
    """A serving-side error the user can fix: a bad adapter, a failed build, an engine that refused."""

"""The gateway's HTTP endpoints: one FastAPI `APIRouter` per feature, included by `serve.app.create_app`.

(Not `routes`: a route is a model route of the registry, `/admin/routes/{route}`; nor `routing.py`, which
picks a request's version and replica.) A handler reaches the running gateway through
`dependencies.GatewayDep` (`app.state.gateway`), never a global, so a new endpoint family is one new module
here plus one line in `serve/app.py`.

- `openai.py`: `POST /v1/chat/completions`, `POST /v1/completions`, `POST /v1/responses`, `GET /v1/models`
- `anthropic.py`: `POST /v1/messages`, `POST /v1/messages/count_tokens`
- `monitoring.py`: `GET /health`, `GET /metrics`, `GET /version`
- `admin.py`: `/admin/...` (the admin API; its table of calls is there)
- `bodies.py`: the OpenAPI shapes the API families share, and `declare_forwarded`: a forwarded API's route
  declared from its shape
- `dependencies.py`: `GatewayDep`: the running gateway, for a handler

The trials' admin endpoints (`/admin/trials/...`) are `serve/trials/admin_routes.py`: they read the trials, which
sit above the gateway.
"""

"""The APIs the gateway serves, one module each over the shared forwarder (serve/gateway/proxy.py).

- `base.py`: what the forwarder needs of an API, and the neutral reading of a request and its answer
- `chat.py`: OpenAI Chat Completions and Completions
- `messages.py`: Anthropic Messages and count_tokens
- `responses.py`: OpenAI Responses
"""

from __future__ import annotations

from serve.gateway.apis.base import Api, ApiName
from serve.gateway.apis.chat import ChatApi, CompletionsApi
from serve.gateway.apis.messages import CountTokensApi, MessagesApi
from serve.gateway.apis.responses import ResponsesApi

APIS: dict[ApiName, Api] = {api.name: api for api in (ChatApi(), CompletionsApi(), MessagesApi(), CountTokensApi(),
                                                     ResponsesApi())}
"""Every API by name (the `api` label of the metrics, the request log's endpoint, a capture row's `api`)."""


def api_for_path(path: str) -> Api:
    """The API whose shape a response to `path` takes (OpenAI's for any path that is no other API's)."""
    return next((api for api in APIS.values() if api.path == path), APIS["chat"])

"""The OpenAI-compatible gateway: routing, adapter registry, admin API, shadow, upstreams, metrics."""

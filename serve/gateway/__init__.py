"""The OpenAI-compatible gateway: routing, adapter registry, admin API, shadow, upstreams, metrics.

- `apis/`: one module per API the gateway serves (chat, Messages, Responses), over a neutral reading
- `proxy.py`: the shared forwarder every API goes through
- `service.py`: the running gateway: registry, upstreams, metrics, shadow, and the loop that keeps engines in line
- `config.py`: the gateway's TOML config
- `edge.py`: what the gateway refuses at its edge: bodies that are not text, headers that should be names
- `routing.py`: which version answers a request and which replica serves it (pure)
- `registry.py`: the durable state in SQLite: versions, routes, canaries, shadows, the request log
- `endpoints/`: the HTTP endpoints, one FastAPI router per feature (OpenAI, Anthropic, monitoring, admin)
- `shadow.py`: shadow trials: production requests re-sent to a candidate and graded
- `upstreams.py`: the vLLM replicas: one HTTP pool, health probes, adapter load and unload
- `base_lineage.py`: the base model's lineage the gateway states on `/v1/models` and in admin state
- `capture.py`: capture of live decisions and the tool-outcome guard's counting
- `keys.py`: client keys: the keys file, who may call and for which workspace
- `tenancy.py`: who a request is and whether it may run now
- `fairshare.py`: each tenant's fair share of the engine (pure bookkeeping)
- `prefixcache.py`: whose KV-cache blocks a request may reuse (the `cache_salt`)
- `metrics.py`: the Prometheus metrics of one gateway app
- `gpu.py`: GPU series from NVML, read at scrape time
- `errors.py`: `GatewayError`, in the shape each API gives it
"""

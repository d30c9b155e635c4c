"""Serving half of worker-tier: the vLLM engine launcher and the OpenAI-compatible gateway.

Inside, the arrows go `engine` ← `gateway` ← `trials`, and `app.py` wires the gateway and its trials together.

- `engine/`: the engine and its artefacts: launcher, embedded model, LoRA adapters, training, quantisation
- `gateway/`: the running gateway: APIs, routing, registry, admin, shadow, capture, tenancy, metrics
- `trials/`: progressive adapter trials: the sequential test, the state machine, its store and controller
- `app.py`: the gateway's FastAPI app, the composition root of `worker-serve gateway`
- `cli/`: `worker-serve`, one module per command group (model, adapter, engine, gateway, keys, evidence, trial)
- `admin_client.py`: the admin API's client, for `adapter` and `trial`
- `evidence_export.py`: production-gate evidence from the gateway's stores (`worker-serve evidence`)
- `errors.py`: `ServeError`, the serving branch of the exception root
- `__main__.py`: `python -m serve`
"""

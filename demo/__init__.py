"""The demo, on top of both halves: synthetic workspaces and suite, trained demo adapters, the full run.

- `cli.py`: `worker-demo`
- `run.py`: `worker-demo run`: the memory-arm replay beside the sandbox, compare, gates, lessons, report
- `serving.py`: the services every demo command starts (engine, gateway, its adapters), its output and progress
- `demo_data.py`: the deterministic demo: a frozen suite, a disjoint training split, workspace memory
- `scenarios/`: the demo workspaces' decision situations, one module per workspace
- `worlds/`: the demo workspaces as sandbox worlds, one module per workspace
- `tools.py`: the suite's tool schemas, generated from the worlds
- `scenario_pack.py`: the demo scenario pack (42 scenarios)
- `memory.py`: the demo workspaces' memory, with the truth about each rule
- `rule_claims.py`: what each demo rule says the next call should be, for rule uptake
- `trained_adapters.py`: the two trained demo adapters, built once and cached
- `instrument.py`: a short planted calibration on the demo's own suite
- `deferred.py`: `worker-demo deferred`: the deferred-replay loop
- `agent.py`: `worker-demo agent`: one Claude Agent SDK session through the gateway, replayed
- `loop.py`: `worker-demo loop`: the slow loop closed on CPU, from a failure to a verdict
- `loop_world.py`: the slow loop's sandbox world: an invoice lookup with a failure planted
- `gpucheck/`: the GPU path proven in one command (`scripts/gpu_check.sh`)
- `__main__.py`: `python -m demo`
"""

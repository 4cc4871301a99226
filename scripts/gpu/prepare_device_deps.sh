#!/usr/bin/env bash
# Copies what the GPU machine lacks (it cannot install anything) into .device_deps/ (git-ignored,
# carried with `run`): CLI11, nlohmann-json and xxHash headers, cuDNN frontend headers, the peer script.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .device_deps/include .device_deps/cudnn_frontend
cp -r /usr/include/CLI /usr/include/nlohmann /usr/include/xxhash.h .device_deps/include/
site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
cp -r "$site/include" .device_deps/cudnn_frontend/
[ -f ../shared/bench/peers.py ] && cp ../shared/bench/peers.py .device_deps/
grep -qx '/.device_deps/' .git/info/exclude 2>/dev/null || echo '/.device_deps/' >> .git/info/exclude
du -sh .device_deps

#!/usr/bin/env bash
# Packs what `validate_and_bench.sh triton` needs on the GPU machine, which cannot install it, into
# .device_deps/triton/ (carried with .device_deps): the tritonserver binary of the installed
# nvidia-pytriton (scripts/install_deps.sh) with only the libraries it links (libpython and the
# Python backend left out: ~26 MB as tar.xz, against 55 MB for the wheel), and the tritonclient and
# python-rapidjson wheels for the device's Python (DEVICE_PYTHON, default 3.12; grpcio, protobuf and
# numpy are there; the HTTP client's gevent stack is not carried, so the step runs gRPC only).
# With the kiln bundle (~20 MB) .device_deps stays under the 64 MiB a call may carry.
set -euo pipefail
cd "$(dirname "$0")/../.."
pkg=$(python3 -c "import importlib.util as u; print(list(u.find_spec('pytriton').submodule_search_locations)[0])")
root=$(dirname "$pkg")
T=$(mktemp -d)
mkdir -p "$T/pytriton/tritonserver" "$T/nvidia_pytriton.libs"
cp -r "$pkg/tritonserver/bin" "$T/pytriton/tritonserver/"
# The binary's RPATH is $ORIGIN/../../../nvidia_pytriton.libs: keep that layout.
ldd "$pkg/tritonserver/bin/tritonserver" | awk '/nvidia_pytriton.libs/ {print $3}' | while read -r lib; do
  cp "$lib" "$T/nvidia_pytriton.libs/"
done
test -f "$T/nvidia_pytriton.libs/$(basename "$(ls "$root"/nvidia_pytriton.libs/libtritonserver-*.so)")"
mkdir -p .device_deps/triton
rm -f .device_deps/triton/*
tar -C "$T" -cf - . | xz -T0 -6 > .device_deps/triton/tritonserver.tar.xz
rm -rf "$T"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "${DEVICE_PYTHON:-3.12}" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d .device_deps/triton tritonclient==2.73.0 python-rapidjson
exclude=$(git rev-parse --git-path info/exclude)  # worktrees share the main checkout's
grep -qx '/.device_deps/' "$exclude" 2>/dev/null || echo '/.device_deps/' >> "$exclude"
du -sh .device_deps/triton; du -sh .device_deps

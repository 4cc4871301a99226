#!/usr/bin/env bash
# Packs a build made here (with oneDNN) and the libraries the GPU machine lacks into
# .device_deps/bundle.tar.xz, so that the GPU machine runs it without building.
# Usage: scripts/gpu/make_bundle.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
T=$(mktemp -d)
mkdir -p "$T/bin" "$T/lib"
cp "$B"/bin/kiln "$B"/bin/kiln_unit_tests "$B"/bin/kiln_conformance "$T/bin/"
cp -a "$B"/lib/libkiln*.so* "$T/lib/"  # the versioned library and its SONAME link
mkdir -p "$T/include/kiln" && cp "$B"/generated/include/kiln/version.h "$T/include/kiln/"
# The Triton backend (KILN_WITH_TRITON), in the layout --backend-directory expects.
if [ -f "$B"/triton_backends/kiln/libtriton_kiln.so ]; then
  mkdir -p "$T/triton_backends/kiln" && cp "$B"/triton_backends/kiln/libtriton_kiln.so "$T/triton_backends/kiln/"
fi
for l in libdnnl.so.2 libprotobuf.so.32 libgomp.so.1 libOpenCL.so.1; do
  cp -L "/usr/lib/x86_64-linux-gnu/$l" "$T/lib/" 2>/dev/null || cp -L "/lib/x86_64-linux-gnu/$l" "$T/lib/"
done
mkdir -p .device_deps
tar -C "$T" -cJf .device_deps/bundle.tar.xz .
rm -rf "$T"
ls -la .device_deps/bundle.tar.xz

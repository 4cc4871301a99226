#!/usr/bin/env bash
# One GPU-machine session: unpack the bundle (scripts/gpu/make_bundle.sh), then run the steps
# named in STEPS (comma list; default all but conformance):
#   unit        GPU unit tests (Cuda*, Plugins*, PassAttention*)
#   plugins     the plugin examples end to end on the GPU
#   models      model tests against ONNX Runtime on the GPU (FP32, no TF32)
#   zoo         real exports of models outside the benchmark set (tests/models/zoo_check.py):
#               kiln FP32 vs ONNX Runtime at 1e-3, FP16 and BF16 error, dynamic-batch profiles -> zoo_gpu.log
#   python      the Python module built here (GIL checks on) and tests/python/test_python_api.py,
#               test_python_interop.py, test_torch_compile.py on the GPU; bench/python_overhead.py
#   fuzz        200 random graphs per generator, one per core at a time, on the GPU vs ONNX Runtime (tests/fuzz)
#   conformance the ONNX node tests on the GPU
#   triton      the Triton backend (bundle's triton_backends/) in tritonserver with KIND_GPU instances,
#               tests/triton/test_triton_server.py --device gpu over gRPC; needs .device_deps/triton/
#               from scripts/gpu/pack_triton.sh (not in `tests`: it is carried separately)
#   tritonbench bench/triton_bench.py: ResNet-50 and BERT-base FP16 plans at batch $TRITON_BATCH (32)
#               through tritonserver (1 and 2 instances) against the CLI -> triton_bench.md
#               (TRITON_BENCH_SECONDS per run, default 10; TRITON_BENCH_DEVICE=cpu tries it without a GPU)
#   bench       bench/gpu_bench.py side by side with peers.py --modes compile_half_frozen (--peer-mode)
#   perfzoo     bench/zoo.py: the GPU perf zoo (bench/zoo_models.py) against compile_half_frozen, the
#               models in $PERFZOO_MODELS (default all; ~1 min per model), rows merged into
#               bench/results/gpu-zoo-$GPU_TAG.jsonl's -> $OUT/gpu-zoo-$GPU_TAG.{jsonl,md}
#               (PERFZOO_ARGS: more zoo.py flags, e.g. "--profile", "--memory" (PyTorch's activation peaks
#               beside the arena, issue 19) or "--kiln-only --batches 128")
#   dynzoo      bench/zoo_dynamic.py: dynamic-axis exports of zoo models ($DYNZOO_MODELS) against
#               fixed-shape exports, kiln vs kiln (issue 23), rows merged into
#               bench/results/gpu-zoo-dynamic-$GPU_TAG.jsonl's -> $OUT/gpu-zoo-dynamic-$GPU_TAG.{jsonl,md}
#               (DYNZOO_ARGS=--profile: per-op time of both engines at the opt shape)
#   profile     per-layer profiles of the benchmark engines named in $PROFILE (default
#               resnet50_b32,bert_base_s128_b32; run after bench) -> profile.txt
#   streams     throughput of the benchmark engines in $STREAMS_ROWS (default resnet50_b32) with
#               --streams=1,2,4 (run after bench; with data transfers) -> streams.txt
#   sanitizer   compute-sanitizer over the GPU unit suites ($SANITIZER_SUITES, default every Cuda*
#               suite; memcheck, and racecheck on the suites with shared-memory kernels) and memcheck
#               over CLI runs of the model tests' engines ($SANITIZER_MODELS, default mlp,mobilenetv2,bert)
#               -> sanitizer.log; a suite that outruns SANITIZER_TIMEOUT (s, default 240) is reported, not failed;
#               SANITIZER_RACECHECK_ARGS: more racecheck options, e.g. a kernel filter that leaves out cuDNN's
#               generated kernels (on the H100 racecheck reported hazards inside cuDNN's SDPA kernel and the
#               CudaAttention suite outran its limit; bench/results/sanitizer-gpu-h100.log)
#   tests       all the test steps above: unit,plugins,models,zoo,python,fuzz,conformance
#               (scripts/gpu/validate_and_bench.sh tests: every GPU suite, one command; needs
#               ~15 min of device time, so a 10-minute call may run it in two halves)
# Every step writes its log to $OUT as it goes (the device returns at most 8 files), so a run cut
# short by its time limit still returns what finished. Each step ends with one line
# `step NAME: ok|FAIL (what ran)` (also in $OUT/steps.log), and the script exits 1 when any step
# failed or ran nothing (a suite that skipped for want of a GPU fails here: this is the GPU machine),
# or when STEPS names no known step.
# Usage: scripts/gpu/validate_and_bench.sh STEPS [MODELS] [BATCHES]
#   BATCHES "default": each model's batch sizes from peers.py (the issue's model set).
#   KILN_BUNDLE_DIR: an unpacked bundle to use instead of .device_deps/bundle.tar.xz (tests).
set -uo pipefail
cd "$(dirname "$0")/../.."
STEPS=${1:-unit,plugins,models,bench}
[ "$STEPS" = tests ] && STEPS=unit,plugins,models,zoo,python,fuzz,conformance
MODELS=${2:-resnet50,bert_base_s128}
BATCHES=${3:-1,32}
[ "$BATCHES" = default ] && BATCHES=""
: "${OUT:?set OUT to the folder for the logs}"
mkdir -p "$OUT"
KNOWN=unit,plugins,models,zoo,python,fuzz,conformance,sanitizer,triton,tritonbench,bench,perfzoo,dynzoo,profile,streams
for s in ${STEPS//,/ }; do
  [[ ",$KNOWN," == *",$s,"* ]] || { echo "step $s: FAIL (unknown step; known: $KNOWN)" | tee -a $OUT/steps.log; exit 1; }
done
if [ -n "${KILN_BUNDLE_DIR:-}" ]; then
  K=$KILN_BUNDLE_DIR
else
  K=/tmp/kb
  mkdir -p $K && tar -C $K -xJf .device_deps/bundle.tar.xz || { echo "step bundle: FAIL (cannot unpack)"; exit 1; }
fi
export LD_LIBRARY_PATH=$K/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
# Results of the zoo steps are kept per card (an H100's rows never merge into the H200's table).
GPU_TAG=h200
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H100 && GPU_TAG=h100
has() { [[ ",$STEPS," == *",$1,"* ]]; }
FAILED=0; SUMMARY=()
# finish NAME STATUS WHAT: the step's one summary line (status 0 = ok), and the seconds since the
# start (to plan the next session's device time).
finish() {
  local verdict=ok
  [ "$2" -eq 0 ] || { verdict=FAIL; FAILED=1; }
  SUMMARY+=("step $1: $verdict ($3)")
  echo "step $1: $verdict ($3) [done at ${SECONDS} s]" | tee -a $OUT/steps.log
}
# The last line of a log that matches a pattern (a suite's own summary), for the step's line.
last() { grep -E "$2" "$1" 2>/dev/null | tail -1 | cut -c1-200; }
if has unit; then
  export KILN_TEST_LIBDIR=$K/lib
  # One process per suite: a kernel that faults poisons its CUDA context, not the other suites.
  # Besides the GPU suites, CPU suites that behave differently on this machine's CPU and core count
  # (AVX-512, 16 threads: tactic choices, the thread pool on the OpenMP team), which aborted once here.
  # UNIT_SUITES (an extended regex over suite names): only those, e.g. '^Cuda(MiscOps|MatMul)$' for the
  # suites a change touched (the whole step took 411 s on the H100 in session 38).
  suites=$($K/bin/kiln_unit_tests --gtest_list_tests | grep -E '^(Cuda|Plugins|Pass|GpuLayout|Runtime|TacticBuckets|Attention|LinearAttention|ThreadPool)' | tr -d '.' | grep -E "${UNIT_SUITES:-.}")
  nsuites=0; badsuites=0; : > $OUT/unit_gpu.log
  for suite in $suites; do
    nsuites=$((nsuites + 1))
    echo "=== $suite" >> $OUT/unit_gpu.log
    # Not --gtest_brief: on an abort, the last [ RUN ] line names the test that was running.
    # UNIT_SUITE_TIMEOUT (s): CudaLayout ran past 120 s on the H100 (session 38; ConvEpilogueActivations
    # times every conv tactic for 72 cases).
    timeout ${UNIT_SUITE_TIMEOUT:-300} $K/bin/kiln_unit_tests --gtest_filter="$suite.*" > /tmp/suite.log 2>&1
    rc=$?
    grep -vE '^\[ +(RUN|OK) +\]' /tmp/suite.log >> $OUT/unit_gpu.log
    [ $rc -eq 0 ] || { badsuites=$((badsuites + 1));
      echo "!!! $suite exited with status $rc; last test started: $(grep -E '^\[ RUN' /tmp/suite.log | tail -1)" >> $OUT/unit_gpu.log; }
  done
  grep -E "^===|tests ran|PASSED|FAILED|SKIPPED|!!!" $OUT/unit_gpu.log | head -80
  # gtest counts skipped tests apart from passed ones: CUDA tests that all skipped ran nothing.
  passed=$(grep -Eo '^\[  PASSED  \] [0-9]+' $OUT/unit_gpu.log 2>/dev/null | awk '{s += $NF} END {print s + 0}')
  skipped=$(grep -Eo '^\[  SKIPPED \] [0-9]+' $OUT/unit_gpu.log 2>/dev/null | awk '{s += $NF} END {print s + 0}')
  # The CPU suites pass anywhere: a test skipped for want of a GPU says that none was found.
  nogpu=$(grep -c 'no GPU on this machine' $OUT/unit_gpu.log)
  finish unit $(( badsuites > 0 || passed == 0 || nogpu > 0 )) "$nsuites suites, $badsuites failed; $passed tests passed, $skipped skipped ($nogpu for want of a GPU)"
fi
if has plugins; then
  timeout 120 python3 tests/plugins/test_plugin_examples.py --kiln $K/bin/kiln --libdir $K/lib --device gpu > $OUT/plugins_gpu.log 2>&1
  rc=$?  # 77: skipped for want of a GPU, a failure here
  tail -12 $OUT/plugins_gpu.log
  finish plugins $rc "exit $rc: $(last $OUT/plugins_gpu.log '^(plugin examples|SKIPPED)')"
fi
if has models; then
  python3 tests/models/gen_models.py --out /tmp/models >/dev/null 2>&1
  timeout 150 python3 tests/models/run_model_tests.py --kiln $K/bin/kiln --models /tmp/models --device gpu > $OUT/models_gpu.log 2>&1
  rc=$?
  grep -E "^(PASS|FAIL)|passed" $OUT/models_gpu.log | cut -c1-300
  npass=$(grep -c '^PASS ' $OUT/models_gpu.log)
  finish models $(( rc != 0 || npass == 0 )) "exit $rc: $(last $OUT/models_gpu.log ' passed, ')"
fi
if has zoo; then
  # ZOO_DYNAMO=1: export with torch.export (PyTorch's default exporter; needs onnxscript there);
  # ZOO_OPSET=23 with it: SDPA exported as the ONNX Attention op.
  # Four models at a time (exports and ONNX Runtime are CPU-bound; one at a time did not finish 17 in 390 s).
  timeout ${ZOO_TIMEOUT:-400} python3 tests/models/zoo_check.py --kiln $K/bin/kiln --device gpu ${ZOO_MODELS:+--models $ZOO_MODELS} \
    ${ZOO_DYNAMO:+--dynamo} ${ZOO_OPSET:+--opset $ZOO_OPSET} --jobs ${ZOO_JOBS:-4} > $OUT/zoo_gpu.log 2>&1
  rc=$?
  grep -E "^(PASS|FAIL|SKIP)|zoo_check" $OUT/zoo_gpu.log | cut -c1-240
  npass=$(grep -c '^PASS' $OUT/zoo_gpu.log)
  finish zoo $(( rc != 0 || npass == 0 )) "exit $rc, $npass PASS lines: $(last $OUT/zoo_gpu.log 'zoo_check')"
fi
if has python; then
  # The Python module, compiled here against this machine's Python and the bundle's libkiln.so
  # (the bundle's own would match the development machine's Python); pybind11 from its package or
  # from PyTorch's headers, which ship it.
  PYINC=$(python3 -c "import sysconfig;print(sysconfig.get_paths()['include'])")
  PBINC=$(python3 -c "import pybind11;print(pybind11.get_include())" 2>/dev/null ||
          python3 -c "import torch,os;print(os.path.join(os.path.dirname(torch.__file__),'include'))")
  EXT=$(python3 -c "import sysconfig;print(sysconfig.get_config_var('EXT_SUFFIX'))")
  # The package kiln/ (python/kiln/*.py) around the extension kiln._kiln; version.h comes generated
  # with the bundle.
  mkdir -p /tmp/kpy/kiln && cp python/kiln/*.py /tmp/kpy/kiln/
  # PYBIND11_ASSERT_GIL_HELD_INCREF_DECREF: a reference count touched without the GIL aborts (issue 16).
  # One compiler per source file in parallel (the machine has many cores), then one link.
  pycompile() {
    mkdir -p /tmp/kpy/obj &&
    ls python/*.cpp | xargs -P "$(nproc)" -I{} sh -c 'g++ -O2 -std=c++20 -fPIC -fvisibility=hidden \
        -DPYBIND11_ASSERT_GIL_HELD_INCREF_DECREF -Ipython -I'"$K"'/include -Iinclude -I"'"$PYINC"'" -I"'"$PBINC"'" \
        -c {} -o /tmp/kpy/obj/$(basename {} .cpp).o' &&
    g++ -shared /tmp/kpy/obj/*.o -L$K/lib -lkiln -Wl,-rpath,$K/lib -o /tmp/kpy/kiln/_kiln$EXT
  }
  if [ -f "$PYINC/Python.h" ] && [ -f "$PBINC/pybind11/pybind11.h" ] && pycompile > $OUT/python_gpu.log 2>&1; then
    rc=0
    # the API against ONNX Runtime; torch/CuPy-style tensors, streams, CUDA graphs; kiln.torch.compile vs PyTorch
    for t in test_python_api.py test_python_interop.py test_torch_compile.py; do
      timeout 300 python3 tests/python/$t --module-dir /tmp/kpy --device gpu >> $OUT/python_gpu.log 2>&1
      r=$?
      [ $r -ne 0 ] && rc=$r  # 77: skipped for want of a GPU, a failure here
    done
    # per-call overhead of a tiny model (CUDA tensors on torch's stream); informational
    timeout 120 python3 bench/python_overhead.py --module-dir /tmp/kpy --device gpu --calls 20000 >> $OUT/python_gpu.log 2>&1
  else
    echo "python: the module cannot be built here (Python.h in '$PYINC', pybind11 in '$PBINC')" >> $OUT/python_gpu.log
    rc=1
  fi
  grep -E "^(FAIL|skip)|tests passed|cannot be built|SKIPPED| us$" $OUT/python_gpu.log | cut -c1-240
  finish python $rc "exit $rc: $(grep -E 'tests passed|cannot be built' $OUT/python_gpu.log | tr '\n' ';' | cut -c1-300)"
fi
if has fuzz; then
  timeout 240 python3 tests/fuzz/fuzz_graphs.py --kiln $K/bin/kiln --device gpu --count 200 --jobs $(nproc) > $OUT/fuzz_gpu.log 2>&1
  rc=$?
  tail -12 $OUT/fuzz_gpu.log
  finish fuzz $rc "exit $rc: $(last $OUT/fuzz_gpu.log 'random graphs agree')"
fi
if has conformance; then
  # CONF_DATA: test data already generated (tests of this script use a small fake set).
  CD=${CONF_DATA:-/tmp/conf}
  [ -n "${CONF_DATA:-}" ] || python3 tests/conformance/generate.py --out $CD >/dev/null 2>&1
  timeout ${CONF_TIMEOUT:-300} scripts/gpu/run_conformance.sh $K $CD $OUT/conf_gpu.log
  rc=$?
  finish conformance $rc "exit $rc: $(tail -1 $OUT/conf_gpu.log 2>/dev/null | cut -c1-200)"
fi
if has sanitizer; then
  # compute-sanitizer (issue 17): each tool over each suite in its own process; exit 99 = it found
  # errors, 124 = timed out (the suites run 10-100x slower under it).
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  export KILN_TEST_LIBDIR=$K/lib
  : > $OUT/sanitizer.log
  suites=${SANITIZER_SUITES:-$($K/bin/kiln_unit_tests --gtest_list_tests | grep -E '^Cuda' | tr -d '.' | tr '\n' ' ')}
  clean=0; dirty=0; slow=0; broke=0
  run_tool() {  # tool, label, command...
    local tool=$1 label=$2; shift 2
    timeout ${SANITIZER_TIMEOUT:-240} $CS --tool $tool --error-exitcode 99 --print-limit 20 "$@" > /tmp/cs.log 2>&1
    local rc=$?
    local verdict=clean
    case $rc in 0) clean=$((clean + 1)) ;; 99) verdict=ERRORS; dirty=$((dirty + 1)) ;; 124) verdict="timed out"; slow=$((slow + 1)) ;;
      *) verdict="exit $rc"; broke=$((broke + 1)) ;; esac
    echo "=== $tool $label: $verdict" >> $OUT/sanitizer.log
    [ $rc -eq 0 ] || grep -E "=========|FAILED|Error|error" /tmp/cs.log | head -40 >> $OUT/sanitizer.log
    grep -E "ERROR SUMMARY" /tmp/cs.log | tail -1 >> $OUT/sanitizer.log
  }
  for suite in $suites; do run_tool memcheck "$suite" $K/bin/kiln_unit_tests --gtest_filter="$suite.*"; done
  for suite in $suites; do
    # shellcheck disable=SC2086 (SANITIZER_RACECHECK_ARGS is a list of options)
    [[ $suite =~ (Attention|Norm|Reduce|Softmax|Pool|Conv|Flash) ]] && run_tool racecheck "$suite" ${SANITIZER_RACECHECK_ARGS:-} $K/bin/kiln_unit_tests --gtest_filter="$suite.*"
  done
  python3 tests/models/gen_models.py --out /tmp/cs_models > /dev/null 2>&1
  for m in $(echo "${SANITIZER_MODELS:-mlp,mobilenetv2,bert}" | tr ',' ' '); do
    f=/tmp/cs_models/$m.onnx; [ -f "$f" ] || f=
    [ -n "$f" ] || { echo "=== memcheck engine $m: no such model in tests/models/gen_models.py's output" >> $OUT/sanitizer.log; broke=$((broke + 1)); continue; }
    run_tool memcheck "engine $m (fp16, build and 2 runs)" $K/bin/kiln --onnx=$f --backend=gpu --fp16 --iterations=2 --warmUp=0 --duration=0
  done
  grep -E "^===" $OUT/sanitizer.log | head -120
  finish sanitizer $(( dirty > 0 || broke > 0 || clean == 0 )) "$clean clean, $dirty with errors, $slow timed out, $broke broken"
fi
if has bench; then
  timeout ${BENCH_TIMEOUT:-480} python3 bench/gpu_bench.py --kiln $K/bin/kiln --peers .device_deps/peers.py --out $OUT/gpu-h200.md \
    --models "$MODELS" --batches "$BATCHES" --timing-cache > $OUT/bench.log 2>&1
  rc=$?
  tail -15 $OUT/gpu-h200.md
  finish bench $rc "exit $rc: $OUT/gpu-h200.md"
fi
if has perfzoo; then
  cp bench/results/gpu-zoo-$GPU_TAG.jsonl $OUT/gpu-zoo-$GPU_TAG.jsonl 2>/dev/null || : > $OUT/gpu-zoo-$GPU_TAG.jsonl
  timeout ${PERFZOO_TIMEOUT:-540} python3 bench/zoo.py --kiln $K/bin/kiln --peers .device_deps/peers.py \
    --results $OUT/gpu-zoo-$GPU_TAG.jsonl --out $OUT/gpu-zoo-$GPU_TAG.md ${PERFZOO_MODELS:+--models $PERFZOO_MODELS} ${PERFZOO_ARGS:-} > $OUT/perfzoo.log 2>&1
  rc=$?
  grep -E '^\{' $OUT/perfzoo.log | cut -c1-300
  nrows=$(grep -c '"kiln_ms"' $OUT/perfzoo.log)
  finish perfzoo $(( rc != 0 || nrows == 0 )) "exit $rc, $nrows rows timed: $OUT/gpu-zoo-$GPU_TAG.md"
fi
if has dynzoo; then
  cp bench/results/gpu-zoo-dynamic-$GPU_TAG.jsonl $OUT/gpu-zoo-dynamic-$GPU_TAG.jsonl 2>/dev/null || : > $OUT/gpu-zoo-dynamic-$GPU_TAG.jsonl
  timeout ${DYNZOO_TIMEOUT:-540} python3 bench/zoo_dynamic.py --kiln $K/bin/kiln --peers .device_deps/peers.py \
    --results $OUT/gpu-zoo-dynamic-$GPU_TAG.jsonl --out $OUT/gpu-zoo-dynamic-$GPU_TAG.md ${DYNZOO_MODELS:+--models $DYNZOO_MODELS} ${DYNZOO_ARGS:-} > $OUT/dynzoo.log 2>&1
  rc=$?
  grep -E '^\{' $OUT/dynzoo.log | cut -c1-300
  nrows=$(grep -c '"ratio"' $OUT/dynzoo.log)
  finish dynzoo $(( rc != 0 || nrows == 0 )) "exit $rc, $nrows shapes timed: $OUT/gpu-zoo-dynamic-$GPU_TAG.md"
fi
# tritonserver and the client wheels (scripts/gpu/pack_triton.sh) unpacked once; the backend comes
# from the bundle. Status 0 when all is there.
TS=/tmp/tritonserver
triton_setup() {
  [ -f .device_deps/triton/tritonserver.tar.xz ] && [ -f $K/triton_backends/kiln/libtriton_kiln.so ] || {
    echo "triton: missing .device_deps/triton (scripts/gpu/pack_triton.sh) or the bundle's libtriton_kiln.so"; return 1; }
  [ -x $TS/pytriton/tritonserver/bin/tritonserver ] ||
    { mkdir -p $TS && tar -C $TS -xJf .device_deps/triton/tritonserver.tar.xz; } || return 1
  [ -d /tmp/tsite/tritonclient ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/tsite .device_deps/triton/*.whl
}
if has triton; then
  : > $OUT/triton_gpu.log
  if triton_setup >> $OUT/triton_gpu.log 2>&1; then
    PYTHONPATH=/tmp/tsite${PYTHONPATH:+:$PYTHONPATH} timeout 400 python3 tests/triton/test_triton_server.py \
      --backend-dir $K/triton_backends --kiln $K/bin/kiln --tritonserver $TS/pytriton/tritonserver/bin/tritonserver \
      --device gpu --protocols grpc >> $OUT/triton_gpu.log 2>&1
    rc=$?  # 77: skipped for want of a GPU, a failure here
  else
    rc=1
  fi
  grep -E "^ok|^FAIL|^     |passed" $OUT/triton_gpu.log | cut -c1-240
  finish triton $rc "exit $rc: $(last $OUT/triton_gpu.log 'passed|missing|FAIL|SKIPPED')"
fi
if has tritonbench; then
  # Serving overhead (bench/triton_bench.py): FP16 plans of ResNet-50 and BERT-base s128 at batch
  # $TRITON_BATCH (default 32; random weights from tests/models/model_zoo.py), the CLI against
  # tritonserver with 1 and 2 instances on GPU 0 -> $OUT/triton_bench.md
  : > $OUT/triton_bench.log; : > $OUT/triton_bench.md; rc=0
  if triton_setup >> $OUT/triton_bench.log 2>&1; then
    B=${TRITON_BATCH:-32}
    for m in resnet50 bert_base; do
      python3 -c "import sys, onnx; sys.path.insert(0, 'tests/models'); import model_zoo as z; \
onnx.save(z.make_resnet50(batch=$B) if '$m' == 'resnet50' else z.bert_base(seq=128, batch=$B), '/tmp/tb_$m.onnx')" &&
        $K/bin/kiln --onnx=/tmp/tb_$m.onnx --fp16 --saveEngine=/tmp/tb_$m.plan --skipInference >> $OUT/triton_bench.log 2>&1 &&
        PYTHONPATH=/tmp/tsite${PYTHONPATH:+:$PYTHONPATH} timeout 300 python3 bench/triton_bench.py --kiln $K/bin/kiln \
          --backend-dir $K/triton_backends --tritonserver $TS/pytriton/tritonserver/bin/tritonserver --plan /tmp/tb_$m.plan \
          --name ${m}_b$B --device ${TRITON_BENCH_DEVICE:-gpu} --seconds ${TRITON_BENCH_SECONDS:-10} --out /tmp/tb_$m.md >> $OUT/triton_bench.log 2>&1 &&
        cat /tmp/tb_$m.md >> $OUT/triton_bench.md || rc=1
    done
  else
    rc=1
  fi
  cat $OUT/triton_bench.md
  finish tritonbench $rc "exit $rc: $(grep -c 'Triton,' $OUT/triton_bench.md) Triton rows"
fi
if has profile; then
  missing=0; rows=0; : > $OUT/profile.txt
  for row in $(echo "${PROFILE:-resnet50_b32,bert_base_s128_b32}" | tr ',' ' '); do
    d=/tmp/kiln_gpu_bench/$row
    rows=$((rows + 1))
    [ -f $d/kiln_fp16.plan ] || { echo "profile: no engine for $row" >> $OUT/profile.txt; missing=$((missing + 1)); continue; }
    echo "=== $row" >> $OUT/profile.txt
    timeout 120 $K/bin/kiln --loadEngine=$d/kiln_fp16.plan --noDataTransfers --iterations=20 --warmUp=200 --duration=0 \
      --dumpProfile --exportLayerInfo=$d/layers.json 2>&1 | sed -n '/Profile/,$p' | head -60 >> $OUT/profile.txt
    python3 - $d/layers.json >> $OUT/profile.txt <<'PY'
import json, sys, collections
info = json.load(open(sys.argv[1]))
c = collections.Counter((l["op"], l["tactic"], l["precision"], json.dumps(l.get("layouts", {}))) for l in info["layers"])
print("layers by (op, tactic, precision, layouts):")
for k, n in c.most_common(25): print(f"  {n:4d}  {k}")
PY
  done
  tail -5 $OUT/profile.txt
  finish profile $(( missing > 0 || rows == 0 )) "$rows rows, $missing without an engine (run bench first)"
fi
if has streams; then
  missing=0; rows=0; : > $OUT/streams.txt
  for row in $(echo "${STREAMS_ROWS:-resnet50_b32}" | tr ',' ' '); do
    d=/tmp/kiln_gpu_bench/$row
    rows=$((rows + 1))
    [ -f $d/kiln_fp16.plan ] || { echo "streams: no engine for $row" >> $OUT/streams.txt; missing=$((missing + 1)); continue; }
    for n in 1 2 4; do
      echo "=== $row --streams=$n" >> $OUT/streams.txt
      timeout 60 $K/bin/kiln --loadEngine=$d/kiln_fp16.plan --streams=$n --useCudaGraph --duration=3 --warmUp=300 2>&1 \
        | grep -E "Throughput|GPU Compute Time|H2D Latency|D2H Latency|streams" >> $OUT/streams.txt
    done
  done
  grep -E "===|Throughput" $OUT/streams.txt
  finish streams $(( missing > 0 || rows == 0 )) "$rows rows, $missing without an engine (run bench first)"
fi
echo "=== summary (STEPS=$STEPS)"
for line in "${SUMMARY[@]+"${SUMMARY[@]}"}"; do echo "$line"; done
[ ${#SUMMARY[@]} -gt 0 ] || { echo "no step ran"; FAILED=1; }
exit $FAILED

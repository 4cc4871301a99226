# kiln: two commands for a newcomer.
#   make demo  - install deps, build, build an engine for a small ResNet-style CNN, save it, run it
#   make test  - install deps, build, run every test (unit, conformance, models, CLI, bad input,
#                the unit, CLI, random-graph and plan-fuzz suites under AddressSanitizer/UBSan, the
#                multi-threaded paths under ThreadSanitizer)
BUILD ?= build
JOBS ?= $(shell nproc)
PYTHON ?= python3

SAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
# Plan-fuzz seed and size for `make sanitize` (CI: 20,000 mutants, about 5 s; more by hand).
FUZZ_SEED ?= 1
FUZZ_MUTANTS ?= 20000
FUZZ_SECONDS ?= 60

.PHONY: all deps build demo test unit conformance conformance-baseline models sanitize tsan fuzz clean

all: build

deps:
	@bash scripts/install_deps.sh

$(BUILD)/Makefile: CMakeLists.txt
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	@mkdir -p demo
	$(PYTHON) scripts/make_demo_model.py --out demo/resnet_small.onnx
	$(BUILD)/bin/kiln --onnx=demo/resnet_small.onnx --saveEngine=demo/resnet_small.plan --device=cpu
	$(BUILD)/bin/kiln --loadEngine=demo/resnet_small.plan --device=cpu --iterations=100 --dumpLayerInfo

unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The per-test statuses are pinned in tests/conformance/baseline_cpu.txt: a PASS that becomes a SKIP
# or FAIL, or a run where nothing ran, fails; `make conformance-baseline` re-pins (commit the file).
CONFORMANCE_LOG = $(BUILD)/conformance.log
conformance: build
	$(PYTHON) tests/conformance/generate.py --out $(BUILD)/conformance
	@status=0; \
	$(BUILD)/bin/kiln_conformance $(BUILD)/conformance --report $(BUILD)/conformance_report.md > $(CONFORMANCE_LOG) || status=1; \
	grep -E '^FAIL ' $(CONFORMANCE_LOG); tail -1 $(CONFORMANCE_LOG); \
	$(PYTHON) tests/conformance/check_baseline.py $(CONFORMANCE_LOG) --baseline tests/conformance/baseline_cpu.txt || status=1; \
	exit $$status

conformance-baseline: build
	$(PYTHON) tests/conformance/generate.py --out $(BUILD)/conformance
	$(BUILD)/bin/kiln_conformance $(BUILD)/conformance > $(CONFORMANCE_LOG) || true
	$(PYTHON) tests/conformance/check_baseline.py $(CONFORMANCE_LOG) --baseline tests/conformance/baseline_cpu.txt --update

models: build
	$(PYTHON) tests/models/gen_models.py --out $(BUILD)/models
	$(PYTHON) tests/models/run_model_tests.py --kiln $(BUILD)/bin/kiln --models $(BUILD)/models
	@echo "transformers again with the GPU-only fusions (attention, skip LayerNorm) on the CPU's reference kernels:"
	$(PYTHON) tests/models/run_model_tests.py --kiln $(BUILD)/bin/kiln --models $(BUILD)/models --only bert,bert_dynamic,gpt2 --build-flag=--gpuFusions

# AddressSanitizer + UndefinedBehaviorSanitizer build (CPU only, its own build folder, -O1): the
# whole CPU unit suite, the CLI suites (bad input, flags and exports, trtexec compatibility, control
# flow, plugin examples), random graphs against ONNX Runtime and a seeded kiln_plan_fuzz run (2-3.5 minutes on
# CI's two cores once built). Every step runs even if one fails; the target fails if any failed.
SAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:abort_on_error=1
SAN_GRAPHS ?= 100
sanitize: deps
	cmake -S . -B $(SAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_SANITIZE=ON -DKILN_WITH_CUDA=OFF -DKILN_WITH_PYTHON=OFF >/dev/null
	cmake --build $(SAN_BUILD) -j $(JOBS) --target kiln_unit_tests kiln_cli kiln_plan_fuzz
	@status=0; \
	echo "== ASan+UBSan: CPU unit tests"; \
	$(SAN_ENV) $(SAN_BUILD)/bin/kiln_unit_tests --gtest_brief=1 || status=1; \
	for suite in bad_input/test_bad_input.py cli/test_cli.py cli/test_trtexec_compat.py control_flow/test_control_flow.py; do \
	  echo "== ASan+UBSan: tests/$$suite"; \
	  $(SAN_ENV) $(PYTHON) tests/$$suite --kiln $(SAN_BUILD)/bin/kiln || status=1; \
	done; \
	echo "== ASan+UBSan: tests/plugins/test_plugin_examples.py (plugin libraries loaded into the instrumented CLI)"; \
	$(SAN_ENV) $(PYTHON) tests/plugins/test_plugin_examples.py --kiln $(SAN_BUILD)/bin/kiln --libdir $(SAN_BUILD)/lib --device cpu || status=1; \
	echo "== ASan+UBSan: $(SAN_GRAPHS) random graphs vs ONNX Runtime (CLI)"; \
	$(SAN_ENV) $(PYTHON) tests/fuzz/fuzz_graphs.py --kiln $(SAN_BUILD)/bin/kiln --count $(SAN_GRAPHS) --jobs $(JOBS) || status=1; \
	echo "== ASan+UBSan: plan and timing-cache mutants"; \
	$(SAN_ENV) $(SAN_BUILD)/bin/kiln_plan_fuzz --seed $(FUZZ_SEED) --mutants $(FUZZ_MUTANTS) || status=1; \
	exit $$status

# ThreadSanitizer build (CPU only, without oneDNN, whose own threads TSan cannot see into): the thread
# pool, two execution contexts of one engine on two threads, plugin clones per context.
TSAN_BUILD ?= build-tsan
TSAN_ENV = TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
tsan: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_TSAN=ON -DKILN_WITH_CUDA=OFF -DKILN_WITH_PYTHON=OFF \
	  -DKILN_WITH_ONEDNN=OFF >/dev/null
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target kiln_tsan_tests kiln_cli
	@status=0; \
	echo "== TSan: thread pool, two contexts on two threads, plugin clones"; \
	$(TSAN_ENV) $(TSAN_BUILD)/bin/kiln_tsan_tests --gtest_brief=1 || status=1; \
	echo "== TSan: the CLI, a small CNN built and loaded, 4 streams (contexts) on a 3-thread pool"; \
	mkdir -p $(TSAN_BUILD)/cli && $(PYTHON) scripts/make_demo_model.py --out $(TSAN_BUILD)/cli/cnn.onnx >/dev/null && \
	$(TSAN_ENV) $(TSAN_BUILD)/bin/kiln --onnx=$(TSAN_BUILD)/cli/cnn.onnx --saveEngine=$(TSAN_BUILD)/cli/cnn.plan --device=cpu \
	  --threads=2 --streams=2 --iterations=10 --warmUp=0 --duration=0 >/dev/null && \
	$(TSAN_ENV) $(TSAN_BUILD)/bin/kiln --loadEngine=$(TSAN_BUILD)/cli/cnn.plan --device=cpu --threads=3 --streams=4 \
	  --iterations=20 --warmUp=0 --duration=0 --dumpProfile >/dev/null || status=1; \
	exit $$status

# libFuzzer targets (clang): plan and timing-cache files, seeded with kiln_plan_fuzz's seed plans;
# ONNX import (+ CPU build and run), the CLI's --loadInputs readers and its flag parsers, seeded
# from tests/fuzz/corpus (copied: libFuzzer adds what it finds to the working copy, not the repo).
# Each runs FUZZ_SECONDS; recorded runs are in docs/internals.md ("Fuzzing").
FUZZ_NEW = onnx_import input_files cli_specs
fuzz:
	@bash scripts/install_deps.sh --fuzz
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_FUZZERS=ON -DKILN_WITH_CUDA=OFF \
	  -DKILN_WITH_PYTHON=OFF -DKILN_WITH_ONEDNN=OFF -DKILN_BUILD_TESTS=OFF >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target kiln_libfuzzer_plan kiln_libfuzzer_timing_cache kiln_plan_fuzz \
	  $(addprefix kiln_libfuzzer_,$(FUZZ_NEW))
	mkdir -p $(FUZZ_BUILD)/corpus/plan $(FUZZ_BUILD)/corpus/cache
	$(FUZZ_BUILD)/bin/kiln_plan_fuzz --write-seeds $(FUZZ_BUILD)/corpus/plan
	mv $(FUZZ_BUILD)/corpus/plan/cache.timing $(FUZZ_BUILD)/corpus/cache/
	$(SAN_ENV) $(FUZZ_BUILD)/bin/kiln_libfuzzer_plan -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -timeout=20 $(FUZZ_BUILD)/corpus/plan
	$(SAN_ENV) $(FUZZ_BUILD)/bin/kiln_libfuzzer_timing_cache -max_total_time=$(FUZZ_SECONDS) -timeout=20 $(FUZZ_BUILD)/corpus/cache
	@for f in $(FUZZ_NEW); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$f && cp -n tests/fuzz/corpus/$$f/* $(FUZZ_BUILD)/corpus/$$f/ && \
	  $(SAN_ENV) $(FUZZ_BUILD)/bin/kiln_libfuzzer_$$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -timeout=20 \
	    $(FUZZ_BUILD)/corpus/$$f || exit 1; \
	done

# Every suite runs even if an earlier one fails; the target fails if any failed.
test: build
	@status=0; \
	$(MAKE) --no-print-directory unit || status=1; \
	$(MAKE) --no-print-directory conformance || status=1; \
	$(MAKE) --no-print-directory models || status=1; \
	$(MAKE) --no-print-directory sanitize || status=1; \
	$(MAKE) --no-print-directory tsan || status=1; \
	exit $$status

clean:
	rm -rf $(BUILD) $(SAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD) demo

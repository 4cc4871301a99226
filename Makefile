# kiln: two commands for a newcomer.
#   make demo  - install deps, build, build an engine for a small ResNet-style CNN, save it, run it
#   make test  - install deps, build, run every test (unit, conformance, models, CLI, bad input)
BUILD ?= build
JOBS ?= $(shell nproc)
PYTHON ?= python3

.PHONY: all deps build demo test unit conformance models clean

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

conformance: build
	$(PYTHON) tests/conformance/generate.py --out $(BUILD)/conformance
	$(BUILD)/bin/kiln_conformance $(BUILD)/conformance --report $(BUILD)/conformance_report.md

models: build
	$(PYTHON) tests/models/gen_models.py --out $(BUILD)/models
	$(PYTHON) tests/models/run_model_tests.py --kiln $(BUILD)/bin/kiln --models $(BUILD)/models
	@echo "transformers again with the GPU-only fusions (attention, skip LayerNorm) on the CPU's reference kernels:"
	$(PYTHON) tests/models/run_model_tests.py --kiln $(BUILD)/bin/kiln --models $(BUILD)/models --only bert,bert_dynamic,gpt2 --build-flag=--gpuFusions

# Every suite runs even if an earlier one fails; the target fails if any failed.
test: build
	@status=0; \
	$(MAKE) --no-print-directory unit || status=1; \
	$(MAKE) --no-print-directory conformance || status=1; \
	$(MAKE) --no-print-directory models || status=1; \
	exit $$status

clean:
	rm -rf $(BUILD) demo

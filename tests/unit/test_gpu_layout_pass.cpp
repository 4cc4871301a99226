// The GPU layout pass (builder/passes/gpu_layout.cpp) on a fake GPU backend whose conv and pool
// tactics accept every layout: which tensors go channels-last, where LayoutConvert layers go, and
// what stays NCHW (float32, batch < 8, channel counts not a multiple of 8, network I/O).
#include <gtest/gtest.h>

#include "builder/passes/passes.h"
#include "kiln/kiln.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"
#include "ops/layout_transpose.h"
#include "ops/shape_propagation.h"
#include "reference_eval.h"

using namespace kiln;

namespace {

//! A conv kernel with no channels-last engine at one batch (as cuDNN may lack one for a problem):
//! its reshape refuses nhwc layouts there.
class RefusingConvKernel : public Kernel {
 public:
  explicit RefusingConvKernel(int64_t batch) : batch_(batch) {}
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>&) const override {
    if (!hasPlainLayouts(l) && l.outputs[0].dims[0] == batch_) throw Error("fake: no channels-last engine at this batch");
    return 0;
  }
  void execute(const KernelIO&, KernelState*) const override {}

 private:
  int64_t batch_;
};

class FakeGpu : public Backend {
 public:
  DeviceType device() const override { return DeviceType::kGPU; }
  std::string fingerprint() const override { return "fake-gpu"; }
  std::vector<Tactic> tactics(const LayerDesc& l) const override {
    const bool aware = l.op == "Conv" || l.op == "MaxPool" || l.op == "AveragePool" || l.op == "GlobalAveragePool" ||
                       (elementwiseAware && (l.op == "Mul" || l.op == "Add" || l.op == "PointwiseChain" || l.op == "Sigmoid" || l.op == "Relu"));
    const bool permute = transposeAware && l.op == "Transpose" && isLayoutCopyTranspose(*l.attrs, l.inputs[0].dims.size());
    const bool concat = concatAware && l.op == "Concat";
    if (!aware && !permute && !concat && !hasPlainLayouts(l)) return {};
    if (l.op == "Conv" && refuseNhwcAtBatch > 0) {
      const int64_t batch = refuseNhwcAtBatch;
      return {Tactic{"fake", [batch](const LayerDesc&) { return std::make_unique<RefusingConvKernel>(batch); }}};
    }
    return {Tactic{"fake", nullptr}};
  }
  void* allocate(size_t) override { return nullptr; }
  void release(void*) override {}
  void copyToDevice(void*, const void*, size_t, void*) override {}
  void copyToHost(void*, const void*, size_t, void*) override {}
  void synchronize(void*) override {}
  bool elementwiseAware = false;  //!< whether Mul/Add/PointwiseChain/Sigmoid/Relu take channels-last layouts
  bool transposeAware = false;    //!< whether the byte-copy permutes take layouts (as the CUDA tactic does)
  bool concatAware = false;       //!< whether Concat takes layouts (as the CUDA concat tactics do)
  int64_t refuseNhwcAtBatch = 0;  //!< > 0: the convs' kernels have no channels-last engine at this batch
};

HostTensor halfTensor(const Dims& d, uint32_t seed) {
  HostTensor f = test::randomTensor(d, seed);
  HostTensor h(DataType::kHALF, d);
  for (int64_t i = 0; i < f.count(); ++i) h.as<uint16_t>()[i] = floatToHalf(f.as<float>()[i]);
  return h;
}

//! x (fp16 input) -> Conv(+Relu) -> MaxPool -> Conv(+residual = pool output, +Relu) -> GAP -> Flatten.
struct Chain {
  Network net;
  Layer *c1, *pool, *c2, *gap;
  Chain(int64_t batch, int64_t channels, DataType type) {
    Tensor* x = net.addInput("x", type, {batch, 16, 16, 16});
    auto w = [&](const Dims& d, uint32_t seed) { return type == DataType::kHALF ? halfTensor(d, seed) : test::randomTensor(d, seed); };
    c1 = net.addConvolution(x, w({channels, 16, 3, 3}, 1), w({channels}, 2), {1, 1}, {1, 1, 1, 1});
    c1->attrs.set("kiln_activation", std::string("Relu"));
    Attributes mp;
    mp.set("kernel_shape", std::vector<int64_t>{2, 2});
    mp.set("strides", std::vector<int64_t>{2, 2});
    pool = net.addLayer("MaxPool", {c1->outputs[0]}, 1, mp);
    c2 = net.addConvolution(pool->outputs[0], w({channels, channels, 3, 3}, 3), w({channels}, 4), {1, 1}, {1, 1, 1, 1});
    c2->inputs.push_back(pool->outputs[0]);  // fused residual
    c2->attrs.set("kiln_activation", std::string("Relu"));
    gap = net.addLayer("GlobalAveragePool", {c2->outputs[0]}, 1);
    Attributes fa;
    fa.set("axis", int64_t(1));
    Layer* flat = net.addLayer("Flatten", {gap->outputs[0]}, 1, fa);
    net.markOutput(flat->outputs[0]);
    net.topoSort();
    propagateShapes(net, nullptr, true);
  }
  int converts() const {
    int n = 0;
    for (auto& l : net.layers()) n += l->op == "LayoutConvert";
    return n;
  }
};

std::string layout(const Layer* l, const char* attr) { return l->attrs.getString(attr, "nchw"); }

}  // namespace

TEST(GpuLayoutPass, Fp16ConvChainGoesChannelsLast) {
  FakeGpu gpu;
  Chain c(8, 32, DataType::kHALF);
  ASSERT_TRUE(assignGpuLayouts(c.net, gpu));
  EXPECT_EQ(layout(c.c1, attr::kLayoutIn), "nchw");  // the network input stays NCHW
  EXPECT_EQ(layout(c.c1, attr::kLayoutOut), "nhwc");
  EXPECT_EQ(layout(c.pool, attr::kLayoutIn), "nhwc");
  EXPECT_EQ(layout(c.pool, attr::kLayoutOut), "nhwc");
  EXPECT_EQ(layout(c.c2, attr::kLayoutIn), "nhwc");
  EXPECT_EQ(layout(c.c2, attr::kLayoutOut), "nhwc");
  EXPECT_EQ(layout(c.gap, attr::kLayoutIn), "nhwc");
  EXPECT_EQ(layout(c.gap, attr::kLayoutOut), "nchw");  // [N, C, 1, 1] either way
  EXPECT_EQ(c.c2->inputs[3], c.pool->outputs[0]);         // the residual is already nhwc: no conversion
  EXPECT_EQ(c.converts(), 0);
  EXPECT_FALSE(assignGpuLayouts(c.net, gpu));  // assigned once
}

TEST(GpuLayoutPass, NonAwareReaderGetsAConversion) {
  FakeGpu gpu;
  Chain c(8, 32, DataType::kHALF);
  // A second reader of the pool output that reads NCHW only.
  Layer* relu = c.net.addActivation(c.pool->outputs[0], "Relu");
  c.net.markOutput(relu->outputs[0]);
  propagateShapes(c.net, nullptr, true);
  ASSERT_TRUE(assignGpuLayouts(c.net, gpu));
  EXPECT_EQ(c.converts(), 1);
  ASSERT_NE(relu->inputs[0]->producer, nullptr);
  EXPECT_EQ(relu->inputs[0]->producer->op, "LayoutConvert");
  EXPECT_EQ(layout(relu->inputs[0]->producer, attr::kLayoutIn), "nhwc");
  EXPECT_EQ(layout(relu->inputs[0]->producer, attr::kLayoutOut), "nchw");
}

TEST(GpuLayoutPass, StaysNchwWhereChannelsLastDoesNotApply) {
  FakeGpu gpu;
  Chain fp32(8, 32, DataType::kFLOAT);  // float32 engines keep NCHW
  EXPECT_FALSE(assignGpuLayouts(fp32.net, gpu));
  Chain small(4, 32, DataType::kHALF);  // batch below the threshold asked for
  EXPECT_FALSE(assignGpuLayouts(small.net, gpu, {}, 8));
  Chain smallDefault(4, 32, DataType::kHALF);  // the default threshold: every batch
  EXPECT_TRUE(assignGpuLayouts(smallDefault.net, gpu));
  Chain odd(8, 20, DataType::kHALF);  // 20 channels: not a multiple of 8
  EXPECT_FALSE(assignGpuLayouts(odd.net, gpu));
  auto cpuBackend = getBackend(DeviceType::kCPU, 1);
  Chain onCpu(8, 32, DataType::kHALF);
  EXPECT_FALSE(assignGpuLayouts(onCpu.net, *cpuBackend));
}

// A dynamic batch (profile 1..64): the layout is chosen at the opt shape (samples[0], as the
// builder passes them), so an engine tuned for batch 32 runs channels-last at every batch and one
// tuned for batch 1 stays NCHW under a threshold of 8; without samples unknown dims keep NCHW.
TEST(GpuLayoutPass, DynamicBatchIsJudgedAtTheOptShape) {
  FakeGpu gpu;
  auto samples = [](int64_t opt) {
    return InputSamples{{{"x", Dims{opt, 16, 16, 16}}}, {{"x", Dims{64, 16, 16, 16}}}, {{"x", Dims{1, 16, 16, 16}}},
                        {{"x", Dims{5, 16, 16, 16}}}};
  };
  Chain tuned32(-1, 32, DataType::kHALF);
  ASSERT_EQ(tuned32.c2->outputs[0]->dims, (Dims{-1, 32, 8, 8}));
  ASSERT_TRUE(assignGpuLayouts(tuned32.net, gpu, samples(32)));
  EXPECT_EQ(layout(tuned32.c1, attr::kLayoutOut), "nhwc");
  EXPECT_EQ(layout(tuned32.c2, attr::kLayoutIn), "nhwc");
  EXPECT_EQ(layout(tuned32.c2, attr::kLayoutOut), "nhwc");
  EXPECT_EQ(layout(tuned32.gap, attr::kLayoutIn), "nhwc");
  EXPECT_EQ(tuned32.converts(), 0);
  Chain tuned1(-1, 32, DataType::kHALF);
  EXPECT_FALSE(assignGpuLayouts(tuned1.net, gpu, samples(1), 8));
  Chain noSamples(-1, 32, DataType::kHALF);
  EXPECT_FALSE(assignGpuLayouts(noSamples.net, gpu));
  // Each layer's kernel is verified at the opt shape: one with no channels-last engine at batch 32
  // keeps the chain NCHW (unverified, the unknown dims would have let it through).
  FakeGpu refusing;
  refusing.refuseNhwcAtBatch = 32;
  Chain verified(-1, 32, DataType::kHALF);
  EXPECT_FALSE(assignGpuLayouts(verified.net, refusing, samples(32)));
  refusing.refuseNhwcAtBatch = 64;  // refuses at max only: opt decides
  Chain atMax(-1, 32, DataType::kHALF);
  EXPECT_TRUE(assignGpuLayouts(atMax.net, refusing, samples(32)));
}

// Dynamic dims compared at the samples: an Add of two conv outputs whose batches are two input dims
// (equal at opt, not elsewhere) takes the second as a broadcast, not as a tensor of Y's shape, so it
// stays NCHW (with IR dims alone, [-1, 32, 8, 8] == [-1, 32, 8, 8] would have passed); a Shape of a channels-last tensor reads its logical dims
// as they are (no LayoutConvert).
TEST(GpuLayoutPass, DynamicInputsAreComparedAtEverySample) {
  for (bool sameBatch : {true, false}) {
    FakeGpu gpu;
    gpu.elementwiseAware = true;
    Network net;
    Tensor* x = net.addInput("x", DataType::kHALF, {-1, 16, 8, 8});
    Tensor* y = net.addInput("y", DataType::kHALF, {-1, 16, 8, 8});
    Layer* c0 = net.addConvolution(x, halfTensor({32, 16, 3, 3}, 1), halfTensor({32}, 2), {1, 1}, {1, 1, 1, 1});
    Layer* cy = net.addConvolution(y, halfTensor({32, 16, 3, 3}, 5), halfTensor({32}, 6), {1, 1}, {1, 1, 1, 1});
    Layer* add = net.addElementWise(c0->outputs[0], cy->outputs[0], "Add");
    Layer* c1 = net.addConvolution(add->outputs[0], halfTensor({32, 32, 3, 3}, 3), halfTensor({32}, 4), {1, 1}, {1, 1, 1, 1});
    Layer* shape = net.addLayer("Shape", {c0->outputs[0]}, 1);
    net.markOutput(c1->outputs[0]);
    net.markOutput(shape->outputs[0]);
    net.topoSort();
    propagateShapes(net, nullptr, true);
    ASSERT_EQ(add->outputs[0]->dims, (Dims{-1, 32, 8, 8}));
    const int64_t other = sameBatch ? 64 : 1;  // y's batch at the max sample
    const InputSamples samples = {{{"x", Dims{32, 16, 8, 8}}, {"y", Dims{32, 16, 8, 8}}},
                                  {{"x", Dims{64, 16, 8, 8}}, {"y", Dims{other, 16, 8, 8}}}};
    // Not the same dim: the Add stays NCHW, and then no reader wants c0's output channels-last.
    EXPECT_EQ(assignGpuLayouts(net, gpu, samples), sameBatch);
    EXPECT_EQ(layout(c0, attr::kLayoutOut), sameBatch ? "nhwc" : "nchw") << sameBatch;
    EXPECT_EQ(layout(add, attr::kLayoutOut), sameBatch ? "nhwc" : "nchw") << sameBatch;
    EXPECT_EQ(shape->inputs[0], c0->outputs[0]) << sameBatch;
  }
}

// A squeeze-excitation block with a residual, as in EfficientNet / RegNetY / MobileNetV3:
//   y = conv1(x); s = sigmoid(conv_fc(GAP(y))) [N, C, 1, 1]; z = y * s + x1; out = conv2(z)
// The gate Mul (a [N, C, 1, 1] broadcast: the same bytes in both orders) and the residual Add run
// channels last, so the block needs no LayoutConvert; where the elementwise kernels do not take
// layouts, or a broadcast differs between the orders, conversions appear instead.
TEST(GpuLayoutPass, ElementwiseLayersKeepTheRegionChannelsLast) {
  for (int variant = 0; variant < 3; ++variant) {
    FakeGpu gpu;
    gpu.elementwiseAware = variant != 1;
    Network net;
    Tensor* x = net.addInput("x", DataType::kHALF, {8, 16, 8, 8});
    Layer* c0 = net.addConvolution(x, halfTensor({32, 16, 3, 3}, 1), halfTensor({32}, 2), {1, 1}, {1, 1, 1, 1});
    Layer* c1 = net.addConvolution(c0->outputs[0], halfTensor({32, 32, 3, 3}, 3), halfTensor({32}, 4), {1, 1}, {1, 1, 1, 1});
    Layer* gap = net.addLayer("GlobalAveragePool", {c1->outputs[0]}, 1);
    Layer* fc = net.addConvolution(gap->outputs[0], halfTensor({32, 32, 1, 1}, 5), halfTensor({32}, 6), {1, 1}, {0, 0, 0, 0});
    Layer* sig = net.addActivation(fc->outputs[0], "Sigmoid");
    Tensor* gate = sig->outputs[0];
    if (variant == 2) {  // a gate of [N, C, H, 1]: its bytes differ between NCHW and NHWC
      Attributes rp;
      rp.set("kernel_shape", std::vector<int64_t>{1, 8});
      Layer* rowPool = net.addLayer("AveragePool", {c1->outputs[0]}, 1, rp);
      gate = rowPool->outputs[0];
    }
    Layer* mul = net.addElementWise(c1->outputs[0], gate, "Mul");
    Layer* add = net.addElementWise(mul->outputs[0], c0->outputs[0], "Add");
    Layer* c2 = net.addConvolution(add->outputs[0], halfTensor({32, 32, 3, 3}, 7), halfTensor({32}, 8), {1, 1}, {1, 1, 1, 1});
    net.markOutput(c2->outputs[0]);
    net.topoSort();
    propagateShapes(net, nullptr, true);
    ASSERT_TRUE(assignGpuLayouts(net, gpu));
    int converts = 0;
    for (auto& l : net.layers()) converts += l->op == "LayoutConvert";
    EXPECT_EQ(layout(c2, attr::kLayoutIn), variant == 0 ? "nhwc" : "nchw") << variant;
    if (variant == 0) {
      EXPECT_EQ(layout(mul, attr::kLayoutIn), "nhwc");
      EXPECT_EQ(layout(mul, attr::kLayoutOut), "nhwc");
      EXPECT_EQ(layout(add, attr::kLayoutOut), "nhwc");
      EXPECT_EQ(mul->inputs[1], gate);  // the [N, C, 1, 1] gate is read as it is
      EXPECT_EQ(converts, 0);
    } else {
      EXPECT_EQ(layout(mul, attr::kLayoutOut), "nchw") << variant;
      EXPECT_GE(converts, 1) << variant;  // c1's and c0's nhwc outputs go back to NCHW for the Mul / Add
    }
  }
}

// MobileNetV2's inverted residual (1x1 expand -> 3x3 depthwise -> 1x1 project) stays channels-last
// through the depthwise conv, and ConvNeXt's 7x7 depthwise conv before a Transpose reads nhwc and
// writes NCHW itself: no LayoutConvert anywhere (the CUDA depthwise tactics take both mixes).
TEST(GpuLayoutPass, DepthwiseBlocksStayChannelsLast) {
  FakeGpu gpu;
  Network net;
  Tensor* x = net.addInput("x", DataType::kHALF, {8, 16, 16, 16});
  Layer* expand = net.addConvolution(x, halfTensor({32, 16, 1, 1}, 1), halfTensor({32}, 2), {1, 1}, {0, 0, 0, 0});
  Layer* dw = net.addConvolution(expand->outputs[0], halfTensor({32, 1, 3, 3}, 3), halfTensor({32}, 4), {1, 1}, {1, 1, 1, 1}, 32);
  dw->attrs.set("kiln_activation", std::string("Clip"));
  dw->attrs.set("kiln_act_alpha", 0.f);
  dw->attrs.set("kiln_act_beta", 6.f);
  Layer* project = net.addConvolution(dw->outputs[0], halfTensor({16, 32, 1, 1}, 5), halfTensor({16}, 6), {1, 1}, {0, 0, 0, 0});
  Layer* dw7 = net.addConvolution(project->outputs[0], halfTensor({16, 1, 7, 7}, 7), halfTensor({16}, 8), {1, 1}, {3, 3, 3, 3}, 16);
  Attributes perm;
  perm.set("perm", std::vector<int64_t>{0, 2, 3, 1});
  Layer* t = net.addLayer("Transpose", {dw7->outputs[0]}, 1, perm);
  net.markOutput(t->outputs[0]);
  net.topoSort();
  propagateShapes(net, nullptr, true);
  ASSERT_TRUE(assignGpuLayouts(net, gpu));
  EXPECT_EQ(layout(dw, attr::kLayoutIn), "nhwc");
  EXPECT_EQ(layout(dw, attr::kLayoutOut), "nhwc");
  EXPECT_EQ(layout(dw7, attr::kLayoutIn), "nhwc");
  EXPECT_EQ(layout(dw7, attr::kLayoutOut), "nchw");
  EXPECT_EQ(dw->inputs[0], expand->outputs[0]);
  EXPECT_EQ(t->inputs[0], dw7->outputs[0]);
  int converts = 0;
  for (auto& l : net.layers()) converts += l->op == "LayoutConvert";
  EXPECT_EQ(converts, 0);
}

using kiln::test::addPermute;
using kiln::test::addReshape;

// ConvNeXt's block (dwconv -> permute to channels last -> a token op -> permute back -> layer
// scale and residual) and SegFormer's token view (Reshape [N, C, H*W] -> Transpose [0, 2, 1] ->
// a token op -> back): with permutes that take layouts, the dwconv writes nhwc, both permutes
// become byte copies (no LayoutConvert), and the 3-D token views are rewritten as 4-D permutes.
// With a dynamic batch (profile opt 8) the same: the views' Reshapes keep the batch as 0.
TEST(GpuLayoutPass, PermutesAtChannelsLastRegionsBecomeCopies) {
  for (int64_t batch : {int64_t(8), int64_t(-1)})
  for (bool aware : {true, false}) {
    SCOPED_TRACE("batch " + std::to_string(batch) + (aware ? " aware" : ""));
    FakeGpu gpu;
    gpu.elementwiseAware = true;
    gpu.transposeAware = aware;
    Network net;
    Tensor* x = net.addInput("x", DataType::kHALF, {batch, 16, 8, 8});
    const int64_t keep = batch < 0 ? 0 : batch;  // Reshape's 0: the input's dim
    Layer* c0 = net.addConvolution(x, halfTensor({32, 16, 3, 3}, 1), halfTensor({32}, 2), {1, 1}, {1, 1, 1, 1});
    Layer* dw = net.addConvolution(c0->outputs[0], halfTensor({32, 1, 7, 7}, 3), halfTensor({32}, 4), {1, 1}, {3, 3, 3, 3}, 32);
    Layer* toLast = addPermute(net, dw->outputs[0], {0, 2, 3, 1});
    Attributes ax;
    ax.set("axis", int64_t(-1));
    Layer* mix = net.addLayer("Softmax", {toLast->outputs[0]}, 1, ax);  // reads plain [N, H, W, C]
    Layer* back = addPermute(net, mix->outputs[0], {0, 3, 1, 2});
    Layer* add = net.addElementWise(back->outputs[0], c0->outputs[0], "Add");
    Layer* c1 = net.addConvolution(add->outputs[0], halfTensor({32, 32, 1, 1}, 5), halfTensor({32}, 6), {1, 1}, {0, 0, 0, 0});
    Layer* flat = addReshape(net, c1->outputs[0], {keep, 32, 64});
    Layer* tokens = addPermute(net, flat->outputs[0], {0, 2, 1});
    Layer* mix2 = net.addLayer("Softmax", {tokens->outputs[0]}, 1, ax);
    Layer* untokens = addPermute(net, mix2->outputs[0], {0, 2, 1});
    Layer* unflat = addReshape(net, untokens->outputs[0], {keep, 32, 8, 8});
    Layer* c2 = net.addConvolution(unflat->outputs[0], halfTensor({16, 32, 1, 1}, 7), halfTensor({16}, 8), {1, 1}, {0, 0, 0, 0});
    net.markOutput(c2->outputs[0]);
    net.topoSort();
    propagateShapes(net, nullptr, true);
    const InputSamples samples = {{{"x", Dims{8, 16, 8, 8}}}, {{"x", Dims{16, 16, 8, 8}}}, {{"x", Dims{1, 16, 8, 8}}}};
    ASSERT_TRUE(assignGpuLayouts(net, gpu, batch < 0 ? samples : InputSamples{}));
    net.topoSort();  // as the builder does after the pass
    propagateShapes(net, nullptr, true);
    int converts = 0, copies = 0, tokenTransposes = 0;
    for (auto& l : net.layers()) {
      converts += l->op == "LayoutConvert";
      if (l->op != "Transpose") continue;
      copies += isLayoutCopyTranspose(l->attrs, l->inputs[0]->dims.size());
      tokenTransposes += l->attrs.getInts("perm") == std::vector<int64_t>{0, 2, 1};
    }
    EXPECT_EQ(tokenTransposes, 0) << aware;  // the token views are 4-D permutes either way
    EXPECT_EQ(c2->inputs[0]->dims, (Dims{batch, 32, 8, 8}));
    if (aware) {
      EXPECT_EQ(layout(dw, attr::kLayoutOut), "nhwc");
      EXPECT_EQ(layout(toLast, attr::kLayoutIn), "nhwc");
      EXPECT_EQ(layout(toLast, attr::kLayoutOut), "nchw");
      EXPECT_EQ(layout(back, attr::kLayoutIn), "nchw");
      EXPECT_EQ(layout(back, attr::kLayoutOut), "nhwc");
      EXPECT_EQ(layout(add, attr::kLayoutOut), "nhwc");
      EXPECT_EQ(layout(c1, attr::kLayoutOut), "nhwc");
      EXPECT_EQ(layout(c2, attr::kLayoutIn), "nhwc");
      EXPECT_EQ(copies, 4);
      EXPECT_EQ(converts, 0);
    } else {
      EXPECT_EQ(copies, 0);
      EXPECT_GE(converts, 1);
    }
  }
}

// DenseNet's dense block: each layer concatenates the block input and every earlier layer's
// 32 new channels, then BN + ReLU (a PointwiseChain) and a 1x1 conv. With a Concat that takes
// layouts the whole block stays nhwc (no LayoutConvert); without one, the block stays NCHW.
TEST(GpuLayoutPass, DenseBlockConcatsStayChannelsLast) {
  for (bool aware : {true, false}) {
    FakeGpu gpu;
    gpu.elementwiseAware = true;
    gpu.concatAware = aware;
    Network net;
    Tensor* x = net.addInput("x", DataType::kHALF, {8, 16, 8, 8});
    Layer* stem = net.addConvolution(x, halfTensor({32, 16, 3, 3}, 1), halfTensor({32}, 2), {1, 1}, {1, 1, 1, 1});
    std::vector<Tensor*> features = {stem->outputs[0]};
    std::vector<Layer*> concats;
    Attributes ax;
    ax.set("axis", int64_t(1));
    for (int k = 0; k < 3; ++k) {
      Layer* cat = net.addLayer("Concat", features, 1, ax);
      concats.push_back(cat);
      Layer* act = net.addActivation(cat->outputs[0], "Relu");
      const int64_t c = 32 * (k + 1);
      Layer* conv = net.addConvolution(act->outputs[0], halfTensor({32, c, 1, 1}, 10 + k), halfTensor({32}, 20 + k), {1, 1}, {0, 0, 0, 0});
      features.push_back(conv->outputs[0]);
    }
    Layer* last = net.addLayer("Concat", features, 1, ax);
    concats.push_back(last);
    Layer* transition = net.addConvolution(last->outputs[0], halfTensor({16, 128, 1, 1}, 30), halfTensor({16}, 31), {1, 1}, {0, 0, 0, 0});
    net.markOutput(transition->outputs[0]);
    net.topoSort();
    propagateShapes(net, nullptr, true);
    // Without: every conv's output is read by a plain Concat, so no tensor is worth converting.
    EXPECT_EQ(assignGpuLayouts(net, gpu), aware);
    int converts = 0;
    for (auto& l : net.layers()) converts += l->op == "LayoutConvert";
    for (Layer* cat : concats) {
      EXPECT_EQ(layout(cat, attr::kLayoutIn), aware ? "nhwc" : "nchw") << aware;
      EXPECT_EQ(layout(cat, attr::kLayoutOut), aware ? "nhwc" : "nchw") << aware;
    }
    EXPECT_EQ(layout(transition, attr::kLayoutIn), aware ? "nhwc" : "nchw") << aware;
    EXPECT_EQ(converts, 0);
  }
}

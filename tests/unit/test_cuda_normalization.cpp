// CUDA normalization-family tactics against the CPU reference kernels: Softmax/LogSoftmax,
// LayerNorm/RMSNorm, GroupNorm/InstanceNorm, BatchNorm, Reduce*, ArgMax/ArgMin, TopK, CumSum.
// Odd sizes, rows cached in registers and streamed, vectorized and scalar paths, broadcast
// parameters, every reduction form, float32/float16/bfloat16 (references from the same rounded
// inputs) and integer types; supports() refusals.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "backends/cuda/norm_group_nhwc.h"
#include "backends/cuda/norm_launch.cuh"
#include "op_test_util.h"

using namespace kiln;
using kiln::test::OpCase;

namespace {

HostTensor uniform(const Dims& d, uint32_t seed, float lo = -3.f, float hi = 3.f) {
  HostTensor t(DataType::kFLOAT, d);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = u(rng);
  return t;
}

//! Integers in [lo, hi] (many ties) as `type`.
HostTensor integers(const Dims& d, uint32_t seed, int lo, int hi, DataType type) {
  HostTensor f(DataType::kFLOAT, d);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(lo, hi);
  for (int64_t i = 0; i < f.count(); ++i) f.as<float>()[i] = static_cast<float>(u(rng));
  return test::convertTo(f, type);
}

HostTensor ints64(const std::vector<int64_t>& v) {
  HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

//! The case with its float inputs converted to `type` (integer inputs unchanged).
OpCase withType(const OpCase& c, DataType type) {
  OpCase o = c;
  for (auto& in : o.inputs)
    if (in.valid() && in.type() == DataType::kFLOAT) in = test::convertTo(in, type);
  return o;
}

//! The case with its half/bf16 inputs widened to float32 (the reference computes in float32).
OpCase widened(const OpCase& c) {
  OpCase o = c;
  for (auto& in : o.inputs)
    if (in.valid() && isHalfType(in.type())) in = test::convertTo(in, DataType::kFLOAT);
  return o;
}

struct Tol {
  double rtol, atol;
};

Tol tolFor(DataType t) {
  if (t == DataType::kHALF) return {4e-3, 4e-3};
  if (t == DataType::kBF16) return {2e-2, 2e-2};
  return {1e-4, 1e-4};
}

//! Runs every CUDA tactic offered for the case (at least one must be) in `type` and compares
//! each output with the reference: integer outputs exactly, float outputs within `tol` (or the
//! type's default tolerance).
void check(const OpCase& base, DataType type, const std::string& what, const Tol* tol = nullptr) {
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const OpCase c = withType(base, type);
  const auto ref = test::runReference(widened(c));
  const auto names = test::tacticNames(*gpu, c);
  ASSERT_FALSE(names.empty()) << what << ": no CUDA tactic offered";
  for (const auto& name : names) {
    const auto got = test::runTactic(*gpu, name, c);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const std::string label = what + " [" + toString(type) + ", tactic " + name + ", output " + std::to_string(i) + "]";
      const DataType ot = got[i].type();
      if (ot == DataType::kINT64 || ot == DataType::kINT32) {
        test::expectClose(got[i], ref[i], 0, 0, label);
      } else {
        // Outputs computed in float32 (e.g. LayerNorm's Mean) get the float32 tolerance.
        const Tol t = tol ? *tol : tolFor(ot);
        test::expectClose(got[i], ref[i], t.rtol, t.atol, label);
      }
    }
  }
}

const DataType kFloatTypes[] = {DataType::kFLOAT, DataType::kHALF, DataType::kBF16};

bool offered(const OpCase& c) {
  auto gpu = getBackend(DeviceType::kGPU, 0);
  return !test::tacticNames(*gpu, c).empty();
}

// ---- Softmax ----------------------------------------------------------------------------------

OpCase softmaxCase(const std::string& op, const Dims& d, int64_t axis, uint32_t seed, bool coerce = false) {
  OpCase c;
  c.op = op;
  c.attrs.set("axis", axis);
  if (coerce) c.attrs.set("kiln_coerce_2d", int64_t(1));
  c.inputs = {uniform(d, seed, -6.f, 6.f)};
  return c;
}

TEST(CudaSoftmax, LastAxisCachedStreamedVectorizedAndScalar) {
  KILN_REQUIRE_GPU();
  // Odd rows (scalar), 768 (vectorized, cached), 3000 (wide row), 20001 (scalar, streamed),
  // 65536 (vectorized, streamed), a single column, many short rows (lane groups below a warp).
  const Dims shapes[] = {{3, 7}, {4, 768}, {2, 3000}, {2, 20001}, {1, 65536}, {5, 1}, {2, 3, 40}, {515, 16}, {97, 40}};
  for (const char* op : {"Softmax", "LogSoftmax"})
    for (const auto& d : shapes)
      for (DataType t : kFloatTypes) check(softmaxCase(op, d, -1, 7), t, std::string(op) + " " + toString(d));
}

TEST(CudaSoftmax, OtherAxesAndLegacyCoercedForm) {
  KILN_REQUIRE_GPU();
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (DataType t : kFloatTypes) {
      check(softmaxCase(op, {2, 5, 9}, 1, 3), t, std::string(op) + " axis 1");
      check(softmaxCase(op, {7, 3}, 0, 4), t, std::string(op) + " axis 0");
    }
    check(softmaxCase(op, {2, 3, 4, 5}, 1, 5, true), DataType::kFLOAT, std::string(op) + " coerced axis 1");
    check(softmaxCase(op, {3, 4}, 2, 6, true), DataType::kFLOAT, std::string(op) + " coerced axis == rank");
  }
}

// ---- LayerNormalization / RMSNormalization --------------------------------------------------

OpCase layerNormCase(const std::string& op, const Dims& x, const Dims& scale, int64_t axis, bool bias, uint32_t seed,
                     int outputs = 1) {
  OpCase c;
  c.op = op;
  c.attrs.set("axis", axis);
  c.attrs.set("epsilon", 1e-5f);
  c.inputs = {uniform(x, seed, -2.f, 4.f), uniform(scale, seed + 1, 0.5f, 1.5f)};
  if (bias) c.inputs.push_back(uniform(scale, seed + 2, -1.f, 1.f));
  c.constant = {false, true, true};
  c.nbOutputs = outputs;
  return c;
}

TEST(CudaLayerNorm, RowsOfManySizes) {
  KILN_REQUIRE_GPU();
  struct Shape {
    Dims x, scale;
    int64_t axis;
  };
  const Shape shapes[] = {
      {{4, 768}, {768}, -1},           // BERT hidden, vectorized and cached
      {{3, 1024}, {1024}, -1},         //
      {{3, 5, 33}, {5, 33}, 1},        // normalized block of 165 (scalar path)
      {{2, 20000}, {20000}, -1},       // streamed
      {{2, 3, 7}, {7}, -1},            // tiny rows
      {{3, 5, 33}, {33}, 1},           // scale broadcast inside the block
      {{2, 4, 16}, {1, 16}, -1},       // leading 1 in the scale: still per element of the row
      {{601, 32}, {32}, -1},           // short rows (SegFormer's 32 channels): lane groups below a warp,
      {{300, 96}, {96}, -1},           // several rows per warp, a partial last block
      {{257, 8}, {8}, -1},             // one vector (or thread) per row
      // The warp-row kernels' register counts: 384 (16 lanes x 3), 1024, 4096 (16 or 32 vectors a
      // thread), widths that are no multiple of the 16-byte vector (single elements: 770, 1023;
      // 1100 in halves does not fit and stays with the generic kernel), a padded last item (1000).
      {{5, 384}, {384}, -1},
      {{3, 4096}, {4096}, -1},
      {{2, 770}, {770}, -1},
      {{9, 1023}, {1023}, -1},
      {{2, 1100}, {1100}, -1},
      {{7, 1000}, {1000}, -1},
      {{2, 3, 256}, {3, 256}, 1},      // the normalized block spans two axes
  };
  for (const auto& s : shapes)
    for (DataType t : kFloatTypes) {
      check(layerNormCase("LayerNormalization", s.x, s.scale, s.axis, true, 11), t, "LayerNorm " + toString(s.x));
      check(layerNormCase("LayerNormalization", s.x, s.scale, s.axis, false, 12), t, "LayerNorm no bias " + toString(s.x));
      check(layerNormCase("RMSNormalization", s.x, s.scale, s.axis, false, 13), t, "RMSNorm " + toString(s.x));
    }
}

// Skip LayerNorm (the residual Add fused in, kiln_skip): cached, streamed and scalar rows.
TEST(CudaLayerNorm, SkipInput) {
  KILN_REQUIRE_GPU();
  uint32_t seed = 30;
  for (const Dims& x : {Dims{4, 768}, Dims{2, 20000}, Dims{2, 3, 7}, Dims{301, 32}, Dims{6, 384}, Dims{3, 4096}, Dims{5, 1023}})
    for (DataType t : kFloatTypes) {
      OpCase c = layerNormCase("LayerNormalization", x, {x.back()}, -1, true, seed += 10);
      c.attrs.set("kiln_skip", int64_t(1));
      c.inputs.push_back(uniform(x, seed + 5, -2.f, 2.f));
      c.constant = {false, true, true, false};
      check(c, t, "skip LayerNorm " + toString(x));
      c.nbOutputs = 2;  // pre-LN blocks: the sum as the second output
      check(c, t, "skip LayerNorm with the sum " + toString(x));
      // RMSNorm with the residual (LLaMA / Qwen): no bias, R as input 3, the sum as output 1.
      OpCase r = layerNormCase("RMSNormalization", x, {x.back()}, -1, false, seed + 7);
      r.attrs.set("kiln_skip", int64_t(1));
      r.inputs.push_back(HostTensor());
      r.inputs.push_back(uniform(x, seed + 8, -2.f, 2.f));
      r.constant = {false, true, false, false};
      check(r, t, "skip RMSNorm " + toString(x));
      r.nbOutputs = 2;
      check(r, t, "skip RMSNorm with the sum " + toString(x));
    }
}

// The warp-row tactics take the widths the BERT / LLM rows have, in every float type.
TEST(CudaLayerNorm, WarpRowsOfferedForCommonWidths) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (int64_t w : {32, 96, 384, 768, 1024, 4096})
    for (DataType t : kFloatTypes) {
      const OpCase ln = withType(layerNormCase("LayerNormalization", {4, w}, {w}, -1, true, 3), t);
      const OpCase rms = withType(layerNormCase("RMSNormalization", {4, w}, {w}, -1, false, 4), t);
      const auto has = [&](const OpCase& c, const std::string& name) {
        const auto n = test::tacticNames(*gpu, c);
        return std::find(n.begin(), n.end(), name) != n.end();
      };
      EXPECT_TRUE(has(ln, "layer_normalization_fp_warp_rows")) << w << " " << toString(t);
      EXPECT_TRUE(has(rms, "rms_normalization_fp_warp_rows")) << w << " " << toString(t);
    }
}

// Rows far from zero (mean 100, spread 1): a one-pass E[x^2] - E[x]^2 in float32 loses ~1e-3 of the
// variance there; the per-thread mean / M2 merge keeps the float32 tolerance (1e-4).
TEST(CudaLayerNorm, OffsetRowsKeepFloat32Accuracy) {
  KILN_REQUIRE_GPU();
  for (const Dims& x : {Dims{8, 768}, Dims{4, 4096}, Dims{16, 96}, Dims{3, 1023}}) {
    OpCase c = layerNormCase("LayerNormalization", x, {x.back()}, -1, true, 77, 3);
    c.inputs[0] = uniform(x, 78, 99.f, 101.f);
    const Tol f32 = tolFor(DataType::kFLOAT);
    check(c, DataType::kFLOAT, "LayerNorm offset rows " + toString(x), &f32);
  }
}

// The warp-row plan (host code): no idle vector slot for the common widths, 16-byte vectors where
// the width allows them, nothing for rows beyond 32 vectors a thread.
TEST(CudaLayerNorm, WarpRowPlan) {
  struct Want {
    int64_t cols;
    size_t elem;
    int lanes, items, vec;
  };
  for (const Want& w : {Want{768, 2, 32, 3, 8}, Want{768, 4, 32, 6, 4}, Want{384, 2, 16, 3, 8}, Want{1024, 2, 32, 4, 8},
                        Want{4096, 2, 32, 16, 8}, Want{4096, 4, 32, 32, 4}, Want{96, 2, 4, 3, 8}, Want{8, 2, 1, 1, 8},
                        Want{1023, 4, 32, 32, 1}, Want{770, 2, 32, 32, 1}}) {
    const cuda::WarpRowPlan p = cuda::planWarpRows(w.cols, w.elem, true);
    EXPECT_EQ(p.lanes, w.lanes) << w.cols << " x " << w.elem << "B";
    EXPECT_EQ(p.items, w.items) << w.cols << " x " << w.elem << "B";
    EXPECT_EQ(p.vec, w.vec) << w.cols << " x " << w.elem << "B";
  }
  EXPECT_EQ(cuda::planWarpRows(1100, 2, true).lanes, 0);      // 1100 halves: no 16-byte vectors, > 1024
  EXPECT_EQ(cuda::planWarpRows(4096, 4, true, 16).lanes, 0);  // skip input: 16 vectors a thread at most
  EXPECT_EQ(cuda::planWarpRows(768, 2, false).vec, 1);
  EXPECT_EQ(cuda::planWarpRows(0, 2, true).lanes, 0);
}

TEST(CudaLayerNorm, MeanAndInvStdDevOutputs) {
  KILN_REQUIRE_GPU();
  const Tol f32 = tolFor(DataType::kFLOAT);
  check(layerNormCase("LayerNormalization", {6, 100}, {100}, -1, true, 21, 3), DataType::kFLOAT, "LayerNorm 3 outputs", &f32);
  check(layerNormCase("LayerNormalization", {2, 3, 64}, {3, 64}, 1, true, 22, 3), DataType::kFLOAT, "LayerNorm 3 outputs axis 1", &f32);
  // half input: Y in half, Mean/InvStdDev in float32 (stash_type 1).
  const Tol mixed{4e-3, 4e-3};
  check(layerNormCase("LayerNormalization", {6, 256}, {256}, -1, true, 23, 3), DataType::kHALF, "LayerNorm 3 outputs half", &mixed);
}

// ---- GroupNormalization / InstanceNormalization ---------------------------------------------

OpCase groupNormCase(const Dims& x, int64_t groups, bool perGroupAffine, uint32_t seed) {
  OpCase c;
  c.op = "GroupNormalization";
  c.attrs.set("num_groups", groups);
  c.attrs.set("epsilon", 1e-5f);
  const Dims p = {perGroupAffine ? groups : x[1]};
  if (perGroupAffine) c.attrs.set("kiln_per_group_affine", int64_t(1));
  c.inputs = {uniform(x, seed, -1.f, 3.f), uniform(p, seed + 1, 0.5f, 1.5f), uniform(p, seed + 2, -1.f, 1.f)};
  c.constant = {false, true, true};
  return c;
}

//! The case with the residual the fusion moves in (fuse_residual.cpp: ResNet-GN's norm -> Add ->
//! ReLU), Y = act(norm(X) + R), input 3 of X's shape.
OpCase withResidual(OpCase c, uint32_t seed, const char* act) {
  c.inputs.push_back(uniform(c.inputs[0].dims(), seed, -2.f, 2.f));
  c.constant.push_back(false);
  if (act) c.attrs.set("kiln_activation", std::string(act));
  return c;
}

TEST(CudaGroupNorm, GroupsPerChannelAndPerGroupAffine) {
  KILN_REQUIRE_GPU();
  for (DataType t : kFloatTypes) {
    check(groupNormCase({2, 6, 5, 7}, 3, false, 31), t, "GroupNorm 3 groups, spatial 35");
    check(groupNormCase({2, 6, 5, 7}, 3, true, 32), t, "GroupNorm per-group affine");
    check(groupNormCase({1, 32, 64, 64}, 8, false, 33), t, "GroupNorm large groups");
    check(groupNormCase({3, 4}, 2, false, 34), t, "GroupNorm rank 2");
    check(groupNormCase({40, 16, 2, 3}, 8, false, 36), t, "GroupNorm 640 rows of 12 (lane groups)");
    // One group of 262,144 (PoolFormer's GroupNorm(1)): the split tactic cuts it into many chunks.
    check(groupNormCase({1, 4, 256, 256}, 1, false, 37), t, "GroupNorm one large group");
    // A mean far from zero against the spread: the split tactic's shifted one-pass variance.
    OpCase far = groupNormCase({2, 8, 32, 32}, 2, false, 38);
    far.inputs[0] = uniform({2, 8, 32, 32}, 38, 99.f, 101.f);
    check(far, t, "GroupNorm mean 100, spread 2");
  }
  // A fused residual (fuse_residual: GroupNorm -> Add -> ReLU in ResNet-GN) on the row kernel
  // (small groups) and the split one (large groups), odd and vectorizable spatial sizes.
  for (DataType t : kFloatTypes) {
    check(withResidual(groupNormCase({2, 6, 5, 7}, 3, false, 71), 72, "Relu"), t, "GroupNorm + residual + Relu");
    check(withResidual(groupNormCase({2, 32, 32, 32}, 4, false, 73), 74, nullptr), t, "GroupNorm large groups + residual");
    check(withResidual(groupNormCase({1, 4, 128, 128}, 1, false, 75), 76, "Silu"), t, "GroupNorm one group + residual + Silu");
  }
  // A fused activation (fuse_groupnorm + fuse_activation: GroupNorm -> SiLU in ResNet-GN, UNets).
  for (const char* act : {"Silu", "Relu", "Gelu", "Mish"}) {
    OpCase c = groupNormCase({2, 8, 6, 5}, 4, false, 35);
    c.attrs.set("kiln_activation", std::string(act));
    for (DataType t : kFloatTypes) check(c, t, std::string("GroupNorm + ") + act);
  }
}

//! The case with X and Y channels-last (the GPU layout pass's nhwc; a residual too, which follows
//! Y's layout): every tactic offered must be a channels-last one (the NCHW tactics refuse the
//! layout attributes), and Y brought back to NCHW matches the reference of the plain case.
void checkChannelsLast(const OpCase& base, DataType type, const std::string& what) {
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const OpCase c = withType(base, type);
  const auto ref = test::runReference(widened(c));
  OpCase dev = c;
  dev.attrs.set("kiln_layout_in", std::string("nhwc"));
  dev.attrs.set("kiln_layout_out", std::string("nhwc"));
  dev.inputs[0] = test::channelsLast(dev.inputs[0], true);
  if (dev.inputs.size() > 3) dev.inputs[3] = test::channelsLast(dev.inputs[3], true);
  const auto names = test::tacticNames(*gpu, dev);
  ASSERT_FALSE(names.empty()) << what << ": no channels-last tactic";
  for (const auto& name : names) {
    EXPECT_NE(name.find("_nhwc"), std::string::npos) << what << ": " << name << " took nhwc tensors";
    const auto got = test::runTactic(*gpu, name, dev);
    const Tol t = tolFor(type);
    test::expectClose(test::channelsLast(got[0], false), ref[0], t.rtol, t.atol, what + " [" + toString(type) + ", " + name + "]");
  }
}

TEST(CudaGroupNorm, ChannelsLast) {
  KILN_REQUIRE_GPU();
  for (DataType t : kFloatTypes) {
    checkChannelsLast(groupNormCase({8, 64, 14, 14}, 32, false, 51), t, "GroupNorm nhwc 2 channels per group");
    checkChannelsLast(groupNormCase({4, 256, 7, 9}, 32, false, 52), t, "GroupNorm nhwc 8 channels per group");
    checkChannelsLast(groupNormCase({2, 96, 5, 5}, 32, false, 53), t, "GroupNorm nhwc 3 channels per group");
    checkChannelsLast(groupNormCase({2, 64, 56, 56}, 1, false, 54), t, "GroupNorm nhwc one group (PoolFormer)");
    checkChannelsLast(groupNormCase({2, 48, 6, 7}, 4, true, 55), t, "GroupNorm nhwc per-group affine");
    checkChannelsLast(groupNormCase({2, 1024, 3, 5}, 32, false, 56), t, "GroupNorm nhwc 1024 channels");
    OpCase far = groupNormCase({3, 32, 20, 20}, 8, false, 57);
    far.inputs[0] = uniform({3, 32, 20, 20}, 57, 99.f, 101.f);
    checkChannelsLast(far, t, "GroupNorm nhwc mean 100, spread 2");
    OpCase silu = groupNormCase({2, 32, 6, 5}, 8, false, 58);
    silu.attrs.set("kiln_activation", std::string("Silu"));
    checkChannelsLast(silu, t, "GroupNorm nhwc + Silu");
    OpCase in;
    in.op = "InstanceNormalization";
    in.attrs.set("epsilon", 1e-5f);
    in.inputs = {uniform({2, 16, 9, 9}, 59, -1.f, 3.f), uniform({16}, 60, 0.5f, 1.5f), uniform({16}, 61, -1.f, 1.f)};
    checkChannelsLast(in, t, "InstanceNorm nhwc");
  }
  // The fused residual (and the ReLU after it), over a grid of several chunks per image and a
  // pixel count that leaves a partial unrolled step.
  for (DataType t : kFloatTypes) {
    checkChannelsLast(withResidual(groupNormCase({3, 64, 23, 29}, 32, false, 63), 64, "Relu"), t, "GroupNorm nhwc + residual + Relu");
    checkChannelsLast(withResidual(groupNormCase({2, 256, 7, 7}, 32, false, 65), 66, nullptr), t, "GroupNorm nhwc + residual");
    // Batch 1, many chunks: the apply pass's warp-per-group sums, with a partial last warp (96
    // channels: 12 x 21 = 252 threads), and one group (the statistics pass's warp sums).
    checkChannelsLast(groupNormCase({1, 96, 40, 40}, 32, false, 67), t, "GroupNorm nhwc batch 1, 252 threads");
    checkChannelsLast(groupNormCase({1, 64, 56, 56}, 1, false, 68), t, "GroupNorm nhwc batch 1, one group");
    // Warp-shuffle sums over a partial last warp (320 channels: 40 x 6 = 240 threads in float16,
    // 80 x 3 in float32): one group (PoolFormer's stage 3), and groups of 8 channels (two lanes a
    // group in float32), with the residual.
    checkChannelsLast(groupNormCase({1, 320, 14, 14}, 1, false, 83), t, "GroupNorm nhwc one group, 320 channels, batch 1");
    checkChannelsLast(groupNormCase({3, 320, 9, 11}, 1, false, 84), t, "GroupNorm nhwc one group, 320 channels");
    checkChannelsLast(withResidual(groupNormCase({2, 320, 6, 5}, 40, false, 85), 86, "Relu"), t,
                      "GroupNorm nhwc 40 groups of 8, 320 channels + residual");
  }
  // Batch-1 CNN shapes the one-pass tactic takes (1, 2 and 4 pixel vectors per thread; 1024
  // channels: one pixel per block row in float32), with the residual and ReLU; InstanceNorm (a group
  // per channel).
  for (DataType t : kFloatTypes) {
    checkChannelsLast(withResidual(groupNormCase({1, 256, 56, 56}, 32, false, 69), 70, "Relu"), t, "GroupNorm nhwc b1 256x56x56 + residual");
    checkChannelsLast(groupNormCase({1, 256, 80, 80}, 32, false, 71), t, "GroupNorm nhwc b1 256x80x80");
    checkChannelsLast(withResidual(groupNormCase({1, 1024, 7, 7}, 32, false, 72), 73, "Relu"), t, "GroupNorm nhwc b1 1024x7x7");
    checkChannelsLast(groupNormCase({2, 64, 17, 19}, 32, false, 74), t, "GroupNorm nhwc b2 partial chunks");
    OpCase in;
    in.op = "InstanceNormalization";
    in.attrs.set("epsilon", 1e-5f);
    in.inputs = {uniform({1, 128, 24, 24}, 75, -1.f, 3.f), uniform({128}, 76, 0.5f, 1.5f), uniform({128}, 77, -1.f, 1.f)};
    checkChannelsLast(in, t, "InstanceNorm nhwc b1");
  }
  // More channels than one block's row of vectors holds: no channels-last tactic.
  OpCase wide = withType(groupNormCase({1, 4096, 2, 2}, 32, false, 62), DataType::kHALF);
  wide.attrs.set("kiln_layout_in", std::string("nhwc"));
  wide.attrs.set("kiln_layout_out", std::string("nhwc"));
  EXPECT_TRUE(test::tacticNames(*getBackend(DeviceType::kGPU, 0), wide).empty());
}

//! Runs p's plan (float32 X of one image, [hw, c]) three ways: a plain launch, a launch
//! replayed from a CUDA graph, and with Y written over X; each must match a float64 reference.
void expectNhwcPlanMatchesFloat64(cuda::GroupNormNhwcParams p, const std::string& what) {
  ASSERT_EQ(p.n, 1);
  const HostTensor x = uniform({p.hw, p.c}, 80, -2.f, 4.f), scale = uniform({p.c}, 81, 0.5f, 1.5f), bias = uniform({p.c}, 82);
  const size_t bytes = x.bytes();
  void *dx = nullptr, *dy = nullptr, *dscale = nullptr, *dbias = nullptr, *ws = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, 3 * bytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dscale, scale.bytes()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dbias, bias.bytes()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ws, std::max<size_t>(p.workspaceBytes(), 16)), cudaSuccess);
  cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(dscale, scale.data(), scale.bytes(), cudaMemcpyHostToDevice);
  cudaMemcpy(dbias, bias.data(), bias.bytes(), cudaMemcpyHostToDevice);
  cudaMemset(dy, 0xff, 2 * bytes);
  char* inPlace = static_cast<char*>(dy) + 2 * bytes;
  cudaMemcpy(inPlace, x.data(), bytes, cudaMemcpyHostToDevice);
  p.x = dx, p.scale = dscale, p.bias = dbias;
  cudaStream_t s;
  cudaStreamCreate(&s);
  p.y = dy;
  cuda::launchGroupNormNhwc(p, ws, s);
  p.y = static_cast<char*>(dy) + bytes;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  cuda::launchGroupNormNhwc(p, ws, s);
  ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  p.x = p.y = inPlace;
  cuda::launchGroupNormNhwc(p, ws, s);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  HostTensor y(DataType::kFLOAT, {3, p.hw, p.c});
  cudaMemcpy(y.data(), dy, 3 * bytes, cudaMemcpyDeviceToHost);
  // Not bit for bit: the blocks' shared-memory float atomics add in any order.
  const int64_t cpg = p.c / p.groups;
  double worst[3] = {0, 0, 0};
  for (int64_t g0 = 0; g0 < p.groups; ++g0) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < p.hw; ++i)
      for (int64_t c = g0 * cpg; c < (g0 + 1) * cpg; ++c) sum += x.as<float>()[i * p.c + c];
    const double mean = sum / double(p.hw * cpg);
    for (int64_t i = 0; i < p.hw; ++i)
      for (int64_t c = g0 * cpg; c < (g0 + 1) * cpg; ++c) sq += std::pow(x.as<float>()[i * p.c + c] - mean, 2);
    const double inv = 1 / std::sqrt(sq / double(p.hw * cpg) + 1e-5);
    for (int64_t i = 0; i < p.hw; ++i)
      for (int64_t c = g0 * cpg; c < (g0 + 1) * cpg; ++c) {
        const double want = (x.as<float>()[i * p.c + c] - mean) * inv * scale.as<float>()[c] + bias.as<float>()[c];
        for (int k = 0; k < 3; ++k) worst[k] = std::max(worst[k], std::abs(y.as<float>()[k * p.hw * p.c + i * p.c + c] - want));
      }
  }
  EXPECT_LT(worst[0], 1e-4) << what << " against float64";
  EXPECT_LT(worst[1], 1e-4) << what << " replayed from a CUDA graph against float64";
  EXPECT_LT(worst[2], 1e-4) << what << " with Y over X against float64";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  for (void* d : {dx, dy, dscale, dbias, ws}) cudaFree(d);
}

// The one-pass plan is taken at batch 1 and refused where the grid cannot be resident; its
// cooperative launch captures into a CUDA graph; the launch and the graph's replay both match a
// float64 reference.
TEST(CudaGroupNorm, OnePassPlanAndGraphCapture) {
  KILN_REQUIRE_GPU();
  cuda::GroupNormNhwcParams p;
  p.type = DataType::kFLOAT;
  p.n = 64, p.c = 256, p.hw = 56 * 56, p.groups = 32, p.eps = 1e-5f;
  EXPECT_FALSE(cuda::planGroupNormNhwcOnePass(p)) << "batch 64 of 256x56x56 cannot be resident";
  EXPECT_EQ(p.perThread, 0);
  p.n = 1;
  ASSERT_TRUE(cuda::planGroupNormNhwcOnePass(p));
  EXPECT_TRUE(p.perThread == 1 || p.perThread == 2 || p.perThread == 4) << p.perThread;
  EXPECT_GE(p.chunks * int64_t(p.ty) * p.perThread, p.hw);
  expectNhwcPlanMatchesFloat64(p, "one-pass GroupNorm");
}

// The cluster plan (tactic *_nhwc_cluster) takes an image whose pixels fit the shared memory of
// one thread-block cluster of 8 (128x56x56 in float32: 1.6 MB, as ResNet-50-GN's largest batch-1
// GroupNorm, 256x56x56, in float16) and refuses a larger one (256x56x56 float32: 3.2 MB); its
// cluster launch captures into a CUDA graph; plain, replayed and in place it matches float64.
TEST(CudaGroupNorm, ClusterPlanAndGraphCapture) {
  KILN_REQUIRE_GPU();
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major < 9) GTEST_SKIP() << "thread-block clusters need compute capability 9.0";
  cuda::GroupNormNhwcParams p;
  p.type = DataType::kFLOAT;
  p.n = 1, p.c = 256, p.hw = 56 * 56, p.groups = 32, p.eps = 1e-5f;
  EXPECT_FALSE(cuda::planGroupNormNhwcCluster(p)) << "256x56x56 float32 exceeds a cluster's shared memory";
  EXPECT_EQ(p.cluster, 0);
  EXPECT_GT(p.workspaceBytes(), 0u) << "the two-pass plan stays";
  p.c = 128;
  ASSERT_TRUE(cuda::planGroupNormNhwcCluster(p));
  EXPECT_EQ(p.cluster, 8);
  EXPECT_GE(p.pixels * p.cluster, p.hw);
  EXPECT_EQ(p.workspaceBytes(), 0u);
  expectNhwcPlanMatchesFloat64(p, "cluster GroupNorm");
  // A small image (8 blocks) with a partial last block and groups of 3 channels.
  cuda::GroupNormNhwcParams q;
  q.type = DataType::kFLOAT;
  q.n = 1, q.c = 96, q.hw = 13 * 11, q.groups = 32, q.eps = 1e-5f;
  ASSERT_TRUE(cuda::planGroupNormNhwcCluster(q));
  EXPECT_EQ(q.cluster, 8);
  expectNhwcPlanMatchesFloat64(q, "cluster GroupNorm 96x13x11");
  // The tactic is offered for a batch-1 channels-last layer (CudaGroupNorm.ChannelsLast runs it on
  // every shape it takes) and not where no image fits.
  auto offered = [](const Dims& d) {
    OpCase c = withType(groupNormCase(d, 32, false, 90), DataType::kHALF);
    c.attrs.set("kiln_layout_in", std::string("nhwc"));
    c.attrs.set("kiln_layout_out", std::string("nhwc"));
    const auto names = test::tacticNames(*getBackend(DeviceType::kGPU, 0), c);
    return std::find(names.begin(), names.end(), "group_normalization_fp_cuda_nhwc_cluster") != names.end();
  };
  EXPECT_TRUE(offered({1, 256, 56, 56}));
  EXPECT_FALSE(offered({1, 256, 112, 112})) << "6.4 MB of float16 per image";
}

// The NCHW one-pass plan (tactic *_split_onepass) is taken for ResNet-50-GN's batch-1 GroupNorms,
// vectorized (56x56) and not (7x7), and refused at batch 64; its cooperative launch, with a fused
// residual and Relu, written over X, and replayed from a CUDA graph, matches a float64 reference.
TEST(CudaGroupNorm, SplitOnePassPlanAndGraphCapture) {
  KILN_REQUIRE_GPU();
  EXPECT_EQ(cuda::planGroupSplitOnePass(64 * 32, 8 * 56 * 56, 56 * 56, DataType::kHALF).perThread, 0)
      << "batch 64 of 256x56x56 cannot be resident";
  EXPECT_GT(cuda::planGroupSplitOnePass(32, 64 * 49, 49, DataType::kHALF).perThread, 0) << "batch 1 of 2048x7x7";
  struct Shape {
    int64_t c, hw, groups;
  };
  for (const Shape sh : {Shape{256, 56 * 56, 32}, Shape{2048, 7 * 7, 32}, Shape{64, 9, 1}}) {
    cuda::RowNormParams p;
    p.type = DataType::kFLOAT;
    p.eps = 1e-5f;
    p.groups = sh.groups;
    p.rows = sh.groups;
    p.perGroup = sh.c / sh.groups;
    p.spatial = sh.hw;
    p.cols = p.perGroup * sh.hw;
    p.mode = cuda::RowNormParams::kPerChannel;
    p.act = static_cast<int>(ActKind::kRelu);
    const cuda::GroupSplitPlan plan = cuda::planGroupSplitOnePass(p.rows, p.cols, p.spatial, p.type);
    ASSERT_GT(plan.perThread, 0) << "C " << sh.c << " HW " << sh.hw;
    EXPECT_GE(plan.chunks * plan.chunkElems, p.cols);
    const int64_t n = sh.c * sh.hw;
    const HostTensor x = uniform({n}, 90, 3.f, 7.f), res = uniform({n}, 91), scale = uniform({sh.c}, 92, 0.5f, 1.5f),
                     bias = uniform({sh.c}, 93);
    const size_t bytes = x.bytes();
    void *dx = nullptr, *dx2 = nullptr, *dres = nullptr, *dscale = nullptr, *dbias = nullptr, *ws = nullptr;
    for (auto [ptr, size] : {std::pair<void**, size_t>{&dx, bytes}, {&dx2, bytes}, {&dres, bytes}, {&dscale, scale.bytes()},
                             {&dbias, bias.bytes()}, {&ws, plan.workspaceBytes(p.rows)}})
      ASSERT_EQ(cudaMalloc(ptr, size), cudaSuccess);
    cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dx2, x.data(), bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dres, res.data(), bytes, cudaMemcpyHostToDevice);
    cudaMemcpy(dscale, scale.data(), scale.bytes(), cudaMemcpyHostToDevice);
    cudaMemcpy(dbias, bias.data(), bias.bytes(), cudaMemcpyHostToDevice);
    p.scale = dscale, p.bias = dbias, p.residual = dres;
    cudaStream_t s;
    cudaStreamCreate(&s);
    p.x = p.y = dx;  // in place
    cuda::launchGroupNormSplit(p, plan, ws, s);
    p.x = p.y = dx2;
    cudaGraph_t g = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    cuda::launchGroupNormSplit(p, plan, ws, s);
    ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    HostTensor y(DataType::kFLOAT, {n}), yGraph(DataType::kFLOAT, {n});
    cudaMemcpy(y.data(), dx, bytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(yGraph.data(), dx2, bytes, cudaMemcpyDeviceToHost);
    const float* xv = x.as<float>();
    double worst = 0, worstGraph = 0;
    for (int64_t gi = 0; gi < sh.groups; ++gi) {
      const int64_t b = gi * p.cols;
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < p.cols; ++i) sum += xv[b + i];
      const double mean = sum / double(p.cols);
      for (int64_t i = 0; i < p.cols; ++i) sq += (xv[b + i] - mean) * (xv[b + i] - mean);
      const double inv = 1 / std::sqrt(sq / double(p.cols) + 1e-5);
      for (int64_t i = 0; i < p.cols; ++i) {
        const int64_t c = gi * p.perGroup + i / sh.hw;
        const double want = std::max(0.0, (xv[b + i] - mean) * inv * scale.as<float>()[c] + bias.as<float>()[c] + res.as<float>()[b + i]);
        worst = std::max(worst, std::abs(y.as<float>()[b + i] - want));
        worstGraph = std::max(worstGraph, std::abs(yGraph.as<float>()[b + i] - want));
      }
    }
    EXPECT_LT(worst, 1e-4) << "one-pass NCHW GroupNorm against float64, C " << sh.c << " HW " << sh.hw;
    EXPECT_LT(worstGraph, 1e-4) << "the same replayed from a CUDA graph, C " << sh.c << " HW " << sh.hw;
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    for (void* d : {dx, dx2, dres, dscale, dbias, ws}) cudaFree(d);
  }
}

TEST(CudaInstanceNorm, Shapes) {
  KILN_REQUIRE_GPU();
  for (const Dims& d : {Dims{2, 3, 17}, Dims{2, 4, 8, 8}, Dims{1, 2, 3, 3000}}) {
    OpCase c;
    c.op = "InstanceNormalization";
    c.attrs.set("epsilon", 1e-5f);
    c.inputs = {uniform(d, 41, -1.f, 3.f), uniform({d[1]}, 42, 0.5f, 1.5f), uniform({d[1]}, 43, -1.f, 1.f)};
    for (DataType t : kFloatTypes) check(c, t, "InstanceNorm " + toString(d));
  }
}

// ---- BatchNormalization -------------------------------------------------------------------------

OpCase batchNormCase(const Dims& x, bool perActivation, uint32_t seed) {
  OpCase c;
  c.op = "BatchNormalization";
  c.attrs.set("epsilon", 1e-5f);
  const Dims p = perActivation ? Dims(x.begin() + 1, x.end()) : Dims{x[1]};
  if (perActivation) c.attrs.set("kiln_per_activation", int64_t(1));
  c.inputs = {uniform(x, seed), uniform(p, seed + 1, 0.5f, 1.5f), uniform(p, seed + 2, -1.f, 1.f), uniform(p, seed + 3, -1.f, 1.f),
              uniform(p, seed + 4, 0.5f, 2.f)};
  c.constant = {false, true, true, true, true};
  return c;
}

TEST(CudaBatchNorm, InferencePerChannelAndPerActivation) {
  KILN_REQUIRE_GPU();
  for (DataType t : kFloatTypes) {
    check(batchNormCase({2, 3, 5, 5}, false, 51), t, "BatchNorm spatial 25");
    check(batchNormCase({2, 8, 4, 4}, false, 52), t, "BatchNorm spatial 16 (vectorized)");
    check(batchNormCase({4, 10}, false, 53), t, "BatchNorm rank 2");
    check(batchNormCase({2, 3, 4}, true, 54), t, "BatchNorm per activation");
  }
}

// ---- Reduce* ----------------------------------------------------------------------------------

OpCase reduceCase(const std::string& op, const HostTensor& x, const std::vector<int64_t>* axes, bool keepDims,
                  bool noopEmpty = false) {
  OpCase c;
  c.op = op;
  c.attrs.set("keepdims", int64_t(keepDims ? 1 : 0));
  if (noopEmpty) c.attrs.set("noop_with_empty_axes", int64_t(1));
  c.inputs = {x};
  if (axes) {
    c.inputs.push_back(ints64(*axes));
    c.constant = {false, true};
  }
  return c;
}

const char* kReduceOps[] = {"ReduceSum",  "ReduceMean",   "ReduceMax",       "ReduceMin",       "ReduceProd",
                            "ReduceL1",   "ReduceL2",     "ReduceLogSum",    "ReduceLogSumExp", "ReduceSumSquare"};

//! Positive inputs for the log-sums and products (values near 1 keep products of 1000 terms
//! within float16's range).
HostTensor reduceInput(const std::string& op, const Dims& d, uint32_t seed) {
  if (op == "ReduceProd") return uniform(d, seed, 0.97f, 1.03f);
  if (op == "ReduceLogSum") return uniform(d, seed, 0.1f, 2.f);
  return uniform(d, seed);
}

TEST(CudaReduce, EveryOpEveryForm) {
  KILN_REQUIRE_GPU();
  struct Form {
    Dims x;
    std::vector<int64_t> axes;
    bool keep;
  };
  const Form forms[] = {
      {{3, 4, 5}, {-1}, true},         // row form, odd rows
      {{3, 4, 5}, {1}, true},          // one middle axis
      {{3, 4, 5}, {0, 2}, false},      // two separate axes (general)
      {{3, 4, 5}, {}, false},          // everything
      {{4, 1000}, {1}, false},         // long rows, vectorized
      {{2, 3, 1, 64}, {1, 2, 3}, true},  // trailing axes with a size-1 dim
      {{64, 40, 3}, {0}, false},       // leading axis (general, few outputs)
      {{5, 1}, {1}, true},             // reducing only a size-1 dim
  };
  for (const char* op : kReduceOps)
    for (const auto& f : forms) {
      const HostTensor x = reduceInput(op, f.x, 61);
      const std::vector<int64_t>* axes = f.axes.empty() ? nullptr : &f.axes;
      const std::string what = std::string(op) + " " + toString(f.x) + " axes " + std::to_string(f.axes.size());
      for (DataType t : kFloatTypes) {
        Tol tol = tolFor(t);
        if (t == DataType::kFLOAT) tol = {1e-4, 1e-3};  // float32 sums of up to 1000 terms
        check(reduceCase(op, x, axes, f.keep), t, what, &tol);
      }
    }
}

TEST(CudaReduce, NoopEmptyAxesAndEmptyReductions) {
  KILN_REQUIRE_GPU();
  const std::vector<int64_t> none;
  check(reduceCase("ReduceSum", uniform({3, 5}, 71), &none, true, true), DataType::kFLOAT, "noop empty axes");
  check(reduceCase("ReduceMax", uniform({3, 5}, 71), nullptr, true, true), DataType::kHALF, "noop without axes");
  const std::vector<int64_t> ax1 = {1};
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceLogSumExp"})
    check(reduceCase(op, HostTensor(DataType::kFLOAT, {2, 0, 3}), &ax1, true), DataType::kFLOAT, std::string(op) + " over an empty axis");
}

TEST(CudaReduce, IntegerTypes) {
  KILN_REQUIRE_GPU();
  const std::vector<int64_t> last = {-1}, middle = {1};
  for (DataType t : {DataType::kINT32, DataType::kINT64})
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceSumSquare"}) {
      const HostTensor x = std::string(op) == "ReduceProd" ? integers({3, 4, 5}, 81, -2, 2, t) : integers({3, 4, 5}, 81, -50, 50, t);
      check(reduceCase(op, x, &last, true), t, std::string(op) + " int last axis");
      check(reduceCase(op, x, &middle, false), t, std::string(op) + " int middle axis");
    }
}

// ---- ArgMax / ArgMin ----------------------------------------------------------------------------

OpCase argCase(const std::string& op, const HostTensor& x, int64_t axis, bool keep, bool last) {
  OpCase c;
  c.op = op;
  c.attrs.set("axis", axis);
  c.attrs.set("keepdims", int64_t(keep ? 1 : 0));
  c.attrs.set("select_last_index", int64_t(last ? 1 : 0));
  c.inputs = {x};
  return c;
}

TEST(CudaArgMax, AxesTypesAndTies) {
  KILN_REQUIRE_GPU();
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (DataType t : kFloatTypes) {
      check(argCase(op, uniform({5, 37}, 91), 1, true, false), t, std::string(op) + " last axis");
      check(argCase(op, uniform({4, 3000}, 92), -1, false, false), t, std::string(op) + " long rows");
      check(argCase(op, uniform({3, 9, 4}, 93), 1, true, false), t, std::string(op) + " middle axis");
    }
    for (DataType t : {DataType::kINT32, DataType::kINT64})
      for (bool last : {false, true}) {
        check(argCase(op, integers({6, 300}, 94, 0, 4, t), 1, true, last), t, std::string(op) + " int ties rows");
        check(argCase(op, integers({3, 50, 7}, 95, 0, 3, t), 1, false, last), t, std::string(op) + " int ties columns");
      }
  }
}

// ---- TopK -------------------------------------------------------------------------------------

OpCase topkCase(const HostTensor& x, int64_t k, int64_t axis, bool largest) {
  OpCase c;
  c.op = "TopK";
  c.attrs.set("axis", axis);
  c.attrs.set("largest", int64_t(largest ? 1 : 0));
  c.inputs = {x, ints64({k})};
  c.constant = {false, true};
  c.nbOutputs = 2;
  return c;
}

TEST(CudaTopK, SmallAndFullKBothDirections) {
  KILN_REQUIRE_GPU();
  for (bool largest : {true, false}) {
    for (DataType t : kFloatTypes) {
      check(topkCase(uniform({4, 50}, 101), 5, -1, largest), t, "TopK k=5");
      check(topkCase(uniform({3, 7, 5}, 102), 3, 1, largest), t, "TopK middle axis");
      check(topkCase(uniform({2, 5000}, 103), 10, 1, largest), t, "TopK long rows");
      check(topkCase(uniform({3, 17}, 104), 17, 1, largest), t, "TopK k = len");
      check(topkCase(uniform({3, 17}, 105), 0, 1, largest), t, "TopK k = 0");
    }
    for (DataType t : {DataType::kINT32, DataType::kINT64})
      check(topkCase(integers({5, 40}, 106, 0, 6, t), 12, 1, largest), t, "TopK int ties");
  }
}

// ---- CumSum -------------------------------------------------------------------------------------

OpCase cumsumCase(const HostTensor& x, int64_t axis, bool exclusive, bool reverse) {
  OpCase c;
  c.op = "CumSum";
  c.attrs.set("exclusive", int64_t(exclusive ? 1 : 0));
  c.attrs.set("reverse", int64_t(reverse ? 1 : 0));
  c.inputs = {x, ints64({axis}).reshaped({})};
  c.constant = {false, true};
  return c;
}

TEST(CudaCumSum, RowsColumnsExclusiveReverse) {
  KILN_REQUIRE_GPU();
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      const std::string mode = std::string(exclusive ? " exclusive" : "") + (reverse ? " reverse" : "");
      for (DataType t : kFloatTypes) {
        Tol tol = tolFor(t);
        if (t == DataType::kFLOAT) tol = {1e-4, 2e-3};  // float32 prefix sums of up to 2500 terms
        check(cumsumCase(uniform({3, 2500}, 111), 1, exclusive, reverse), t, "CumSum long rows" + mode, &tol);
        check(cumsumCase(uniform({3, 10}, 112), -1, exclusive, reverse), t, "CumSum short rows" + mode, &tol);
        check(cumsumCase(uniform({4, 6, 5}, 113), 1, exclusive, reverse), t, "CumSum middle axis" + mode, &tol);
      }
      for (DataType t : {DataType::kINT32, DataType::kINT64}) {
        check(cumsumCase(integers({2, 3000}, 114, -100, 100, t), 1, exclusive, reverse), t, "CumSum int rows" + mode);
        check(cumsumCase(integers({4, 6, 5}, 115, -100, 100, t), 0, exclusive, reverse), t, "CumSum int axis 0" + mode);
      }
      // The axis as a run-time input (a value input: read on the host when the shape is planned).
      OpCase rt = cumsumCase(integers({4, 6, 5}, 116, -100, 100, DataType::kINT32), -1, exclusive, reverse);
      rt.constant = {false, false};
      check(rt, DataType::kINT32, "CumSum run-time axis" + mode);
    }
}

// ---- supports() -------------------------------------------------------------------------------

TEST(CudaNormalizationSupports, RefusesWhatItDoesNotHandle) {
  KILN_REQUIRE_GPU();
  const std::vector<int64_t> ax = {1};
  // Types without a CUDA kernel.
  EXPECT_FALSE(offered(reduceCase("ReduceSum", test::convertTo(uniform({3, 4}, 1), DataType::kDOUBLE), &ax, true)));
  EXPECT_FALSE(offered(reduceCase("ReduceL2", integers({3, 4}, 2, 0, 5, DataType::kINT32), &ax, true)));
  EXPECT_FALSE(offered(reduceCase("ReduceLogSumExp", integers({3, 4}, 2, 0, 5, DataType::kINT64), &ax, true)));
  EXPECT_FALSE(offered(argCase("ArgMax", integers({3, 4}, 3, 0, 5, DataType::kUINT8), 1, true, false)));
  EXPECT_FALSE(offered(withType(softmaxCase("Softmax", {2, 3}, -1, 4), DataType::kDOUBLE)));
  // Mixed types: half X with float32 scale.
  OpCase ln = layerNormCase("LayerNormalization", {2, 8}, {8}, -1, true, 5);
  ln.inputs[0] = test::convertTo(ln.inputs[0], DataType::kHALF);
  EXPECT_FALSE(offered(ln));
  // Double statistics.
  OpCase stash = layerNormCase("LayerNormalization", {2, 8}, {8}, -1, true, 6);
  stash.attrs.set("stash_type", int64_t(11));
  EXPECT_FALSE(offered(stash));
  // Training-mode BatchNormalization.
  OpCase bn = batchNormCase({2, 3, 4, 4}, false, 7);
  bn.attrs.set("training_mode", int64_t(1));
  bn.nbOutputs = 3;
  EXPECT_FALSE(offered(bn));
  // And the supported forms of the same ops are offered.
  EXPECT_TRUE(offered(reduceCase("ReduceSum", integers({3, 4}, 2, 0, 5, DataType::kINT32), &ax, true)));
  EXPECT_TRUE(offered(cumsumCase(uniform({3, 4}, 8), 1, false, false)));
  EXPECT_TRUE(offered(batchNormCase({2, 3, 4, 4}, false, 7)));
}

}  // namespace

// LayerNorm writing the next FP8 matmul's input codes (kiln_fp8_out_scale, fuse_fp8_quantize.cpp):
// only the warp-row kernel takes it (where it takes the float Y); the codes decode to the
// reference's within one E4M3 step plus the type's LayerNorm tolerance (the kernel's float32
// statistics and its skip sum rounded to the type, against the reference's, may round to a neighbour).
TEST(CudaLayerNorm, Float8CodesOut) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  const float scale = 0.02f;
  auto decode = [&](const HostTensor& codes) {
    HostTensor f(DataType::kFLOAT, codes.dims());
    for (int64_t i = 0; i < codes.count(); ++i) f.as<float>()[i] = narrowToFloat(DataType::kFP8E4M3FN, codes.as<uint8_t>()[i]) * scale;
    return f;
  };
  uint32_t seed = 500;
  for (const Dims& x : {Dims{4, 768}, Dims{6, 384}, Dims{3, 4096}, Dims{2, 770}})
    for (bool skip : {false, true})
      for (int64_t codesAt : {0, 1})  // instead of Y, or beside it (post-LN: Y is read elsewhere too)
      for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16}) {
        OpCase c = layerNormCase("LayerNormalization", x, {x.back()}, -1, true, seed += 10);
        c.attrs.set("kiln_fp8_out_scale", scale);
        c.attrs.set("kiln_fp8_codes_output", codesAt);
        // Codes instead of Y, with a skip input: the Sum output too (GPT-2's pre-LN residual; a run
        // on the H100 once lost it, NaN downstream).
        c.nbOutputs = codesAt == 1 || skip ? 2 : 1;
        if (skip) {
          c.attrs.set("kiln_skip", int64_t(1));
          c.inputs.push_back(uniform(x, seed + 5, -2.f, 2.f));
          c.constant = {false, true, true, false};
        }
        const OpCase typed = withType(c, t);
        const std::string what = std::string("LayerNorm to float8 codes ") + toString(x) + (skip ? " skip " : " ") + toString(t) +
                                 (codesAt ? " beside Y" : "");
        OpCase plain = typed;
        plain.attrs.erase("kiln_fp8_out_scale");
        plain.attrs.erase("kiln_fp8_codes_output");
        plain.nbOutputs = 1;
        const auto plainNames = test::tacticNames(*gpu, plain);
        const bool warp = std::find(plainNames.begin(), plainNames.end(), "layer_normalization_fp_warp_rows") != plainNames.end();
        const auto names = test::tacticNames(*gpu, typed);
        if (!warp) {  // e.g. 4096 float32 values with a skip input: more registers than the kernel has
          EXPECT_TRUE(names.empty()) << what;
          continue;
        }
        ASSERT_EQ(names, std::vector<std::string>{"layer_normalization_fp_warp_rows"}) << what;
        const auto ref = test::runReference(widened(typed));
        ASSERT_EQ(ref[codesAt].type(), DataType::kFP8E4M3FN) << what;
        const auto got = test::runTactic(*gpu, names[0], typed);
        test::expectClose(decode(got[codesAt]), decode(ref[codesAt]), 0.13, scale / 64 + tolFor(t).atol, what);
        if (c.nbOutputs == 2) test::expectClose(got[1 - codesAt], ref[1 - codesAt], tolFor(t).rtol, tolFor(t).atol, what + (codesAt ? " (Y)" : " (Sum)"));
      }
  OpCase wide = layerNormCase("LayerNormalization", {2, 1100}, {1100}, -1, true, 7);
  wide.attrs.set("kiln_fp8_out_scale", scale);
  EXPECT_FALSE(offered(withType(wide, DataType::kHALF))) << "1100 halves do not fit the warp rows: no kernel writes the codes";
}

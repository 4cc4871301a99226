// CUDA conv_pool tactics (cuDNN conv/conv-transpose, the depthwise kernels, pooling) against the CPU
// reference kernels, for every tactic offered, in float32 (TF32 tolerance), float16 and bfloat16.
#include <cmath>
#include <random>

#include "backends/cuda/conv_depthwise.h"
#include "backends/in_place.h"
#include "op_test_util.h"
#include "ops/conv_layout.h"

namespace kiln {
namespace {

using test::OpCase;

HostTensor randomTensor(Dims dims, uint32_t seed, float scale = 1.f) {
  HostTensor t(DataType::kFLOAT, dims);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (int64_t i = 0; i < t.count(); ++i) t.as<float>()[i] = u(rng);
  return t;
}

//! The case with every float input stored as `type`, and the float32 case holding the same
//! (rounded) values that the reference runs on.
struct TypedCase {
  OpCase device, reference;
};
TypedCase typed(const OpCase& c, DataType type) {
  TypedCase t{c, c};
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.inputs[i].valid() || c.inputs[i].type() != DataType::kFLOAT) continue;
    t.device.inputs[i] = test::convertTo(c.inputs[i], type);
    t.reference.inputs[i] = test::convertTo(t.device.inputs[i], DataType::kFLOAT);
  }
  return t;
}

struct Tol {
  double rtol, atol;
};
//! Tolerance for a conv whose outputs sum `k` products of values in [-1, 1].
Tol convTol(DataType type, int64_t k) {
  const double s = std::sqrt(static_cast<double>(k));
  switch (type) {
    case DataType::kHALF: return {5e-3, 2e-3 * s};
    case DataType::kBF16: return {2e-2, 1e-2 * s};
    default: return {1e-2, 2e-3 * s};  // TF32
  }
}

//! Runs every tactic the GPU offers for `c` in `type` and compares each with the reference.
//! Returns the tactic names (so that callers can check which were offered).
std::vector<std::string> checkAllTactics(const OpCase& c, DataType type, Tol tol, const std::string& what) {
  auto gpu = getBackend(DeviceType::kGPU, 0);
  TypedCase t = typed(c, type);
  std::vector<HostTensor> ref = test::runReference(t.reference);
  std::vector<std::string> names = test::tacticNames(*gpu, t.device);
  EXPECT_FALSE(names.empty()) << what << ": no tactic offered";
  for (const std::string& name : names) {
    std::vector<HostTensor> got;
    try {
      got = test::runTactic(*gpu, name, t.device);
    } catch (const Error& e) {
      ADD_FAILURE() << what << " tactic " << name << " (" << toString(type) << ") threw: " << e.what();
      continue;
    }
    for (size_t o = 0; o < ref.size(); ++o)
      test::expectClose(got[o], ref[o], tol.rtol, tol.atol, what + " tactic " + name + " " + toString(type) + " output " + std::to_string(o));
  }
  return names;
}

OpCase convCase(Dims x, Dims w, Attributes attrs, bool bias, bool residual, uint32_t seed, const std::string& op = "Conv") {
  OpCase c;
  c.op = op;
  c.attrs = std::move(attrs);
  c.inputs = {randomTensor(x, seed), randomTensor(w, seed + 1)};
  c.constant = {false, true, true, false};
  const int64_t outChannels = op == "Conv" ? w[0] : w[1] * c.attrs.getInt("group", 1);
  c.inputs.push_back(bias ? randomTensor({outChannels}, seed + 2) : HostTensor());
  if (residual) {
    // Y's shape: from the reference's shape inference on the case without the residual.
    OpCase probe = c;
    probe.inputs.resize(3);
    LayerDesc d = test::describe(probe, false);
    c.inputs.push_back(randomTensor(d.outputs[0].dims, seed + 3));
  }
  return c;
}

int64_t reduction(const OpCase& c) {
  const Dims& w = c.inputs[1].dims();
  int64_t k = 1;
  for (size_t i = 1; i < w.size(); ++i) k *= w[i];
  return c.op == "Conv" ? k : k * w[0];
}

void checkConv(const OpCase& c, const std::string& what, std::vector<DataType> types = {DataType::kFLOAT}) {
  for (DataType t : types) checkAllTactics(c, t, convTol(t, reduction(c)), what);
}

//! Attributes from int lists; the scalar int attributes (group, ceil_mode, ...) take the list's one value.
Attributes attrs(std::initializer_list<std::pair<const char*, std::vector<int64_t>>> ints) {
  Attributes a;
  for (auto& [k, v] : ints) {
    const std::string key = k;
    const bool scalar = key == "group" || key == "ceil_mode" || key == "count_include_pad" || key == "storage_order";
    if (scalar) a.set(key, v.at(0));
    else a.set(key, v);
  }
  return a;
}

bool offered(const std::vector<std::string>& names, const std::string& n) {
  return std::find(names.begin(), names.end(), n) != names.end();
}

const std::vector<DataType> kAllFloat = {DataType::kFLOAT, DataType::kHALF, DataType::kBF16};

TEST(CudaConv, ResNetShapes) {
  KILN_REQUIRE_GPU();
  Attributes stem = attrs({{"strides", {2, 2}}, {"pads", {3, 3, 3, 3}}});
  stem.set("kiln_activation", std::string("Relu"));
  auto names = checkAllTactics(convCase({2, 3, 33, 31}, {8, 3, 7, 7}, stem, true, false, 1), DataType::kFLOAT,
                               convTol(DataType::kFLOAT, 147), "7x7 s2 p3 + bias + relu");
  for (const char* n : {"conv_fp_cudnn_0", "conv_fp_cudnn_1", "conv_fp_cudnn_2", "conv_fp_cudnn_3"}) EXPECT_TRUE(offered(names, n)) << n;
  EXPECT_FALSE(offered(names, "conv_fp_depthwise"));
  checkConv(convCase({2, 16, 9, 9}, {24, 16, 1, 1}, {}, true, false, 2), "1x1 + bias", kAllFloat);
  Attributes r3 = attrs({{"pads", {1, 1, 1, 1}}});
  r3.set("kiln_activation", std::string("Relu"));
  checkConv(convCase({2, 8, 14, 14}, {8, 8, 3, 3}, r3, true, true, 3), "3x3 + bias + residual + relu", kAllFloat);
  checkConv(convCase({1, 16, 15, 15}, {32, 16, 1, 1}, attrs({{"strides", {2, 2}}}), false, false, 4), "1x1 s2 downsample");
}

TEST(CudaConv, GroupsDilationPads) {
  KILN_REQUIRE_GPU();
  checkConv(convCase({1, 12, 10, 11}, {18, 4, 3, 3}, attrs({{"group", {3}}, {"pads", {1, 1, 1, 1}}}), true, false, 10),
            "groups 3", kAllFloat);
  checkConv(convCase({1, 4, 17, 17}, {6, 4, 3, 3}, attrs({{"dilations", {2, 2}}, {"pads", {2, 2, 2, 2}}}), false, false, 11),
            "dilation 2");
  checkConv(convCase({1, 4, 11, 12}, {5, 4, 3, 3}, attrs({{"pads", {1, 0, 2, 1}}}), true, false, 12), "asymmetric pads");
  Attributes same;
  same.set("auto_pad", std::string("SAME_UPPER"));
  same.set("strides", std::vector<int64_t>{2, 2});
  checkConv(convCase({1, 3, 10, 10}, {4, 3, 3, 3}, same, false, false, 13), "SAME_UPPER s2");
  checkConv(convCase({2, 4, 20}, {6, 4, 5}, attrs({{"strides", {2}}, {"pads", {2, 2}}}), true, false, 14), "1-D conv",
            kAllFloat);
}

TEST(CudaConv, Activations) {
  KILN_REQUIRE_GPU();
  const std::vector<std::pair<const char*, std::pair<float, float>>> acts = {
      {"Sigmoid", {0.f, 0.f}}, {"Tanh", {0.f, 0.f}}, {"Gelu", {0.f, 0.f}},      {"Clip", {0.f, 0.5f}},
      {"LeakyRelu", {0.1f, 0.f}}, {"HardSwish", {0.f, 0.f}}, {"Silu", {0.f, 0.f}}, {"Mish", {0.f, 0.f}}};
  uint32_t seed = 20;
  for (auto& [name, ab] : acts) {
    Attributes a = attrs({{"pads", {1, 1, 1, 1}}});
    a.set("kiln_activation", std::string(name));
    a.set("kiln_act_alpha", ab.first);
    a.set("kiln_act_beta", ab.second);
    checkConv(convCase({1, 6, 9, 10}, {7, 6, 3, 3}, a, true, seed % 2 == 0, seed), std::string("activation ") + name);
    ++seed;
  }
}

TEST(CudaConv, Float32WithoutTf32) {
  KILN_REQUIRE_GPU();
  Attributes a = attrs({{"pads", {1, 1, 1, 1}}});
  a.set("kiln_tf32", int64_t(0));
  OpCase c = convCase({1, 32, 12, 12}, {16, 32, 3, 3}, a, true, false, 30);
  checkAllTactics(c, DataType::kFLOAT, Tol{1e-4, 1e-4}, "fp32 without TF32");
}

TEST(CudaConv, DepthwiseMobileNet) {
  KILN_REQUIRE_GPU();
  for (int64_t stride : {1, 2}) {
    Attributes a = attrs({{"group", {16}}, {"pads", {1, 1, 1, 1}}, {"strides", {stride, stride}}});
    a.set("kiln_activation", std::string("Clip"));
    a.set("kiln_act_alpha", 0.f);
    a.set("kiln_act_beta", 0.6f);
    OpCase c = convCase({2, 16, 13, 14}, {16, 1, 3, 3}, a, true, false, 40 + static_cast<uint32_t>(stride));
    for (DataType t : kAllFloat) {
      auto names = checkAllTactics(c, t, convTol(t, 9), "depthwise s" + std::to_string(stride));
      EXPECT_TRUE(offered(names, "conv_fp_depthwise"));
    }
  }
  // TF-style asymmetric pads, residual, dilation.
  checkConv(convCase({1, 8, 12, 12}, {8, 1, 3, 3}, attrs({{"group", {8}}, {"pads", {0, 0, 1, 1}}, {"strides", {2, 2}}}), false,
                     true, 43),
            "depthwise asymmetric pads + residual");
  checkConv(convCase({1, 8, 12, 11}, {8, 1, 3, 3}, attrs({{"group", {8}}, {"pads", {2, 2, 2, 2}}, {"dilations", {2, 2}}}), true,
                     false, 44),
            "depthwise dilation 2", kAllFloat);
}

TEST(CudaConv, ConvTranspose) {
  KILN_REQUIRE_GPU();
  Attributes a = attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"output_padding", {1, 1}}});
  checkConv(convCase({1, 8, 7, 6}, {8, 4, 3, 3}, a, true, false, 50, "ConvTranspose"), "transpose s2 op1 + bias", kAllFloat);
  Attributes g = attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"group", {2}}});
  g.set("kiln_activation", std::string("Relu"));
  checkConv(convCase({2, 8, 5, 5}, {8, 3, 4, 4}, g, true, false, 51, "ConvTranspose"), "transpose groups + relu");
  checkConv(convCase({1, 4, 9}, {4, 3, 3}, attrs({{"strides", {3}}}), false, false, 52, "ConvTranspose"), "transpose 1-D");
}

// Geometries cuDNN's dgrad cannot express (ONNX's test_convtranspose_output_shape: output_shape
// [10, 8] needs a negative pad; output_padding at or beyond the stride): cuDNN's tactics are not offered,
// conv_transpose_fp_direct is and agrees with the reference; and it also runs a plain geometry.
TEST(CudaConv, ConvTransposeAnyGeometry) {
  KILN_REQUIRE_GPU();
  Attributes shape = attrs({{"strides", {3, 2}}, {"output_shape", {10, 8}}});
  Attributes pad = attrs({{"strides", {2, 2}}, {"output_padding", {2, 1}}, {"dilations", {3, 1}}});
  pad.set("kiln_activation", std::string("Sigmoid"));
  const OpCase odd[] = {convCase({1, 1, 3, 3}, {1, 2, 3, 3}, shape, false, false, 53, "ConvTranspose"),
                        convCase({2, 6, 4, 5}, {6, 2, 3, 3}, [&] { Attributes a = pad; a.set("group", int64_t(3)); return a; }(), true,
                                 false, 54, "ConvTranspose"),
                        // Output padding beyond the stride (ONNX allows it below the dilation).
                        convCase({1, 4, 5, 5}, {4, 4, 3, 3}, attrs({{"dilations", {2, 2}}, {"output_padding", {1, 1}}}), false, false,
                                 62, "ConvTranspose")};
  for (const OpCase& c : odd)
    for (DataType t : kAllFloat) {
      auto names = checkAllTactics(c, t, convTol(t, reduction(c)), "transpose, geometry beyond dgrad");
      EXPECT_TRUE(offered(names, "conv_transpose_fp_direct")) << toString(t);
      EXPECT_FALSE(offered(names, "conv_fp_cudnn_0")) << toString(t);
    }
  const OpCase c3 = convCase({1, 3, 2, 2, 3}, {3, 2, 2, 3, 2}, attrs({{"strides", {1, 2, 2}}}), true, false, 55, "ConvTranspose");
  auto names = checkAllTactics(c3, DataType::kFLOAT, convTol(DataType::kFLOAT, reduction(c3)), "transpose 3-D");
  EXPECT_TRUE(offered(names, "conv_transpose_fp_direct"));
}

// ViT's patch embedding: kernel = stride = 16, C = 3 (conv_half_cublaslt_patch_*), a 2x2/2 one with a residual
// and an activation, and NCHW 1x1 convs (P = 1, X read in place): MobileNetV2's expansion with
// ReLU6 and projection with a residual, and one whose images are not 16-byte aligned (C*H*W odd,
// the element-aligned plan). Every offered tactic against the reference.
TEST(CudaConv, PatchEmbedding) {
  KILN_REQUIRE_GPU();
  Attributes p16 = attrs({{"strides", {16, 16}}});
  Attributes p2 = attrs({{"strides", {2, 2}}});
  p2.set("kiln_activation", std::string("Relu"));
  Attributes relu6;
  relu6.set("kiln_activation", std::string("Clip"));
  relu6.set("kiln_act_alpha", 0.f);
  relu6.set("kiln_act_beta", 0.6f);
  const OpCase cases[] = {convCase({2, 3, 32, 48}, {24, 3, 16, 16}, p16, true, false, 70),
                          convCase({3, 8, 6, 10}, {16, 8, 2, 2}, p2, true, true, 71),
                          convCase({2, 16, 7, 7}, {96, 16, 1, 1}, relu6, true, false, 73),
                          convCase({2, 96, 7, 7}, {16, 96, 1, 1}, {}, true, true, 74),
                          convCase({3, 5, 3, 5}, {7, 5, 1, 1}, relu6, true, true, 75)};
  for (const OpCase& c : cases)
    for (DataType t : {DataType::kHALF, DataType::kBF16}) {
      auto names = checkAllTactics(c, t, convTol(t, reduction(c)), "patch conv");
      EXPECT_TRUE(offered(names, "conv_half_cublaslt_patch_0")) << toString(t);
    }
  EXPECT_FALSE(offered(checkAllTactics(convCase({1, 3, 32, 32}, {8, 3, 16, 16}, attrs({{"strides", {8, 8}}}), true, false, 72), DataType::kHALF,
                                       convTol(DataType::kHALF, 3 * 256), "overlapping patches"),
                       "conv_half_cublaslt_patch_0"));
}

// Large kernels as im2col + GEMM batched over the groups (conv_half_cublaslt_im2col_*): wav2vec2's
// positional Conv1d (kernel 128, padding 64, 16 groups; here 64 channels over 37 frames) with a GELU,
// a 2-D 7x7 grouped one with stride, dilation, asymmetric pads, a residual and an odd image size
// (images after the first not 16-byte aligned: the element-aligned plan), a 3-D one. Every offered
// tactic against the reference; small kernels are not offered it.
TEST(CudaConv, Im2colGemmLargeKernels) {
  KILN_REQUIRE_GPU();
  Attributes pos = attrs({{"group", {16}}, {"pads", {64, 64}}});
  pos.set("kiln_activation", std::string("Gelu"));
  Attributes g2 = attrs({{"group", {2}}, {"strides", {2, 1}}, {"dilations", {1, 2}}, {"pads", {3, 2, 1, 4}}});
  const OpCase cases[] = {convCase({3, 64, 37}, {64, 4, 128}, pos, true, false, 90),
                          convCase({2, 6, 13, 11}, {10, 3, 7, 7}, g2, true, true, 91),
                          convCase({1, 4, 6, 7, 5}, {3, 4, 4, 4, 2}, attrs({{"pads", {1, 1, 0, 2, 1, 1}}}), false, false, 92)};
  for (const OpCase& c : cases)
    for (DataType t : {DataType::kHALF, DataType::kBF16}) {
      auto names = checkAllTactics(c, t, convTol(t, reduction(c)), "im2col conv " + toString(c.inputs[1].dims()));
      EXPECT_TRUE(offered(names, "conv_half_cublaslt_im2col_0")) << toString(t);
    }
  auto names = test::tacticNames(*getBackend(DeviceType::kGPU, 0), typed(convCase({1, 8, 9, 9}, {8, 8, 3, 3}, {}, false, false, 93), DataType::kHALF).device);
  EXPECT_FALSE(offered(names, "conv_half_cublaslt_im2col_0")) << "a 3x3 kernel";
}

TEST(CudaConv, SupportsRefuses) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  OpCase dbl = convCase({1, 4, 8, 8}, {4, 4, 3, 3}, {}, false, false, 60);
  dbl.inputs[0] = test::convertTo(dbl.inputs[0], DataType::kDOUBLE);
  dbl.inputs[1] = test::convertTo(dbl.inputs[1], DataType::kDOUBLE);
  EXPECT_TRUE(test::tacticNames(*gpu, dbl).empty()) << "float64 conv must be refused";
  // 5x5 depthwise: not the 3x3 kernel (cuDNN and the tiled kernel, CudaConv.DepthwiseTiled*).
  auto names = test::tacticNames(*gpu, convCase({1, 8, 9, 9}, {8, 1, 5, 5}, attrs({{"group", {8}}}), false, false, 61));
  EXPECT_FALSE(offered(names, "conv_fp_depthwise"));
  EXPECT_TRUE(offered(names, "conv_fp_cudnn_0"));
  OpCase lp;
  lp.op = "LpPool";
  lp.attrs = attrs({{"kernel_shape", {2, 2}}});
  lp.inputs = {test::convertTo(randomTensor({1, 2, 4, 4}, 63), DataType::kDOUBLE)};
  EXPECT_TRUE(test::tacticNames(*gpu, lp).empty()) << "float64 LpPool must be refused";
  OpCase mp;
  mp.op = "MaxPool";
  mp.attrs = attrs({{"kernel_shape", {2, 2}}});
  mp.inputs = {test::convertTo(randomTensor({1, 2, 4, 4}, 64), DataType::kDOUBLE)};
  EXPECT_TRUE(test::tacticNames(*gpu, mp).empty());
}

OpCase poolCase(const std::string& op, Dims x, Attributes a, uint32_t seed, int outputs = 1) {
  OpCase c;
  c.op = op;
  c.attrs = std::move(a);
  c.inputs = {randomTensor(x, seed)};
  c.nbOutputs = outputs;
  return c;
}

const Tol kExact{0, 0};
Tol avgTol(DataType t) { return t == DataType::kFLOAT ? Tol{1e-5, 1e-6} : (t == DataType::kHALF ? Tol{2e-3, 1e-3} : Tol{1e-2, 4e-3}); }

TEST(CudaPool, MaxPool) {
  KILN_REQUIRE_GPU();
  OpCase resnet = poolCase("MaxPool", {2, 8, 15, 16}, attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}}), 70);
  for (DataType t : kAllFloat) checkAllTactics(resnet, t, kExact, "maxpool 3x3 s2 p1");
  checkAllTactics(poolCase("MaxPool", {1, 3, 10, 11}, attrs({{"kernel_shape", {3, 2}}, {"strides", {2, 2}}, {"ceil_mode", {1}},
                                                             {"pads", {0, 1, 1, 0}}}), 71),
                  DataType::kFLOAT, kExact, "maxpool ceil_mode asymmetric pads");
  checkAllTactics(poolCase("MaxPool", {1, 2, 9, 9}, attrs({{"kernel_shape", {2, 2}}, {"dilations", {2, 2}}}), 72, 2),
                  DataType::kFLOAT, kExact, "maxpool dilation + indices");
  checkAllTactics(poolCase("MaxPool", {2, 3, 7, 6}, attrs({{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}, {"storage_order", {1}}}), 73, 2),
                  DataType::kHALF, kExact, "maxpool column-major indices");
  checkAllTactics(poolCase("MaxPool", {1, 3, 20}, attrs({{"kernel_shape", {4}}, {"strides", {3}}}), 74), DataType::kBF16, kExact,
                  "maxpool 1-D");
  OpCase ints = poolCase("MaxPool", {1, 4, 8, 8}, attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}}), 75);
  ints.inputs[0] = test::convertTo(randomTensor({1, 4, 8, 8}, 75, 100.f), DataType::kINT32);
  checkAllTactics(ints, DataType::kINT32, kExact, "maxpool int32");
  ints.inputs[0] = test::convertTo(randomTensor({1, 4, 8, 8}, 76, 100.f), DataType::kINT8);
  checkAllTactics(ints, DataType::kINT8, kExact, "maxpool int8");
}

TEST(CudaPool, AveragePool) {
  KILN_REQUIRE_GPU();
  for (int64_t include : {0, 1}) {
    OpCase c = poolCase("AveragePool", {2, 5, 13, 14},
                        attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"count_include_pad", {include}}}),
                        80 + static_cast<uint32_t>(include));
    for (DataType t : kAllFloat) checkAllTactics(c, t, avgTol(t), "avgpool count_include_pad " + std::to_string(include));
  }
  checkAllTactics(poolCase("AveragePool", {1, 3, 10, 9}, attrs({{"kernel_shape", {2, 3}}, {"strides", {2, 2}}, {"ceil_mode", {1}},
                                                                 {"pads", {1, 0, 0, 1}}}), 82),
                  DataType::kFLOAT, avgTol(DataType::kFLOAT), "avgpool ceil_mode asymmetric pads");
  Attributes same = attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}});
  same.set("auto_pad", std::string("SAME_LOWER"));
  checkAllTactics(poolCase("AveragePool", {1, 2, 8, 7}, same, 83), DataType::kFLOAT, avgTol(DataType::kFLOAT), "avgpool SAME_LOWER");
}

TEST(CudaPool, GlobalPools) {
  KILN_REQUIRE_GPU();
  // ResNet-50's head (warp per plane) and large planes (block per plane).
  for (Dims x : {Dims{2, 32, 7, 7}, Dims{1, 4, 64, 65}, Dims{3, 5, 1, 1}, Dims{2, 3, 10}}) {
    for (DataType t : kAllFloat) {
      checkAllTactics(poolCase("GlobalAveragePool", x, {}, 90), t, avgTol(t), "global average " + toString(x));
      checkAllTactics(poolCase("GlobalMaxPool", x, {}, 91), t, kExact, "global max " + toString(x));
    }
  }
  OpCase ints = poolCase("GlobalMaxPool", {2, 3, 5, 5}, {}, 92);
  ints.inputs[0] = test::convertTo(randomTensor({2, 3, 5, 5}, 92, 1000.f), DataType::kINT32);
  checkAllTactics(ints, DataType::kINT32, kExact, "global max int32");
}

//! `c` with a quiet NaN in X at every `every`-th element (first at `first`).
OpCase withNaNs(OpCase c, int64_t first, int64_t every) {
  HostTensor& x = c.inputs[0];
  for (int64_t i = first; i < x.count(); i += every) x.as<float>()[i] = std::nanf("");
  return c;
}

TEST(CudaPool, PlainFastPathShapes) {
  KILN_REQUIRE_GPU();
  // 2-D pools with plain layouts and no Indices take pool2dPlainKernel (3x3 windows its unrolled
  // instance): odd sizes, batch 1, windows past the edges, integer max pools, and more outputs
  // than one grid of threads covers.
  const Attributes resnet = attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  checkAllTactics(poolCase("MaxPool", {8, 64, 112, 112}, resnet, 100), DataType::kHALF, kExact, "maxpool stem grid-stride");
  checkAllTactics(withNaNs(poolCase("MaxPool", {1, 3, 17, 33}, resnet, 101), 4, 23), DataType::kFLOAT, kExact, "maxpool NaN batch 1");
  checkAllTactics(poolCase("MaxPool", {1, 5, 9, 7}, attrs({{"kernel_shape", {5, 5}}, {"pads", {2, 2, 2, 2}}}), 102), DataType::kBF16,
                  kExact, "maxpool 5x5 p2");
  OpCase ints = poolCase("MaxPool", {2, 3, 9, 7}, attrs({{"kernel_shape", {2, 2}}, {"strides", {2, 2}}, {"ceil_mode", {1}}}), 103);
  for (DataType t : {DataType::kINT8, DataType::kUINT8, DataType::kINT32, DataType::kINT64}) {
    ints.inputs[0] = test::convertTo(randomTensor({2, 3, 9, 7}, 103, 100.f), t);
    checkAllTactics(ints, t, kExact, std::string("maxpool 2x2 ceil ") + toString(t));
  }
  for (int64_t include : {0, 1}) {
    Attributes a = attrs({{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}, {"count_include_pad", {include}}});
    for (DataType t : kAllFloat)
      checkAllTactics(poolCase("AveragePool", {1, 3, 17, 33}, a, 104), t, avgTol(t), "avgpool 3x3 s1 cip " + std::to_string(include));
    checkAllTactics(poolCase("AveragePool", {2, 8, 7, 7}, attrs({{"kernel_shape", {7, 7}}, {"count_include_pad", {include}}}), 105),
                    DataType::kHALF, avgTol(DataType::kHALF), "avgpool 7x7 window");
  }
}

TEST(CudaPool, GlobalPoolRowGroups) {
  KILN_REQUIRE_GPU();
  // Plain X: rows of 1, 9, 49 and 196 elements take 1, 4, 16 and 32 lanes (groups that leave a
  // warp part-used at the end), long rows a block each; 1.2M rows of one element outnumber one grid.
  for (Dims x : {Dims{3, 5, 7, 7}, Dims{2, 3, 3, 3}, Dims{2, 7, 14, 14}, Dims{1, 2, 150, 150}, Dims{7, 3, 1, 1}})
    for (DataType t : kAllFloat) {
      checkAllTactics(poolCase("GlobalAveragePool", x, {}, 110), t, avgTol(t), "global average " + toString(x));
      checkAllTactics(withNaNs(poolCase("GlobalMaxPool", x, {}, 111), 2, 61), t, kExact, "global max NaN " + toString(x));
    }
  checkAllTactics(poolCase("GlobalAveragePool", {2, 600000, 1, 1}, {}, 112), DataType::kFLOAT, avgTol(DataType::kFLOAT),
                  "global average 1.2M rows");
  OpCase ints = poolCase("GlobalMaxPool", {3, 5, 7, 7}, {}, 113);
  for (DataType t : {DataType::kINT8, DataType::kUINT8, DataType::kINT64}) {
    ints.inputs[0] = test::convertTo(randomTensor({3, 5, 7, 7}, 113, 100.f), t);
    checkAllTactics(ints, t, kExact, std::string("global max ") + toString(t));
  }
  // Rows of whole 16-byte vectors take vector loads: 1, 2, 8 and 98 vectors per row (1, 1, 8 and
  // 32 lanes in float16), a block per row for 256x256 planes; int8 rows of 16 and 32 elements.
  for (Dims x : {Dims{4, 3, 2, 4}, Dims{2, 3, 4, 4}, Dims{2, 6, 8, 8}, Dims{3, 5, 28, 28}, Dims{1, 2, 256, 256}})
    for (DataType t : kAllFloat) {
      checkAllTactics(poolCase("GlobalAveragePool", x, {}, 114), t, avgTol(t), "global average vectors " + toString(x));
      checkAllTactics(withNaNs(poolCase("GlobalMaxPool", x, {}, 115), 3, 37), t, kExact, "global max vectors NaN " + toString(x));
    }
  for (Dims x : {Dims{3, 5, 4, 4}, Dims{2, 3, 4, 8}}) {
    OpCase i8 = poolCase("GlobalMaxPool", x, {}, 116);
    i8.inputs[0] = test::convertTo(randomTensor(x, 116, 100.f), DataType::kINT8);
    checkAllTactics(i8, DataType::kINT8, kExact, "global max int8 vectors " + toString(x));
  }
}

}  // namespace
}  // namespace kiln

// ---- channels-last (nhwc) layouts of the GPU layout pass ------------------------------------------

namespace kiln {
namespace {

using test::channelsLast;

//! Runs every GPU tactic for `c` with X (and a residual R) stored per `inLast` / `outLast` and
//! compares Y (brought back to NCHW) with the reference of the plain case, in `type`.
//! The device case with X (and a residual R) stored per `inLast` / `outLast`, and the layout attributes saying so.
OpCase withLayouts(OpCase dev, bool inLast, bool outLast) {
  dev.attrs.set("kiln_layout_in", std::string(inLast ? "nhwc" : "nchw"));
  dev.attrs.set("kiln_layout_out", std::string(outLast ? "nhwc" : "nchw"));
  if (inLast) dev.inputs[0] = channelsLast(dev.inputs[0], true);
  if (outLast && dev.op == "Conv" && dev.inputs.size() > 3 && dev.inputs[3].valid()) dev.inputs[3] = channelsLast(dev.inputs[3], true);
  return dev;
}

void checkLayouts(const OpCase& plain, DataType type, bool inLast, bool outLast, Tol tol, const std::string& what) {
  auto gpu = getBackend(DeviceType::kGPU, 0);
  TypedCase t = typed(plain, type);
  std::vector<HostTensor> ref = test::runReference(t.reference);
  OpCase dev = withLayouts(t.device, inLast, outLast);
  std::vector<std::string> names = test::tacticNames(*gpu, dev);
  ASSERT_FALSE(names.empty()) << what << ": no tactic takes these layouts";
  for (const std::string& name : names) {
    const std::string desc = what + " tactic " + name + " " + toString(type) + (inLast ? " in:nhwc" : " in:nchw") +
                             (outLast ? " out:nhwc" : " out:nchw");
    std::vector<HostTensor> got = test::runTactic(*gpu, name, dev);
    HostTensor y = outLast && got[0].dims().size() == 4 ? channelsLast(got[0], false) : got[0];
    test::expectClose(y, ref[0], tol.rtol, tol.atol, desc);
    // Y written over R (in Y's layout) where the tactic declares it (backends/in_place.h).
    const int over = inPlaceInput(dev.op, name, dev.inputs.size());
    if (over < 0 || static_cast<size_t>(over) >= dev.inputs.size() || !dev.inputs[over].valid()) continue;
    got = test::runTactic(*gpu, name, dev, nullptr, over);
    y = outLast && got[0].dims().size() == 4 ? channelsLast(got[0], false) : got[0];
    test::expectClose(y, ref[0], tol.rtol, tol.atol, desc + " in place over input " + std::to_string(over));
  }
}

TEST(CudaLayout, ConvChannelsLast) {
  KILN_REQUIRE_GPU();
  Attributes relu = attrs({{"pads", {1, 1, 1, 1}}});
  relu.set("kiln_activation", std::string("Relu"));
  // MobileNetV2's depthwise block: stride 2, ReLU6 (Clip 0..6), plus a residual.
  Attributes dwClip = attrs({{"pads", {1, 1, 1, 1}}, {"strides", {2, 2}}, {"group", {16}}});
  dwClip.set("kiln_activation", std::string("Clip"));
  dwClip.set("kiln_act_alpha", 0.f);
  dwClip.set("kiln_act_beta", 6.f);
  Attributes pwClip;  // MobileNetV2's pointwise expansion: 1x1, ReLU6
  pwClip.set("kiln_activation", std::string("Clip"));
  pwClip.set("kiln_act_alpha", 0.f);
  pwClip.set("kiln_act_beta", 6.f);
  const OpCase cases[] = {convCase({8, 64, 14, 14}, {64, 64, 3, 3}, relu, true, true, 200),
                          convCase({8, 32, 15, 15}, {64, 32, 1, 1}, attrs({{"strides", {2, 2}}}), true, false, 210),
                          convCase({8, 32, 12, 12}, {32, 1, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}, {"group", {32}}}), true, false, 220),
                          convCase({8, 16, 9, 9}, {16, 1, 3, 3}, dwClip, true, true, 221),
                          convCase({8, 32, 10, 10}, {48, 32, 1, 1}, pwClip, true, true, 222)};  // 1x1: conv_half_cublaslt_1x1_* too
  for (const OpCase& c : cases)
    for (DataType t : {DataType::kHALF, DataType::kBF16})
      for (int combo = 1; combo < 4; ++combo)
        checkLayouts(c, t, combo & 1, combo & 2, convTol(t, reduction(c)), "conv nhwc");
  // The channels-last tactics are among those checked.
  auto gpu = getBackend(DeviceType::kGPU, 0);
  auto namesNhwc = [&](const OpCase& c) {
    OpCase d = typed(c, DataType::kHALF).device;
    d.attrs.set("kiln_layout_in", std::string("nhwc"));
    d.attrs.set("kiln_layout_out", std::string("nhwc"));
    return test::tacticNames(*gpu, d);
  };
  EXPECT_TRUE(offered(namesNhwc(cases[3]), "conv_half_depthwise_nhwc"));
  EXPECT_TRUE(offered(namesNhwc(cases[4]), "conv_half_cublaslt_1x1_0"));
  EXPECT_FALSE(offered(namesNhwc(cases[1]), "conv_half_cublaslt_1x1_0")) << "stride 2";
}

// EfficientNet's squeeze-excitation convs at a throughput batch: 1x1 convs on [N, C, 1, 1] (the same
// bytes in both layouts) with SiLU and Sigmoid, at batch 1 and 128 (EfficientNet-B0's FP16 engine at
// batch 128 on the H100 computed the first SE conv's SiLU wrong, relative error 1.5, batch 1 right:
// cuDNN's fused conv + bias + activation engines, so such float32 convs run cuDNN's bare conv and
// kiln's epilogue), and a 3x3 conv of 3x3 images (a 1x1 output).
TEST(CudaLayout, SqueezeExcitationConvsAtLargeBatch) {
  KILN_REQUIRE_GPU();
  Attributes silu, sigmoid;
  silu.set("kiln_activation", std::string("Silu"));
  sigmoid.set("kiln_activation", std::string("Sigmoid"));
  for (int64_t n : {1, 128}) {
    const OpCase cases[] = {convCase({n, 32, 1, 1}, {8, 32, 1, 1}, silu, true, false, 230),
                            convCase({n, 8, 1, 1}, {32, 8, 1, 1}, sigmoid, true, false, 231),
                            convCase({n, 96, 1, 1}, {4, 96, 1, 1}, silu, true, false, 232),
                            convCase({n, 16, 3, 3}, {8, 16, 3, 3}, silu, true, true, 233)};  // a 1x1 output
    for (const OpCase& c : cases) {
      // float32 too (cuDNN keeps those: whether its engines get them right at batch 128 is what this asks)
      checkConv(c, "SE conv batch " + std::to_string(n), kAllFloat);
      for (DataType t : {DataType::kHALF, DataType::kBF16})
        for (int combo = 1; combo < 4; ++combo)
          checkLayouts(c, t, combo & 1, combo & 2, convTol(t, reduction(c)), "SE conv nhwc batch " + std::to_string(n));
    }
  }
}

// A patch stem from an NCHW image to a channels-last Y (conv_half_cublaslt_patch_nhwc_*): ViT's 16x16
// (bias), and a Swin / ConvNeXt-style 4x4 with ReLU and a residual (laid out like Y), against the
// reference; not offered for an nhwc X or P = 1.
TEST(CudaLayout, PatchConvNchwToNhwc) {
  KILN_REQUIRE_GPU();
  Attributes p4 = attrs({{"strides", {4, 4}}});
  p4.set("kiln_activation", std::string("Relu"));
  const OpCase cases[] = {convCase({2, 3, 32, 48}, {24, 3, 16, 16}, attrs({{"strides", {16, 16}}}), true, false, 240),
                          convCase({3, 3, 12, 16}, {16, 3, 4, 4}, p4, true, true, 241)};
  for (const OpCase& c : cases)
    for (DataType t : {DataType::kHALF, DataType::kBF16}) {
      checkLayouts(c, t, false, true, convTol(t, reduction(c)), "patch conv nchw -> nhwc");
      OpCase d = withLayouts(typed(c, t).device, false, true);
      EXPECT_TRUE(offered(test::tacticNames(*getBackend(DeviceType::kGPU, 0), d), "conv_half_cublaslt_patch_nhwc_0")) << toString(t);
    }
  auto gpu = getBackend(DeviceType::kGPU, 0);
  EXPECT_FALSE(offered(test::tacticNames(*gpu, withLayouts(typed(cases[0], DataType::kHALF).device, true, true)),
                       "conv_half_cublaslt_patch_nhwc_0")) << "nhwc X";
  EXPECT_FALSE(offered(test::tacticNames(*gpu, withLayouts(typed(convCase({8, 16, 6, 6}, {8, 16, 1, 1}, {}, true, false, 242),
                                                                 DataType::kHALF).device, false, true)),
                       "conv_half_cublaslt_patch_nhwc_0")) << "P = 1";
}

TEST(CudaLayout, PoolsChannelsLast) {
  KILN_REQUIRE_GPU();
  // float16 / bfloat16 with nhwc X and Y and C % 8 == 0 take the vectorized kernel (a 3x3 window
  // its unrolled instance, others the any-window one); C = 12 and the mixed layouts the generic
  // kernels. Max pools compare exactly (NaN == NaN).
  const Attributes resnet = attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  const Attributes ceilPads = attrs({{"kernel_shape", {3, 2}}, {"strides", {2, 2}}, {"ceil_mode", {1}}, {"pads", {0, 1, 1, 0}}});
  const Attributes dilated = attrs({{"kernel_shape", {3, 3}}, {"dilations", {2, 2}}, {"pads", {2, 2, 2, 2}}});
  const std::vector<std::pair<OpCase, std::string>> maxCases = {
      {poolCase("MaxPool", {8, 16, 13, 11}, resnet, 230), "MaxPool nhwc 3x3 s2 p1"},
      {poolCase("MaxPool", {2, 12, 9, 10}, resnet, 233), "MaxPool nhwc C=12"},
      {poolCase("MaxPool", {2, 16, 12, 11}, dilated, 234), "MaxPool nhwc dilation 2"},
      {poolCase("MaxPool", {2, 24, 10, 11}, ceilPads, 235), "MaxPool nhwc ceil_mode asymmetric pads"},
      {poolCase("MaxPool", {2, 8, 9, 9}, attrs({{"kernel_shape", {2, 2}}, {"strides", {2, 2}}, {"ceil_mode", {1}}}), 236),
       "MaxPool nhwc 2x2 ceil_mode"},
      {withNaNs(poolCase("MaxPool", {2, 16, 7, 8}, resnet, 237), 5, 37), "MaxPool nhwc NaN"},
      {withNaNs(poolCase("MaxPool", {2, 12, 7, 8}, resnet, 238), 3, 29), "MaxPool nhwc NaN C=12"},
  };
  std::vector<std::pair<OpCase, std::string>> avgCases = {
      {poolCase("AveragePool", {8, 16, 12, 12}, attrs({{"kernel_shape", {2, 2}}, {"strides", {2, 2}}}), 231), "AveragePool nhwc 2x2 s2"},
  };
  for (int64_t include : {0, 1}) {
    const std::string cip = " count_include_pad " + std::to_string(include);
    const auto seed = static_cast<uint32_t>(240 + 4 * include);
    Attributes a = resnet;
    a.set("count_include_pad", include);
    avgCases.push_back({poolCase("AveragePool", {4, 16, 11, 13}, a, seed), "AveragePool nhwc 3x3 s2 p1" + cip});
    avgCases.push_back({poolCase("AveragePool", {2, 12, 9, 10}, a, seed + 1), "AveragePool nhwc C=12" + cip});
    Attributes c = ceilPads;
    c.set("count_include_pad", include);
    avgCases.push_back({poolCase("AveragePool", {2, 8, 10, 9}, c, seed + 2), "AveragePool nhwc ceil_mode asymmetric pads" + cip});
    Attributes d = dilated;
    d.set("count_include_pad", include);
    avgCases.push_back({poolCase("AveragePool", {2, 16, 12, 11}, d, seed + 3), "AveragePool nhwc dilation 2" + cip});
  }
  for (DataType t : {DataType::kHALF, DataType::kBF16})
    for (int combo = 1; combo < 4; ++combo) {
      for (const auto& [c, what] : maxCases) checkLayouts(c, t, combo & 1, combo & 2, kExact, what);
      for (const auto& [c, what] : avgCases) checkLayouts(c, t, combo & 1, combo & 2, avgTol(t), what);
    }
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"})
    for (DataType t : {DataType::kHALF, DataType::kBF16})
      checkLayouts(poolCase(op, {8, 24, 7, 9}, {}, 232), t, true, false, avgTol(t), std::string(op) + " nhwc");
}

TEST(CudaLayout, PoolTilesAndChunks) {
  KILN_REQUIRE_GPU();
  // Window pools between layouts (pool2dTileKernel): more than one tile of 32 channels and of 32
  // output columns, partial tiles, batch 1, float32 and integer max pools; nhwc X and Y with
  // C % 8 == 0 take the 16-byte kernel, the rest the tiles.
  const Attributes resnet = attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  Attributes avgPad = resnet;
  avgPad.set("count_include_pad", int64_t(1));
  const Attributes wide = attrs({{"kernel_shape", {2, 3}}, {"strides", {1, 2}}, {"dilations", {2, 1}}});
  for (int combo = 1; combo < 4; ++combo) {
    const bool in = combo & 1, out = combo & 2;
    for (DataType t : {DataType::kHALF, DataType::kBF16}) {
      checkLayouts(withNaNs(poolCase("MaxPool", {2, 40, 70, 33}, resnet, 250), 7, 101), t, in, out, kExact, "MaxPool tiles C=40");
      checkLayouts(poolCase("AveragePool", {1, 72, 9, 70}, avgPad, 251), t, in, out, avgTol(t), "AveragePool tiles cip");
    }
    checkLayouts(poolCase("AveragePool", {1, 33, 11, 68}, wide, 252), DataType::kFLOAT, in, out, avgTol(DataType::kFLOAT),
                 "AveragePool float32 any window");
    checkLayouts(poolCase("MaxPool", {3, 17, 12, 11}, resnet, 253), DataType::kFLOAT, in, out, kExact, "MaxPool float32 C=17");
    OpCase ints = poolCase("MaxPool", {2, 33, 12, 11}, resnet, 254);
    ints.inputs[0] = randomTensor({2, 33, 12, 11}, 254, 100.f);
    checkLayouts(ints, DataType::kINT8, in, out, kExact, "MaxPool int8");
  }
  // Global pools of an nhwc X: 16-byte vectors of channels (or single channels when C % V != 0),
  // more than 256 vectors (two channel tiles), chunks of pixels meeting in the workspace.
  struct G {
    Dims x;
    DataType t;
  };
  const G globals[] = {{{2, 16, 56, 56}, DataType::kHALF},   {{1, 24, 7, 9}, DataType::kBF16},  {{3, 12, 10, 10}, DataType::kHALF},
                       {{2, 2056, 3, 3}, DataType::kHALF},   {{8, 1152, 7, 7}, DataType::kHALF}, {{2, 20, 30, 30}, DataType::kFLOAT},
                       {{1, 8, 112, 112}, DataType::kBF16}, {{2, 6, 9, 9}, DataType::kFLOAT}};
  for (const G& g : globals) {
    checkLayouts(poolCase("GlobalAveragePool", g.x, {}, 255), g.t, true, false, avgTol(g.t), "GlobalAveragePool nhwc " + toString(g.x));
    checkLayouts(withNaNs(poolCase("GlobalMaxPool", g.x, {}, 256), 3, 997), g.t, true, false, kExact,
                 "GlobalMaxPool nhwc NaN " + toString(g.x));
  }
  for (DataType t : {DataType::kINT8, DataType::kINT32, DataType::kINT64})
    for (Dims x : {Dims{2, 48, 20, 20}, Dims{2, 6, 9, 9}}) {
      OpCase c = poolCase("GlobalMaxPool", x, {}, 257);
      c.inputs[0] = randomTensor(x, 257, 100.f);
      checkLayouts(c, t, true, false, kExact, std::string("GlobalMaxPool nhwc ") + toString(t) + " " + toString(x));
    }
}

TEST(CudaLayout, LayoutConvertTransposes) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  // Tiled (with and without whole words), C or H*W below a tile (the gather), H*W = 1 (a memcpy),
  // batch 1, every element size.
  for (Dims x : {Dims{3, 40, 33, 7}, Dims{2, 72, 15, 15}, Dims{1, 17, 9, 11}, Dims{2, 8, 5, 5}, Dims{2, 24, 1, 1}, Dims{1, 130, 8, 8}})
    for (DataType t : {DataType::kHALF, DataType::kFLOAT, DataType::kINT64, DataType::kINT8})
      for (bool toLast : {true, false}) {
        OpCase c;
        c.op = "LayoutConvert";
        c.attrs.set("kiln_layout_in", std::string(toLast ? "nchw" : "nhwc"));
        c.attrs.set("kiln_layout_out", std::string(toLast ? "nhwc" : "nchw"));
        c.inputs = {test::convertTo(randomTensor(x, 240, 50.f), t)};
        test::checkAllTactics(*gpu, c, "LayoutConvert " + toString(x) + " " + toString(t), 0, 0);
      }
}

}  // namespace
}  // namespace kiln

// ---- cuDNN conv with the input channels padded to a multiple of 8 ("conv_half_cudnn_pad8_*") -----------------

namespace kiln {
namespace {

//! The GPU tactics offered for `c` in `type` with X / Y stored per `inLast` / `outLast`.
std::vector<std::string> layoutTacticNames(const OpCase& c, DataType type, bool inLast, bool outLast) {
  auto gpu = getBackend(DeviceType::kGPU, 0);
  OpCase dev = typed(c, type).device;
  dev.attrs.set("kiln_layout_in", std::string(inLast ? "nhwc" : "nchw"));
  dev.attrs.set("kiln_layout_out", std::string(outLast ? "nhwc" : "nchw"));
  return test::tacticNames(*gpu, dev);
}

TEST(CudaConv, PaddedChannels) {
  KILN_REQUIRE_GPU();
  Attributes stem = attrs({{"strides", {2, 2}}, {"pads", {3, 3, 3, 3}}});
  stem.set("kiln_activation", std::string("Relu"));
  Attributes r3 = attrs({{"pads", {1, 1, 1, 1}}});
  r3.set("kiln_activation", std::string("Relu"));
  const OpCase cases[] = {convCase({4, 3, 33, 31}, {16, 3, 7, 7}, stem, true, false, 300),  // ResNet stem, C = 3
                          convCase({2, 5, 11, 12}, {16, 5, 3, 3}, r3, true, true, 301)};     // C = 5 + residual
  for (const OpCase& c : cases)
    for (DataType t : {DataType::kHALF, DataType::kBF16})
      for (bool outLast : {false, true}) {
        const std::string what = "pad8 C=" + std::to_string(c.inputs[0].dims()[1]);
        auto names = layoutTacticNames(c, t, false, outLast);
        EXPECT_TRUE(offered(names, "conv_half_cudnn_pad8_0")) << what << " " << toString(t);
        EXPECT_TRUE(offered(names, "conv_half_cudnn_pad8_1")) << what << " " << toString(t);
        checkLayouts(c, t, false, outLast, convTol(t, reduction(c)), what);
        // NCHW X of C % 8 != 0 into an NHWC Y: the plain cuDNN tactics are not offered (wrong
        // results seen on the H200), conv_half_cudnn_pad8 is.
        if (outLast) EXPECT_FALSE(offered(names, "conv_fp_cudnn_0")) << what << " " << toString(t);
      }
  // A channels-last Y of 12 channels: no cuDNN tactic (see supportsCudnnConvBase); the small-C
  // tensor-core tactic takes it (and must be right).
  {
    const OpCase c12 = convCase({2, 5, 11, 12}, {12, 5, 3, 3}, r3, true, true, 304);
    for (const std::string& name : layoutTacticNames(c12, DataType::kHALF, false, true))
      EXPECT_EQ(name.find("cudnn"), std::string::npos) << name;
    checkLayouts(c12, DataType::kHALF, false, true, convTol(DataType::kHALF, reduction(c12)), "C=5 into 12 channels-last");
  }
  // Not offered: X already channels last, C a multiple of 8, float32, groups, weights not constant.
  const OpCase& stemCase = cases[0];
  EXPECT_FALSE(offered(layoutTacticNames(stemCase, DataType::kHALF, true, true), "conv_half_cudnn_pad8_0"));
  EXPECT_FALSE(offered(layoutTacticNames(convCase({2, 8, 9, 9}, {8, 8, 3, 3}, r3, true, false, 302), DataType::kHALF, false, true),
                       "conv_half_cudnn_pad8_0"));
  EXPECT_FALSE(offered(layoutTacticNames(stemCase, DataType::kFLOAT, false, true), "conv_half_cudnn_pad8_0"));
  EXPECT_FALSE(offered(layoutTacticNames(convCase({2, 6, 9, 9}, {8, 3, 3, 3}, attrs({{"group", {2}}, {"pads", {1, 1, 1, 1}}}), true,
                                                  false, 303),
                                         DataType::kHALF, false, false),
                       "conv_half_cudnn_pad8_0"));
  OpCase dynamicW = stemCase;
  dynamicW.constant[1] = false;
  EXPECT_FALSE(offered(layoutTacticNames(dynamicW, DataType::kBF16, false, false), "conv_half_cudnn_pad8_0"));
}

// ---- "conv_half_small_cin_wmma": stem convs of few input channels as a tensor-core implicit GEMM -----------------
TEST(CudaConv, SmallInputChannelsWmma) {
  KILN_REQUIRE_GPU();
  auto act = [](Attributes a, const char* kind) {
    a.set("kiln_activation", std::string(kind));
    return a;
  };
  const Attributes s2p3 = act(attrs({{"strides", {2, 2}}, {"pads", {3, 3, 3, 3}}}), "Relu");
  const Attributes s2p1 = act(attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}}), "Silu");
  const Attributes p1 = attrs({{"pads", {1, 1, 1, 1}}});
  const Attributes dil2 = act(attrs({{"dilations", {2, 2}}, {"pads", {2, 1, 2, 3}}}), "HardSwish");
  const Attributes s4 = attrs({{"strides", {4, 4}}});
  const OpCase cases[] = {
      convCase({4, 3, 33, 31}, {16, 3, 7, 7}, s2p3, true, false, 310),     // ResNet stem: K = 147 (Kp 160)
      convCase({2, 3, 30, 28}, {24, 3, 3, 3}, s2p1, true, false, 311),     // ShuffleNet / EfficientNet stem
      convCase({2, 5, 11, 12}, {16, 5, 3, 3}, p1, true, true, 312),        // C = 5 + residual, no bias act
      convCase({3, 3, 9, 10}, {12, 3, 3, 3}, p1, false, false, 313),       // Cout 12: no 16-byte stores, no bias
      convCase({1, 3, 17, 19}, {32, 3, 3, 3}, dil2, true, false, 314),     // dilation 2, uneven padding
      convCase({1, 5, 20, 20}, {128, 5, 7, 7}, p1, true, false, 315),      // the largest: Kp 256, Np 128
      convCase({16, 3, 64, 64}, {16, 3, 3, 3}, p1, true, false, 316),      // 1024 tiles: blocks loop over tiles
      convCase({2, 3, 32, 32}, {40, 3, 4, 4}, s4, true, false, 317),       // patchify stem, Cout 40
      convCase({2, 3, 13, 14}, {200, 3, 3, 3}, p1, true, true, 322)};      // Cout 200: two passes (128 + 72)
  for (const OpCase& c : cases)
    for (DataType t : {DataType::kHALF, DataType::kBF16})
      for (bool outLast : {false, true}) {
        const std::string what = "small-C conv " + toString(c.inputs[0].dims()) + " W " + toString(c.inputs[1].dims());
        EXPECT_TRUE(offered(layoutTacticNames(c, t, false, outLast), "conv_half_small_cin_wmma")) << what << " " << toString(t);
        checkLayouts(c, t, false, outLast, convTol(t, reduction(c)), what);
      }
  // 1-D: wav2vec2's first conv (C = 1, kernel 10, stride 5, 512 channels: four passes) + GELU.
  const OpCase wav = convCase({2, 1, 403}, {512, 1, 10}, act(attrs({{"strides", {5}}}), "Gelu"), true, false, 323);
  for (DataType t : {DataType::kHALF, DataType::kBF16}) {
    EXPECT_TRUE(offered(layoutTacticNames(wav, t, false, false), "conv_half_small_cin_wmma")) << toString(t);
    checkLayouts(wav, t, false, false, convTol(t, reduction(wav)), "small-C conv 1-D");
  }
  // Not offered: X channels last, C a multiple of 8, float32, groups, K over 256, Cout over 1024,
  // weights not constant.
  const OpCase& stem = cases[0];
  EXPECT_FALSE(offered(layoutTacticNames(stem, DataType::kHALF, true, true), "conv_half_small_cin_wmma"));
  EXPECT_FALSE(offered(layoutTacticNames(stem, DataType::kFLOAT, false, true), "conv_half_small_cin_wmma"));
  EXPECT_FALSE(offered(layoutTacticNames(convCase({2, 8, 9, 9}, {8, 8, 3, 3}, p1, true, false, 318), DataType::kHALF, false, true),
                       "conv_half_small_cin_wmma"));
  EXPECT_FALSE(offered(layoutTacticNames(convCase({2, 6, 9, 9}, {8, 3, 3, 3}, attrs({{"group", {2}}, {"pads", {1, 1, 1, 1}}}), true,
                                                  false, 319),
                                         DataType::kHALF, false, false),
                       "conv_half_small_cin_wmma"));
  EXPECT_FALSE(offered(layoutTacticNames(convCase({1, 7, 12, 12}, {16, 7, 7, 7}, p1, true, false, 320), DataType::kHALF, false, true),
                       "conv_half_small_cin_wmma"));  // K = 343
  EXPECT_FALSE(offered(layoutTacticNames(convCase({1, 3, 12, 12}, {1032, 3, 3, 3}, p1, true, false, 321), DataType::kHALF, false, true),
                       "conv_half_small_cin_wmma"));
  OpCase dynamicW = stem;
  dynamicW.constant[1] = false;
  EXPECT_FALSE(offered(layoutTacticNames(dynamicW, DataType::kHALF, false, false), "conv_half_small_cin_wmma"));
}

}  // namespace
}  // namespace kiln

// ---- elementwise layers inside an NHWC region (gpu_layout's transparent layers) -----------------

namespace kiln {
namespace {

//! Runs `c` on the GPU with Y and every input of Y's shape stored channels last (the other inputs
//! are broadcasts with the same bytes in both orders) and compares with the plain reference.
void checkElementwiseChannelsLast(const OpCase& plain, DataType type, Tol tol, const std::string& what) {
  auto gpu = getBackend(DeviceType::kGPU, 0);
  TypedCase t = typed(plain, type);
  std::vector<HostTensor> ref = test::runReference(t.reference);
  OpCase dev = t.device;
  dev.attrs.set("kiln_layout_in", std::string("nhwc"));
  dev.attrs.set("kiln_layout_out", std::string("nhwc"));
  for (HostTensor& in : dev.inputs)
    if (in.valid() && in.dims() == ref[0].dims()) in = channelsLast(in, true);
  std::vector<std::string> names = test::tacticNames(*gpu, dev);
  ASSERT_EQ(names.size(), 1u) << what << ": one CUDA tactic must take the channels-last layer";
  std::vector<HostTensor> got = test::runTactic(*gpu, names[0], dev);
  test::expectClose(channelsLast(got[0], false), ref[0], tol.rtol, tol.atol, what + " " + toString(type));
}

TEST(CudaLayout, ElementwiseChannelsLast) {
  KILN_REQUIRE_GPU();
  const Dims x{8, 16, 5, 7};
  auto binary = [](const char* op, HostTensor a, HostTensor b) { return OpCase{op, {}, {std::move(a), std::move(b)}}; };
  Attributes chain;  // sigmoid(x * s + bias): a gate and a bias broadcast per channel
  chain.set("steps", std::vector<std::string>{"Mul", "Add", "Sigmoid"});
  chain.set("operand", std::vector<int64_t>{1, 2, -1});
  chain.set("swapped", std::vector<int64_t>{0, 0, 0});
  chain.set("alpha", std::vector<float>{0, 0, 0});
  chain.set("beta", std::vector<float>{0, 0, 0});
  const std::vector<std::pair<OpCase, std::string>> cases = {
      {binary("Mul", randomTensor(x, 1), randomTensor({8, 16, 1, 1}, 2)), "Mul by a squeeze-excitation scale"},
      {binary("Add", randomTensor(x, 3), randomTensor(x, 4)), "residual Add"},
      {binary("Add", randomTensor(x, 5), randomTensor({16, 1, 1}, 6)), "Add of a rank-3 per-channel bias"},
      {binary("Mul", randomTensor({8, 1, 1, 1}, 7), randomTensor(x, 8)), "Mul by a per-sample scalar, first"},
      {binary("Sub", randomTensor(x, 10), randomTensor({8, 1, 5, 7}, 11)), "Sub of a C = 1 broadcast"},
      {OpCase{"Sigmoid", {}, {randomTensor(x, 9)}}, "Sigmoid"},
      {OpCase{"PointwiseChain", chain, {randomTensor(x, 12), randomTensor({1, 16, 1, 1}, 13), randomTensor({16, 1, 1}, 14)}},
       "PointwiseChain with per-channel operands"},
  };
  for (DataType t : {DataType::kHALF, DataType::kBF16})
    for (const auto& [c, what] : cases) checkElementwiseChannelsLast(c, t, t == DataType::kHALF ? Tol{2e-3, 2e-3} : Tol{1e-2, 1e-2}, what);
  // A broadcast whose bytes differ between the orders ([1, 16, 5, 1]) is refused.
  OpCase bad = binary("Add", test::convertTo(randomTensor(x, 15), DataType::kHALF), test::convertTo(randomTensor({1, 16, 5, 1}, 16), DataType::kHALF));
  bad.attrs.set("kiln_layout_in", std::string("nhwc"));
  bad.attrs.set("kiln_layout_out", std::string("nhwc"));
  EXPECT_TRUE(test::tacticNames(*getBackend(DeviceType::kGPU, 0), bad).empty());
}

}  // namespace
}  // namespace kiln

// ---- the tiled depthwise kernels (conv_fp_depthwise_nchw_tiled, conv_fp_depthwise_nhwc_tiled) ------------

namespace kiln {
namespace {

//! A depthwise conv of X [N, C, H, W] with a KxK kernel, optionally bias, residual and a fused activation.
OpCase depthwiseCase(Dims x, int64_t k, int64_t stride, std::vector<int64_t> pads, bool bias, bool residual,
                     const std::string& act, uint32_t seed) {
  Attributes a = attrs({{"group", {x[1]}}, {"pads", pads}, {"strides", {stride, stride}}});
  if (!act.empty()) {
    a.set("kiln_activation", act);
    a.set("kiln_act_alpha", act == "Clip" ? 0.f : 0.1f);  // Clip: ReLU6 (scaled to the data); LeakyRelu's slope
    a.set("kiln_act_beta", act == "Clip" ? 0.6f : 0.f);
  }
  return convCase(x, {x[1], 1, k, k}, a, bias, residual, seed);
}

//! Runs tactic `name` (which must be offered) on `plain` in `type` with X / Y stored per `inLast` /
//! `outLast`, against the reference.
void checkTactic(const OpCase& plain, DataType type, bool inLast, bool outLast, const std::string& name, const std::string& what) {
  auto gpu = getBackend(DeviceType::kGPU, 0);
  TypedCase t = typed(plain, type);
  std::vector<HostTensor> ref = test::runReference(t.reference);
  OpCase dev = withLayouts(t.device, inLast, outLast);
  const std::string where = what + " " + name + " " + toString(type) + (inLast ? " in:nhwc" : " in:nchw") + (outLast ? " out:nhwc" : " out:nchw");
  ASSERT_TRUE(offered(test::tacticNames(*gpu, dev), name)) << where << ": not offered";
  std::vector<HostTensor> got = test::runTactic(*gpu, name, dev, &ref);
  HostTensor y = outLast ? channelsLast(got[0], false) : got[0];
  const Tol tol = convTol(type, reduction(plain));
  test::expectClose(y, ref[0], tol.rtol, tol.atol, where);
}

//! MobileNet / EfficientNet / ConvNeXt depthwise geometries and the corners of the kernels' tiling.
std::vector<std::pair<OpCase, std::string>> depthwiseCases() {
  return {
      {depthwiseCase({2, 16, 13, 14}, 3, 1, {1, 1, 1, 1}, true, true, "HardSwish", 400), "3x3 s1 + bias + residual + hardswish"},
      {depthwiseCase({1, 24, 17, 15}, 3, 2, {1, 1, 1, 1}, true, false, "Relu", 401), "3x3 s2 batch 1"},
      {depthwiseCase({3, 12, 11, 12}, 5, 1, {2, 2, 2, 2}, true, true, "Sigmoid", 402), "5x5 s1 C=12 + residual"},
      {depthwiseCase({2, 40, 16, 16}, 5, 2, {2, 2, 2, 2}, true, false, "Clip", 403), "5x5 s2 (EfficientNet) + relu6"},
      {depthwiseCase({2, 32, 14, 14}, 7, 1, {3, 3, 3, 3}, true, true, "Gelu", 404), "7x7 s1 (ConvNeXt) + residual + gelu"},
      {depthwiseCase({1, 8, 15, 13}, 7, 2, {3, 3, 3, 3}, false, false, "", 405), "7x7 s2 no bias"},
      {depthwiseCase({2, 16, 12, 12}, 3, 2, {0, 0, 1, 1}, false, true, "", 406), "3x3 s2 TF pads + residual"},
      // Bands of rows (NCHW: a 64x70 plane needs more than one block) and a pad beyond K - 1.
      {depthwiseCase({1, 4, 64, 70}, 3, 1, {1, 1, 1, 1}, true, false, "Tanh", 407), "3x3 s1 64x70 (row bands)"},
      {depthwiseCase({1, 8, 6, 7}, 3, 2, {2, 2, 2, 2}, true, false, "", 408), "3x3 s2 pads 2"},
      // NCHW: whole 7x7 planes, 36 per block, across images and a partial last block.
      {depthwiseCase({3, 13, 7, 7}, 7, 1, {3, 3, 3, 3}, true, true, "LeakyRelu", 409), "7x7 on 7x7 maps, 39 planes"},
      // Odd widths: the 16-byte copies start and end mid-row.
      {depthwiseCase({2, 8, 9, 61}, 5, 1, {2, 2, 2, 2}, true, true, "", 410), "5x5 s1 9x61"},
      {depthwiseCase({2, 16, 29, 27}, 7, 2, {3, 3, 3, 3}, true, false, "Relu", 411), "7x7 s2 29x27"},
  };
}

TEST(CudaConv, DepthwiseTiledNchw) {
  KILN_REQUIRE_GPU();
  for (const auto& [c, what] : depthwiseCases())
    for (DataType t : kAllFloat) checkTactic(c, t, false, false, "conv_fp_depthwise_nchw_tiled", what);
  // Weights (and bias) that are not constants are read where they are.
  OpCase dynamicW = depthwiseCases()[4].first;
  dynamicW.constant[1] = dynamicW.constant[2] = false;
  checkTactic(dynamicW, DataType::kHALF, false, false, "conv_fp_depthwise_nchw_tiled", "7x7 runtime weights");
}

TEST(CudaLayout, DepthwiseTiledNhwc) {
  KILN_REQUIRE_GPU();
  for (const auto& [c, what] : depthwiseCases())
    for (DataType t : kAllFloat)
      for (bool outLast : {true, false}) checkTactic(c, t, true, outLast, "conv_fp_depthwise_nhwc_tiled", what);
}

// conv_fp_depthwise_nhwc_smem: the tiling corners above, then what its tiles and 32-channel slices
// add: ConvNeXt's maps (7x7, 14x14, 56x56: one tile, several, edge tiles), odd maps (13x17), every
// K and stride, channel counts that are not a multiple of the 16-byte copy (12, 20: element copies),
// odd (13, 33: unpaired stores), or leave the last slice partial (40, 72), batches, epilogues.
std::vector<std::pair<OpCase, std::string>> depthwiseSmemCases() {
  std::vector<std::pair<OpCase, std::string>> v = depthwiseCases();
  const std::vector<std::string> acts = {"Gelu", "Relu", "", "HardSwish", "Clip", "Sigmoid"};
  uint32_t seed = 430;
  int i = 0;
  for (int64_t k : {3, 5, 7})
    for (int64_t s : {1, 2}) {
      const int64_t p = k / 2;
      const std::string g = std::to_string(k) + "x" + std::to_string(k) + " s" + std::to_string(s);
      const std::string& act = acts[i++ % acts.size()];
      v.push_back({depthwiseCase({2, 40, 13, 17}, k, s, {p, p, p, p}, true, s == 1, act, seed++), g + " 13x17 C=40 " + act});
      v.push_back({depthwiseCase({3, 13, 7, 7}, k, s, {p, p, p, p}, true, s == 1, act, seed++), g + " 7x7 C=13"});
      v.push_back({depthwiseCase({2, 20, 14, 14}, k, s, {p, p, p, p}, k != 5, true, act, seed++), g + " 14x14 C=20 + residual"});
    }
  v.push_back({depthwiseCase({2, 96, 56, 56}, 7, 1, {3, 3, 3, 3}, true, true, "", seed++), "ConvNeXt stage 1 7x7 56x56 C=96"});
  v.push_back({depthwiseCase({4, 72, 7, 7}, 7, 1, {3, 3, 3, 3}, true, false, "Gelu", seed++), "7x7 on 7x7 C=72 batch 4"});
  v.push_back({depthwiseCase({2, 33, 28, 28}, 3, 2, {1, 1, 1, 1}, true, false, "Relu", seed++), "3x3 s2 28x28 C=33"});
  v.push_back({depthwiseCase({1, 12, 30, 45}, 5, 1, {2, 2, 2, 2}, false, true, "LeakyRelu", seed++), "5x5 s1 30x45 C=12"});
  return v;
}

TEST(CudaLayout, DepthwiseSmemNhwc) {
  KILN_REQUIRE_GPU();
  for (const auto& [c, what] : depthwiseSmemCases())
    for (DataType t : kAllFloat)
      for (bool outLast : {true, false}) checkTactic(c, t, true, outLast, "conv_fp_depthwise_nhwc_smem", what);
}

// The tile plan (host code, no GPU): every candidate fits the 48 KiB it is launched with, its input
// tile is the output tile plus the halo, the pitch is padded as the bank rule says, and small maps
// are not drowned in one oversized tile.
TEST(CudaConv, DepthwiseSmemTilePlan) {
  for (int k : {3, 5, 7})
    for (int s : {1, 2})
      for (int elem : {2, 4})
        for (int side : {1, 7, 13, 14, 28, 56, 112, 200}) {
          const cuda::DepthwiseSmemTile t = cuda::planDepthwiseSmemTile(k, s, side, side + 3, elem, 64 * 4, 132);
          const std::string what = std::to_string(k) + " s" + std::to_string(s) + " " + std::to_string(elem) + "B " + std::to_string(side);
          ASSERT_GT(t.smemBytes, 0) << what;
          EXPECT_LE(t.smemBytes, 48 * 1024) << what;
          EXPECT_TRUE(t.p == 4 || t.p == 8) << what;
          EXPECT_EQ(t.tileW % t.p, 0) << what;
          EXPECT_EQ(t.inTileH, (t.tileH - 1) * s + k) << what;
          EXPECT_EQ(t.inTileW, (t.tileW - 1) * s + k) << what;
          EXPECT_GE(t.pitch, t.inTileW * cuda::kSliceChannels) << what;
          EXPECT_EQ(t.pitch * elem % 16, 0) << what;  // 16-byte copies into every row
          if (elem == 2) EXPECT_EQ(s * t.pitch / 2 % 32, 16) << what;  // neighbouring rows' reads: other banks
          EXPECT_LE(t.tileH, side) << what;
          EXPECT_LT(t.tileW, side + 3 + t.p) << what;
        }
  // ConvNeXt's last stage (7x7 maps, 768 channels at batch 64): one tile covers the map, no
  // halo is copied twice.
  const cuda::DepthwiseSmemTile last = cuda::planDepthwiseSmemTile(7, 1, 7, 7, 2, 64 * 24, 132);
  EXPECT_EQ(last.tileH, 7);
  EXPECT_EQ(last.tileW, 8);
}

// Not offered: dilation, other kernel sizes, unequal or larger strides, regular or grouped convs, an
// NCHW X for the channels-last kernel, runtime weights for it, a channels-last X for the NCHW kernel.
TEST(CudaConv, DepthwiseTiledRefuses) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  auto names = [&](const OpCase& c, bool inLast, bool outLast) {
    return test::tacticNames(*gpu, withLayouts(typed(c, DataType::kHALF).device, inLast, outLast));
  };
  auto neither = [&](const OpCase& c, const std::string& what) {
    for (int combo = 0; combo < 4; ++combo) {
      auto n = names(c, combo & 1, combo & 2);
      EXPECT_FALSE(offered(n, "conv_fp_depthwise_nchw_tiled")) << what;
      EXPECT_FALSE(offered(n, "conv_fp_depthwise_nhwc_tiled")) << what;
      EXPECT_FALSE(offered(n, "conv_fp_depthwise_nhwc_smem")) << what;
    }
  };
  OpCase dilated = depthwiseCase({2, 16, 12, 12}, 3, 1, {2, 2, 2, 2}, true, false, "", 420);
  dilated.attrs.set("dilations", std::vector<int64_t>{2, 2});
  neither(dilated, "dilation 2");
  neither(depthwiseCase({2, 16, 12, 12}, 9, 1, {4, 4, 4, 4}, true, false, "", 421), "9x9");
  OpCase uneven = depthwiseCase({2, 16, 12, 12}, 3, 1, {1, 1, 1, 1}, true, false, "", 422);
  uneven.attrs.set("strides", std::vector<int64_t>{1, 2});
  neither(uneven, "strides 1, 2");
  neither(depthwiseCase({2, 16, 12, 12}, 3, 3, {1, 1, 1, 1}, true, false, "", 423), "stride 3");
  neither(convCase({2, 16, 12, 12}, {16, 16, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}}), true, false, 424), "dense 3x3");
  neither(convCase({2, 16, 12, 12}, {16, 2, 3, 3}, attrs({{"group", {8}}, {"pads", {1, 1, 1, 1}}}), true, false, 425), "groups of 2");
  const OpCase dw = depthwiseCases()[0].first;
  EXPECT_FALSE(offered(names(dw, false, false), "conv_fp_depthwise_nhwc_tiled"));
  EXPECT_FALSE(offered(names(dw, false, true), "conv_fp_depthwise_nhwc_tiled"));
  EXPECT_FALSE(offered(names(dw, false, false), "conv_fp_depthwise_nhwc_smem"));
  EXPECT_FALSE(offered(names(dw, false, true), "conv_fp_depthwise_nhwc_smem"));
  EXPECT_TRUE(offered(names(dw, true, true), "conv_fp_depthwise_nhwc_smem"));
  EXPECT_TRUE(offered(names(dw, true, false), "conv_fp_depthwise_nhwc_smem"));
  EXPECT_FALSE(offered(names(dw, true, true), "conv_fp_depthwise_nchw_tiled"));
  EXPECT_FALSE(offered(names(dw, true, false), "conv_fp_depthwise_nchw_tiled"));
  OpCase dynamicW = dw;
  dynamicW.constant[1] = false;
  EXPECT_FALSE(offered(names(dynamicW, true, true), "conv_fp_depthwise_nhwc_tiled"));
  EXPECT_FALSE(offered(names(dynamicW, true, true), "conv_fp_depthwise_nhwc_smem"));
  EXPECT_TRUE(offered(names(dynamicW, false, false), "conv_fp_depthwise_nchw_tiled"));
}

}  // namespace
}  // namespace kiln

// ---- the conv epilogue kernel (conv_epilogue.cu) on its own ------------------------------------------

#include <cuda_runtime.h>

#include "backends/cuda/conv_cuda_common.h"
#include "ops/activation.h"

namespace kiln {
namespace {

//! Device copy of a host tensor's bytes, `offset` elements into a fresh allocation (offset 1
//! leaves a 2- or 4-byte type off the 16-byte alignment: the kernel's one-element path).
struct DeviceBuffer {
  void* base = nullptr;
  void* at = nullptr;
  DeviceBuffer(const HostTensor& t, int64_t offset) {
    const size_t es = elementSize(t.type());
    EXPECT_EQ(cudaMalloc(&base, t.bytes() + 16), cudaSuccess);
    at = static_cast<char*>(base) + offset * es;
    EXPECT_EQ(cudaMemcpy(at, t.data(), t.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(base); }
  HostTensor read(DataType type, const Dims& d) const {
    HostTensor h(type, d);
    EXPECT_EQ(cudaMemcpy(h.data(), at, h.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

//! launchConvEpilogue over Y [n, c, hw] (NCHW) or [n, hw, c] (channels last: the "planes" of one
//! element the cuDNN tactics pass), with and without bias and residual, in every activation,
//! against Activation::operator() on the same rounded values. Channel counts and plane sizes
//! that are not multiples of the 16-byte vector, tails shorter than a vector, batch > 1, and
//! unaligned pointers (the one-element path).
TEST(CudaConv, EpilogueKernelGeometry) {
  KILN_REQUIRE_GPU();
  struct Geo {
    int64_t n, c, hw;
  };
  const Geo geos[] = {{3, 12, 49}, {2, 24, 64}, {1, 3, 5}, {2, 5, 1}, {4, 40, 15}, {1, 8, 1}};
  std::vector<Activation> acts = {Activation{}, Activation{ActKind::kClip, -0.4f, 0.6f}, Activation{ActKind::kLeakyRelu, 0.1f, 0.f},
                                  Activation{ActKind::kHardSigmoid, 0.2f, 0.5f}, Activation{ActKind::kElu, 0.7f, 0.f}};
  for (const ActivationInfo& a : kActivations)
    if (a.kind != ActKind::kClip && a.kind != ActKind::kLeakyRelu && a.kind != ActKind::kHardSigmoid && a.kind != ActKind::kElu)
      acts.push_back(Activation{a.kind, 0.f, 0.f});
  uint32_t seed = 900;
  for (DataType type : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16}) {
    const double rtol = type == DataType::kFLOAT ? 2e-6 : type == DataType::kHALF ? 1e-3 : 8e-3;
    const double atol = type == DataType::kFLOAT ? 2e-6 : 1e-3;
    for (const Geo& g : geos) {
      for (bool last : {false, true}) {
        for (int form = 0; form < 4; ++form) {  // bit 0: bias, bit 1: residual; the unaligned run with both
          const bool hasBias = form & 1, hasRes = form & 2;
          const Dims yd = last ? Dims{g.n, g.hw, g.c} : Dims{g.n, g.c, g.hw};
          // Values spread over [-6, 6] so that every activation's regions (clips, Mish's and
          // Softplus's large-x branch at 20 once the residual and bias add up) are crossed.
          const HostTensor y = test::convertTo(randomTensor(yd, seed++, 6.f), type);
          const HostTensor bias = test::convertTo(randomTensor({g.c}, seed++, 2.f), type);
          HostTensor res32 = randomTensor(yd, seed++, 3.f);
          res32.as<float>()[0] = 19.f;  // near Mish's / Softplus's threshold at 20
          const HostTensor res = test::convertTo(res32, type);
          for (const Activation& act : acts) {
            for (int64_t offset : {int64_t(0), int64_t(1)}) {
              if (offset == 1 && form != 3) continue;
              DeviceBuffer dy(y, offset), db(bias, 0), dr(res, offset);
              const int64_t planes = last ? g.n * g.hw * g.c : g.n * g.c, size = last ? 1 : g.hw;
              cuda::launchConvEpilogue(type, dy.at, hasBias ? db.at : nullptr, hasRes ? dr.at : nullptr, planes, g.c, size,
                                       cuda::toDevAct(act), nullptr);
              ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
              const HostTensor got = dy.read(type, yd);
              HostTensor want(DataType::kFLOAT, yd);
              for (int64_t i = 0; i < y.count(); ++i) {
                const int64_t ch = last ? i % g.c : (i / g.hw) % g.c;
                float v = static_cast<float>(y.getDouble(i));  // the kernel's order: (y + r) + b
                if (hasRes) v += static_cast<float>(res.getDouble(i));
                if (hasBias) v += static_cast<float>(bias.getDouble(ch));
                want.as<float>()[i] = act(v);
              }
              test::expectClose(test::convertTo(got, DataType::kFLOAT), test::convertTo(test::convertTo(want, type), DataType::kFLOAT),
                                rtol, atol,
                                std::string("epilogue ") + toString(type) + (last ? " nhwc " : " nchw ") + toString(yd) +
                                    (hasBias ? " bias" : "") + (hasRes ? " res" : "") + " act " + std::to_string(int(act.kind)) +
                                    (offset ? " unaligned" : ""));
            }
          }
        }
      }
    }
  }
}

//! The cuDNN and 1x1 tactics with the activations cuDNN's graph cannot apply (Mish, HardSwish,
//! LeakyRelu, Elu, HardSigmoid): the epilogue kernel finishes channels-last and NCHW outputs, with
//! bias and residual, plane sizes that are not multiples of 8 (7x7, 5x3) and batch > 1.
TEST(CudaLayout, ConvEpilogueActivations) {
  KILN_REQUIRE_GPU();
  const std::vector<std::pair<const char*, std::pair<float, float>>> acts = {
      {"Mish", {0.f, 0.f}}, {"HardSwish", {0.f, 0.f}}, {"LeakyRelu", {0.1f, 0.f}}, {"Elu", {0.5f, 0.f}}, {"HardSigmoid", {0.2f, 0.5f}},
      {"Silu", {0.f, 0.f}}};
  uint32_t seed = 960;
  for (auto& [name, ab] : acts) {
    Attributes k3 = attrs({{"pads", {1, 1, 1, 1}}});
    Attributes k1;
    for (Attributes* a : {&k3, &k1}) {
      a->set("kiln_activation", std::string(name));
      a->set("kiln_act_alpha", ab.first);
      a->set("kiln_act_beta", ab.second);
    }
    // Every activation on the first shape, every shape with the first activation: the epilogue's
    // indexing does not depend on the activation (all 3 x 6 took CudaLayout past 120 s on the H100).
    std::vector<std::pair<OpCase, std::string>> cases = {
        {convCase({8, 16, 7, 7}, {24, 16, 3, 3}, k3, true, true, seed++), "3x3 7x7 bias residual"}};
    if (std::string(name) == acts.front().first) {
      cases.push_back({convCase({8, 24, 5, 3}, {16, 24, 1, 1}, k1, true, false, seed++), "1x1 5x3 bias"});
      cases.push_back({convCase({8, 16, 6, 6}, {40, 16, 1, 1}, k1, true, true, seed++), "1x1 6x6 bias residual"});
    }
    for (DataType t : {DataType::kHALF, DataType::kBF16})
      for (const auto& [c, what] : cases)
        for (bool last : {false, true})  // Y's layout decides the epilogue's indexing
          checkLayouts(c, t, last, last, convTol(t, reduction(c)), std::string("epilogue ") + name + " " + what);
  }
}

}  // namespace
}  // namespace kiln

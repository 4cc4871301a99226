// The shared tactic harness: every entry of the CPU tactic table (and of the CUDA table, on a
// machine with a GPU) runs against its op's reference kernel on the cases of tactic_cases.h, with a
// tolerance per element type. Names are unique and follow the naming rule; an entry this file has
// no case for must be named in coveredElsewhere() with the suite that checks it.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "backends/cpu/cpu_tactics.h"
#include "backends/in_place.h"
#include "builder/tactic_filter.h"
#include "op_test_util.h"
#include "ops/fused_attrs.h"
#include "ops/op_registry.h"
#include "tactic_cases.h"
#include "tactic_names.h"
#ifdef KILN_HAVE_CUDA
#include "backends/cuda/cuda_tactics.h"
#endif

using namespace kiln;

namespace {

//! Entries (by name prefix) whose cases need more than a plain layer (blocked or channels-last
//! layouts, fused programs, op-specific inputs): the suite that runs them against the reference.
const std::map<std::string, std::string>& coveredElsewhere() {
  static const std::map<std::string, std::string> m = {
      {"conv_f32_onednn_blocked", "test_cpu_layout.cpp"},
      {"conv_f32_grouped_blocked_avx2", "test_cpu_layout.cpp"},
      {"pointwise_chain_", "test_pointwise_chain.cpp, test_cuda_elementwise.cpp"},
      {"conv_half_cudnn_pad8_", "test_cuda_conv_pool.cpp"},
      {"matmul_half_cudnn_fused_", "test_cuda_matmul.cpp (CudaMatMul.CudnnFusedEpilogue, CudaMatMul.FusedBiasAndActivations)"},
      {"conv_half_small_cin_wmma", "test_cuda_conv_pool.cpp (CudaConv.SmallInputChannelsWmma, CudaConv.PaddedChannels)"},
      {"conv_half_depthwise_nhwc", "test_cuda_conv_pool.cpp"},
      {"group_normalization_fp_cuda_nhwc", "test_cuda_normalization.cpp (CudaGroupNorm.ChannelsLast)"},
      {"instance_normalization_fp_cuda_nhwc", "test_cuda_normalization.cpp (CudaGroupNorm.ChannelsLast)"},
      {"conv_fp_depthwise_nhwc_tiled", "test_cuda_conv_pool.cpp"},
      {"conv_fp_depthwise_nhwc_smem", "test_cuda_conv_pool.cpp"},
      {"conv_half_cublaslt_", "test_cuda_conv_pool.cpp"},
      {"attention_", "test_cuda_attention.cpp"},
      {"layout_convert_", "test_cuda_conv_pool.cpp"},
      {"einsum_", "test_cuda_misc_ops.cpp"},
      {"random_", "test_random.cpp"},  // random values: the reference's for one seed, checked there
      {"bernoulli_", "test_random.cpp"},
      {"rnn_", "test_cuda_misc_ops.cpp"},
      {"gru_", "test_cuda_misc_ops.cpp"},
      {"lstm_", "test_cuda_misc_ops.cpp"},
      {"rotary_embedding_", "test_cuda_misc_ops.cpp"},
      {"quantize_linear_", "test_cuda_misc_ops.cpp"},
      {"dequantize_linear_", "test_cuda_misc_ops.cpp"},
      {"grid_sample_", "test_cuda_misc_ops.cpp"},
      {"roi_align_", "test_cuda_detection.cpp"},
      {"if_any_select", "test_cuda_detection.cpp"},
      {"matmul_integer_", "test_cuda_matmul.cpp"},
      {"q_linear_", "test_qlinear.cpp, test_cuda_qlinear.cpp"},
      {"fp8_matmul_", "test_cuda_matmul.cpp (CudaFp8MatMul)"},
      {"fp8_quantize_", "test_cuda_matmul.cpp (CudaFp8Quantize)"},
  };
  return m;
}

const std::string* elsewhere(const std::string& name) {
  for (const auto& [prefix, suite] : coveredElsewhere())
    if (name.rfind(prefix, 0) == 0) return &suite;
  return nullptr;
}

void checkNames(const std::vector<TacticDef>& table) {
  std::set<std::string> seen;
  for (const TacticDef& d : table) {
    EXPECT_TRUE(seen.insert(d.name).second) << d.name << " is not unique";
    EXPECT_EQ(test::namingRuleViolation(d.op, d.name), "") << d.name;
    EXPECT_NE(OpRegistry::instance().find(d.op), nullptr) << d.name << ": unknown op " << d.op;
    EXPECT_TRUE(d.kernel.supports && d.kernel.create) << d.name;
  }
}

//! |got - ref| <= atol + rtol * |ref| with rtol = atol = this, per element type.
double tolerance(DataType t, const std::string& op) {
  switch (t) {
    case DataType::kFLOAT: return op == "Det" ? 1e-3 : 1e-4;
    case DataType::kDOUBLE: return 1e-9;
    case DataType::kHALF: return 2e-2;
    case DataType::kBF16: return 6e-2;
    default: return 0;  // integers and bool compare exactly anyway
  }
}

bool hasNarrowFloat(const test::OpCase& c) {
  for (const HostTensor& in : c.inputs)
    if (in.valid() && (in.type() == DataType::kHALF || in.type() == DataType::kBF16)) return true;
  return false;
}

//! Whether output 0 of case c may be written over input k as the memory planner would: a runtime
//! input (not a constant) of the output's dims and type, read through no other operand.
bool canRunInPlace(const test::OpCase& c, int k, const std::vector<HostTensor>& ref) {
  if (static_cast<size_t>(k) >= c.inputs.size() || !c.inputs[k].valid() || c.constant[k] || ref.empty()) return false;
  return c.inputs[k].dims() == ref[0].dims() && c.inputs[k].type() == ref[0].type();
}

//! Runs every entry of `table` on its cases through `backend` (and in place where declared,
//! counted in `inPlace`); returns the number of cases run.
int runTable(Backend& backend, const std::vector<TacticDef>& table, int& inPlace) {
  int total = 0;
  for (const TacticDef& d : table) {
    if (elsewhere(d.name)) continue;
    int ran = 0;
    for (DataType t : {DataType::kFLOAT, DataType::kHALF, DataType::kBF16, DataType::kDOUBLE, DataType::kINT32,
                       DataType::kINT64, DataType::kUINT8, DataType::kBOOL})
      for (test::OpCase c : test::casesFor(d.op, t)) {
        // float32 matmuls and convs exactly as an engine built with --noTF32 runs them (the
        // builder pins TF32 off the same way): TF32's 10-bit mantissa is not float32's tolerance.
        if (t == DataType::kFLOAT && (d.op == "Conv" || d.op == "ConvTranspose" || d.op == "MatMul" || d.op == "Gemm"))
          disallowTf32(c.attrs);
        bool supported = false;
        try {
          supported = d.kernel.supports(test::describe(c, false));
        } catch (const Error&) {  // the op itself rejects this type
        }
        if (!supported) continue;
        SCOPED_TRACE(d.name + " " + toString(t) + " case " + std::to_string(ran));
        std::vector<HostTensor> ref = hasNarrowFloat(c) ? test::runReferenceInFloat32(c) : test::runReference(c);
        std::vector<HostTensor> got = test::runTactic(backend, d.name, c, &ref);
        EXPECT_EQ(got.size(), ref.size());
        const double tol = tolerance(t, d.op);
        for (size_t i = 0; i < std::min(got.size(), ref.size()); ++i) test::expectClose(got[i], ref[i], tol, tol, d.name);
        // Where the entry declares in-place execution (backends/in_place.h) and the case allows it,
        // output 0 written over that input must be the same.
        const int over = inPlaceInput(d.op, d.name, c.inputs.size());
        if (over >= 0 && canRunInPlace(c, over, ref)) {
          got = test::runTactic(backend, d.name, c, &ref, over);
          test::expectClose(got[0], ref[0], tol, tol, d.name + " in place over input " + std::to_string(over));
          ++inPlace;
        }
        ++ran;
      }
    EXPECT_GT(ran, 0) << d.name << ": no case of tactic_cases.h is supported (add one, or name the suite in coveredElsewhere())";
    total += ran;
  }
  return total;
}

}  // namespace

TEST(TacticTable, NamingRule) {
  EXPECT_EQ(test::snakeCase("LayerNormalization"), "layer_normalization");
  EXPECT_EQ(test::snakeCase("RMSNormalization"), "rms_normalization");
  EXPECT_EQ(test::snakeCase("MatMulInteger"), "matmul_integer");
  EXPECT_EQ(test::snakeCase("IsNaN"), "is_nan");
  EXPECT_EQ(test::snakeCase("GatherND"), "gather_nd");
  EXPECT_EQ(test::snakeCase("TopK"), "top_k");
  EXPECT_EQ(test::namingRuleViolation("Conv", "conv_f32_im2col_gemm"), "");
  EXPECT_NE(test::namingRuleViolation("Conv", "direct"), "");
  EXPECT_NE(test::namingRuleViolation("Conv", "conv_cudnn_0"), "");      // no type
  EXPECT_NE(test::namingRuleViolation("Conv", "conv_f32"), "");          // no variant
  EXPECT_NE(test::namingRuleViolation("Conv", "conv_f32__x"), "");       // empty word
  EXPECT_NE(test::namingRuleViolation("Conv", "conv_F32_avx2"), "");     // upper case
  EXPECT_NE(test::namingRuleViolation("MatMul", "gemm_f32_avx2"), "");   // another op
}

// BuilderConfig::setDisabledTactics: a pattern selects names it starts, or whole words in them.
TEST(TacticTable, DisabledTacticPatterns) {
  EXPECT_TRUE(tacticMatches("conv_f32_onednn_blocked", "onednn"));
  EXPECT_TRUE(tacticMatches("conv_f32_onednn_blocked", "onednn_blocked"));
  EXPECT_TRUE(tacticMatches("conv_fp_cudnn_2", "conv_fp_cudnn"));
  EXPECT_TRUE(tacticMatches("relu_f32_avx2", "relu"));
  EXPECT_FALSE(tacticMatches("conv_f32_onednn", "onednn_blocked"));
  EXPECT_FALSE(tacticMatches("attention_half_cudnn_sdpa", "cudnn_s"));
  EXPECT_FALSE(tacticMatches("conv_f32_im2col_gemm", "gem"));
}

TEST(TacticTable, CpuNamesAreUniqueAndFollowTheRule) { checkNames(cpuTacticTable()); }

TEST(TacticTable, CpuEntriesMatchTheReference) {
  auto cpu = getBackend(DeviceType::kCPU, 2);
  int inPlace = 0;
  EXPECT_GT(runTable(*cpu, cpuTacticTable(), inPlace), 0);
  EXPECT_GT(inPlace, 10) << "elementwise entries and the residual convs run in place too";
}

// The planner runs a layer in place by its op alone where every kernel of the op qualifies, the
// reference kernels included (they run where no table entry supports a layer).
TEST(TacticTable, ReferenceKernelsRunInPlaceWhereDeclared) {
  auto cpu = getBackend(DeviceType::kCPU, 2);
  int ran = 0;
  for (const std::string& op : OpRegistry::instance().names())
    for (const test::OpCase& c : test::casesFor(op, DataType::kFLOAT)) {
      const int over = inPlaceInput(op, "ref", c.inputs.size());
      if (over < 0) continue;
      const std::vector<HostTensor> ref = test::runReference(c);
      if (!canRunInPlace(c, over, ref)) continue;
      SCOPED_TRACE(op);
      std::vector<HostTensor> got = test::runTactic(*cpu, "ref", c, &ref, over);
      test::expectClose(got[0], ref[0], 0, 0, op + " reference in place");
      ++ran;
    }
  EXPECT_GT(ran, 20);
}

#ifdef KILN_HAVE_CUDA
// Names need no GPU: the table is plain data.
TEST(TacticTable, CudaNamesAreUniqueAndFollowTheRule) { checkNames(cudaTacticTable()); }

TEST(TacticTable, CudaEntriesMatchTheReference) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 1);
  int inPlace = 0;
  EXPECT_GT(runTable(*gpu, cudaTacticTable(), inPlace), 0);
  EXPECT_GT(inPlace, 10) << "elementwise entries run in place too";
}

// Every coveredElsewhere() prefix names entries that exist (no stale exemptions).
TEST(TacticTable, ExemptionsNameExistingEntries) {
  std::vector<TacticDef> all = cpuTacticTable();
  all.insert(all.end(), cudaTacticTable().begin(), cudaTacticTable().end());
  for (const auto& [prefix, suite] : coveredElsewhere()) {
#ifdef KILN_TEST_WITHOUT_ONEDNN
    if (prefix.find("onednn") != std::string::npos) continue;  // a build without oneDNN has no such tactics
#endif
    bool found = false;
    for (const TacticDef& d : all) found = found || d.name.rfind(prefix, 0) == 0;
    EXPECT_TRUE(found) << prefix << " (" << suite << ") matches no tactic";
  }
}
#else
TEST(TacticTable, CudaEntriesMatchTheReference) { GTEST_SKIP() << "built without the CUDA backend"; }
#endif

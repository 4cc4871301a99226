// CUDA tactics: normalization family — Softmax, LogSoftmax, LayerNormalization, RMSNormalization,
// GroupNormalization, InstanceNormalization, BatchNormalization (inference), Reduce*, ArgMax,
// ArgMin, TopK, CumSum. Host side: supports(), per-shape parameters and launch geometry at
// reshape(); execute() fills in the buffers and launches (kernels in norm_rows.cu,
// softmax_rows.cu, reduce_kernels.cu, select_kernels.cu).
#include <algorithm>
#include <string>

#include "core/type_dispatch.h"
#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/norm_group_nhwc.h"
#include "backends/cuda/norm_launch.cuh"
#include "ops/conv_layout.h"
#include "ops/fp8_matmul.h"
#include "ops/fused_attrs.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

using namespace kiln::cuda;

bool isSelectType(DataType t) { return isFloatType(t) || t == DataType::kINT32 || t == DataType::kINT64; }

//! Whether every present input in [from, to) has the type of input 0.
bool sameTypes(const LayerDesc& l, size_t from, size_t to) {
  for (size_t i = from; i < to && i < l.inputs.size(); ++i)
    if (l.present(i) && l.inputs[i].type != l.inputs[0].type) return false;
  return true;
}

int64_t product(const Dims& d, size_t from, size_t to) { return volume(Dims(d.begin() + from, d.begin() + to)); }

[[noreturn]] void unsupported(const LayerDesc& l, const std::string& msg) {
  throw UnsupportedError("layer '" + l.name + "' (" + l.op + "): CUDA: " + msg);
}


// ---- Softmax / LogSoftmax ----------------------------------------------------------------------

bool supportsSoftmax(const LayerDesc& l) { return !l.inputs.empty() && isFloatType(l.inputs[0].type); }

class SoftmaxKernel : public Kernel {
 public:
  explicit SoftmaxKernel(const LayerDesc& l) : log_(l.op == "LogSoftmax") {}
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto& p = makeState<SoftmaxParams>(state);
    p.type = l.inputs[0].type;
    p.log = log_;
    const AxisSplit split = softmaxSplit(l, l.inputs[0].dims);
    p.outer = split.outer;
    p.length = split.length;
    p.inner = split.inner;
    if (p.inner == 1) p.geo = planRows(p.outer, p.length, elementSize(p.type), true, /*subWarp=*/true);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    auto p = paramsOf<SoftmaxParams>(state);
    p.x = io.in[0].data;
    p.y = io.out[0].data;
    launchSoftmax(p, streamOf(io));
  }

 private:
  bool log_;
};

// ---- LayerNormalization / RMSNormalization ---------------------------------------------------

//! float8e4m3fn codes as an output (fuse_fp8_quantize.cpp; the warp-row kernel writes them).
bool codesOut(const LayerDesc& l) { return fp8CodesOutput(*l.attrs) >= 0; }

//! What every LayerNorm / RMSNorm kernel needs (inputs and attributes; FP8 codes aside).
bool layerNormInputsSupported(const LayerDesc& l) {
  if (l.inputs.size() < 2 || !isFloatType(l.inputs[0].type) || !sameTypes(l, 1, 3)) return false;
  if (l.inputs.size() > 3 && (!hasSkipInput(*l.attrs) || l.inputs[3].type != l.inputs[0].type)) return false;
  if (l.inputs[0].dims.size() > static_cast<size_t>(kMaxReduceDims)) return false;
  // Statistics outputs are float32 (stash_type 1, the default); double statistics are refused.
  return l.attrs->getInt("stash_type", 1) == 1;
}

bool supportsLayerNorm(const LayerDesc& l) { return !codesOut(l) && layerNormInputsSupported(l); }

//! Whether parameter dims `p` broadcast to X indexes only the normalized block as X does (the
//! parameter's element for X's element (r, k) is k).
bool directParam(const Dims& p, const Dims& x, int64_t axis) {
  const size_t rank = x.size();
  if (p.size() > rank) return false;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t pd = d + p.size() >= rank ? p[d + p.size() - rank] : 1;
    if (static_cast<int64_t>(d) < axis ? pd != 1 : pd != x[d]) return false;
  }
  return true;
}

//! The normalized block's element count when it is known, else -1.
int64_t knownRowWidth(const LayerDesc& l) {
  const Dims& x = l.inputs[0].dims;
  const int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", -1), static_cast<int64_t>(x.size()));
  int64_t cols = 1;
  for (size_t d = static_cast<size_t>(axis); d < x.size(); ++d) {
    if (x[d] < 0) return -1;
    cols *= x[d];
  }
  return cols;
}

//! The warp-row tactics (norm_warp_rows.cu): per-element scale / bias over rows whose width is
//! known at build time and fits in registers (16-byte vectors or single elements).
bool supportsLayerNormWarpRows(const LayerDesc& l) {
  if (!layerNormInputsSupported(l)) return false;  // FP8 codes included: this kernel writes them
  const Dims& x = l.inputs[0].dims;
  const int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", -1), static_cast<int64_t>(x.size()));
  for (size_t i = 1; i < 3 && i < l.inputs.size(); ++i)
    if (l.present(i) && !directParam(l.inputs[i].dims, x, axis)) return false;
  const int64_t cols = knownRowWidth(l);
  const int maxItems = l.inputs.size() > 3 ? 16 : 32;
  return cols > 0 && planWarpRows(cols, elementSize(l.inputs[0].type), true, maxItems).lanes > 0;
}

class LayerNormKernel : public Kernel {
 public:
  LayerNormKernel(const LayerDesc& l, bool warpRows)
      : rms_(l.op == "RMSNormalization"), warpRows_(warpRows), codesAt_(fp8CodesOutput(*l.attrs)) {}
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    const int64_t rank = static_cast<int64_t>(x.size());
    const int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", -1), rank);
    auto& p = makeState<RowNormParams>(state);
    p.type = l.inputs[0].type;
    p.rms = rms_;
    p.eps = l.attrs->getFloat("epsilon", 1e-5f);
    p.rows = product(x, 0, axis);
    p.cols = product(x, axis, x.size());
    const bool hasBias = l.present(2);
    const bool direct = directParam(l.inputs[1].dims, x, axis) && (!hasBias || directParam(l.inputs[2].dims, x, axis));
    if (direct) {
      p.mode = RowNormParams::kDirect;
    } else {
      if (rank > kMaxReduceDims) unsupported(l, "broadcast scale/bias with rank > 8");
      p.mode = RowNormParams::kBroadcast;
      p.rank = static_cast<int>(rank);
      const auto ss = broadcastStrides(l.inputs[1].dims, x);
      const auto bs = hasBias ? broadcastStrides(l.inputs[2].dims, x) : std::vector<int64_t>(x.size(), 0);
      for (int64_t d = 0; d < rank; ++d) p.dims[d] = x[d], p.scaleStrides[d] = ss[d], p.biasStrides[d] = bs[d];
    }
    p.geo = planRows(p.rows, p.cols, elementSize(p.type), true, /*subWarp=*/true);
    if (warpRows_) p.warp = planWarpRows(p.cols, elementSize(p.type), true, l.inputs.size() > 3 ? 16 : 32);
    if (codesAt_ >= 0) p.codeScale = l.attrs->getFloat(kFp8OutScaleAttr, 1.f);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    auto p = paramsOf<RowNormParams>(state);
    p.x = io.in[0].data;
    p.scale = io.in[1].data;
    p.bias = io.in.size() > 2 ? io.in[2].data : nullptr;
    p.skip = io.in.size() > 3 ? io.in[3].data : nullptr;
    p.y = io.out[0].data;
    if (codesAt_ >= 0) {  // FP8 codes instead of Y, or as the second output (no Sum / Mean / InvStdDev then)
      p.codes = static_cast<uint8_t*>(io.out[static_cast<size_t>(codesAt_)].data);
      if (codesAt_ == 0) p.y = nullptr;
    }
    const bool extraOutputs = codesAt_ != 1 && io.out.size() > 1;  // output 1 is not the codes
    if (extraOutputs && p.skip) {  // skip LayerNorm: the second output is the sum (pre-LN blocks' residual)
      p.sum = io.out[1].data;
    } else if (extraOutputs) {
      p.mean = static_cast<float*>(io.out[1].data);
      if (io.out.size() > 2) p.invStd = static_cast<float*>(io.out[2].data);
    }
    if (warpRows_) launchRowNormWarp(p, streamOf(io));
    else launchRowNorm(p, streamOf(io));
  }

 private:
  bool rms_, warpRows_;
  int codesAt_;  //!< the output holding FP8 codes (kFp8OutScaleAttr), -1: none
};

// ---- GroupNormalization / InstanceNormalization ----------------------------------------------

//! X, scale, bias (and a fused residual of Y's dims: fuse_residual.cpp) of one float type.
bool groupNormInputsSupported(const LayerDesc& l) {
  if (l.inputs.size() < 3 || l.inputs.size() > 4 || !isFloatType(l.inputs[0].type)) return false;
  if (l.inputs.size() == 4 && (!l.present(3) || l.outputs.empty() || l.inputs[3].dims != l.outputs[0].dims)) return false;
  return sameTypes(l, 1, l.inputs.size());
}

bool supportsGroupNorm(const LayerDesc& l) { return groupNormInputsSupported(l) && hasPlainLayouts(l); }

//! The channels-last tactic: X and Y nhwc (the GPU layout pass's choice), 4-D.
bool supportsGroupNormNhwc(const LayerDesc& l) {
  if (!groupNormInputsSupported(l)) return false;
  if (inLayoutBlock(l) != kNhwcBlock || outLayoutBlock(l) != kNhwcBlock || l.inputs[0].dims.size() != 4) return false;
  const int64_t c = l.inputs[0].dims[1];
  const int64_t g = l.op == "GroupNormalization" ? l.attrs->getInt("num_groups", 0) : c;
  return groupNormNhwcFits(c, g, elementSize(l.inputs[0].type));
}

//! The row-kernel parameters of a GroupNormalization / InstanceNormalization layer.
void groupNormParams(const LayerDesc& l, RowNormParams& p) {
  const Dims& x = l.inputs[0].dims;
  const int64_t n = x[0], c = x[1], spatial = product(x, 2, x.size());
  int64_t g = c;  // InstanceNormalization: one group per channel
  if (l.op == "GroupNormalization") {
    g = l.attrs->getInt("num_groups", 0);
    if (g <= 0 || c % g != 0) opError(l, "channels must be divisible by num_groups > 0");
  }
  p.type = l.inputs[0].type;
  p.eps = l.attrs->getFloat("epsilon", 1e-5f);
  p.rows = n * g;
  p.cols = (g > 0 ? c / g : 0) * spatial;
  p.groups = std::max<int64_t>(g, 1);
  p.perGroup = g > 0 ? c / g : 0;
  p.spatial = spatial;
  const bool affinePerGroup = perGroupAffine(*l.attrs) && volume(l.inputs[1].dims) == g;
  p.mode = affinePerGroup ? RowNormParams::kPerGroup : RowNormParams::kPerChannel;
  const Activation act = fusedActivation(*l.attrs);
  p.act = static_cast<int>(act.kind);
  p.actAlpha = act.alpha;
  p.actBeta = act.beta;
}

//! X, scale, bias and Y of a GroupNormalization / InstanceNormalization run, into any tactic's params.
template <class P> void bindGroupNormIO(P& p, const KernelIO& io) {
  p.x = io.in[0].data;
  p.scale = io.in[1].data;
  p.bias = io.in[2].data;
  p.residual = io.in.size() > 3 ? io.in[3].data : nullptr;
  p.y = io.out[0].data;
}

class GroupNormKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto& p = makeState<RowNormParams>(state);
    groupNormParams(l, p);
    p.geo = planRows(p.rows, p.cols, elementSize(p.type), true, /*subWarp=*/true);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    auto p = paramsOf<RowNormParams>(state);
    bindGroupNormIO(p, io);
    launchRowNorm(p, streamOf(io));
  }
};

// A group over many blocks (norm_group_split.cu): for few or large groups. The one-pass tactic
// takes the single cooperative kernel where the tensor is small enough, the two kernels elsewhere.
struct GroupSplitParams {
  RowNormParams p;
  GroupSplitPlan plan;
};

class GroupNormSplitKernel : public Kernel {
 public:
  explicit GroupNormSplitKernel(bool onePass) : onePass_(onePass) {}
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto& s = makeState<GroupSplitParams>(state);
    groupNormParams(l, s.p);
    s.plan = onePass_ ? planGroupSplitOnePass(s.p.rows, s.p.cols, s.p.spatial, s.p.type)
                      : planGroupSplit(s.p.rows, s.p.cols, s.p.spatial, elementSize(s.p.type));
    return s.plan.workspaceBytes(s.p.rows);
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const auto& s = paramsOf<GroupSplitParams>(state);
    RowNormParams p = s.p;
    bindGroupNormIO(p, io);
    if (io.workspaceSize < s.plan.workspaceBytes(p.rows)) throw Error("GroupNormalization (split): workspace too small");
    launchGroupNormSplit(p, s.plan, io.workspace, streamOf(io));
  }

 private:
  bool onePass_;
};

// Channels-last X and Y (norm_group_nhwc.cu); the one-pass tactic takes the single cooperative
// kernel and the cluster tactic one thread-block cluster per image (norm_group_nhwc_cluster.cu)
// where the tensor is small enough, both the two kernels elsewhere.
enum class NhwcPlan { kTwoPass, kOnePass, kCluster };

//! X's shape and the layer's attributes into p (no plan yet).
void groupNormNhwcShape(const LayerDesc& l, GroupNormNhwcParams& p) {
  RowNormParams r;
  groupNormParams(l, r);
  const Dims& x = l.inputs[0].dims;
  p.type = r.type;
  p.n = x[0];
  p.c = x[1];
  p.hw = x[2] * x[3];
  p.groups = r.groups;
  p.eps = r.eps;
  p.perGroupAffine = r.mode == RowNormParams::kPerGroup;
  p.act = r.act;
  p.actAlpha = r.actAlpha;
  p.actBeta = r.actBeta;
}

class GroupNormNhwcKernel : public Kernel {
 public:
  explicit GroupNormNhwcKernel(NhwcPlan plan) : plan_(plan) {}
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    auto& p = makeState<GroupNormNhwcParams>(state);
    groupNormNhwcShape(l, p);
    switch (plan_) {
      case NhwcPlan::kOnePass: planGroupNormNhwcOnePass(p); break;
      case NhwcPlan::kCluster: planGroupNormNhwcCluster(p); break;
      case NhwcPlan::kTwoPass: planGroupNormNhwc(p); break;
    }
    return p.workspaceBytes();
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    GroupNormNhwcParams p = paramsOf<GroupNormNhwcParams>(state);
    bindGroupNormIO(p, io);
    if (io.workspaceSize < p.workspaceBytes()) throw Error("GroupNormalization (nhwc): workspace too small");
    launchGroupNormNhwc(p, io.workspace, streamOf(io));
  }

 private:
  NhwcPlan plan_;
};

//! The cluster tactic where its plan exists at the layer's static shape (dynamic shapes: offered,
//! falling back to the two kernels at any shape without one), so that timing does not run the
//! two-pass plan twice.
bool supportsGroupNormNhwcCluster(const LayerDesc& l) {
  if (!supportsGroupNormNhwc(l)) return false;
  if (!isStatic(l.inputs[0].dims)) return true;
  GroupNormNhwcParams p;
  groupNormNhwcShape(l, p);
  return planGroupNormNhwcCluster(p);
}

// ---- BatchNormalization (inference) ----------------------------------------------------------

bool supportsBatchNorm(const LayerDesc& l) {
  return l.inputs.size() == 5 && isFloatType(l.inputs[0].type) && sameTypes(l, 1, 5) &&
         l.attrs->getInt("training_mode", 0) == 0 && l.outputs.size() <= 1;
}

class BatchNormKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    auto& p = makeState<BatchNormParams>(state);
    p.type = l.inputs[0].type;
    p.count = volume(x);
    p.channels = x[1];
    p.spatial = product(x, 2, x.size());
    p.perActivation = perActivationBatchNorm(*l.attrs);
    p.eps = l.attrs->getFloat("epsilon", 1e-5f);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    auto p = paramsOf<BatchNormParams>(state);
    p.x = io.in[0].data;
    p.scale = io.in[1].data;
    p.bias = io.in[2].data;
    p.mean = io.in[3].data;
    p.var = io.in[4].data;
    p.y = io.out[0].data;
    launchBatchNorm(p, streamOf(io));
  }
};

// ---- Reduce* ---------------------------------------------------------------------------------

struct ReduceName {
  const char* op;
  ReduceKind kind;
};
constexpr ReduceName kReduceNames[] = {
    {"ReduceSum", ReduceKind::kSum},       {"ReduceMean", ReduceKind::kMean},
    {"ReduceMax", ReduceKind::kMax},       {"ReduceMin", ReduceKind::kMin},
    {"ReduceProd", ReduceKind::kProd},     {"ReduceL1", ReduceKind::kL1},
    {"ReduceL2", ReduceKind::kL2},         {"ReduceLogSum", ReduceKind::kLogSum},
    {"ReduceLogSumExp", ReduceKind::kLogSumExp}, {"ReduceSumSquare", ReduceKind::kSumSquare},
};

ReduceKind reduceKind(const std::string& op) {
  for (const auto& r : kReduceNames)
    if (op == r.op) return r.kind;
  throw Error("not a reduction: " + op);
}

bool supportsReduce(const LayerDesc& l) {
  if (l.inputs.empty()) return false;
  const DataType t = l.inputs[0].type;
  const ReduceKind k = reduceKind(l.op);
  if (isFloatType(t)) return true;
  if (t == DataType::kINT32 || t == DataType::kINT64)
    return k != ReduceKind::kL2 && k != ReduceKind::kLogSum && k != ReduceKind::kLogSumExp;
  return false;
}

class ReduceKernel : public Kernel {
 public:
  explicit ReduceKernel(const LayerDesc& l) : kind_(reduceKind(l.op)) {}
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    const int64_t rank = static_cast<int64_t>(x.size());
    std::vector<int64_t> axes;
    if (l.present(1)) {
      if (!l.inputs[1].value.valid()) opError(l, "axes must be known when the shapes are (value input)");
      axes = l.inputs[1].value.toInts();
    }
    auto& p = makeState<ReduceParams>(state);
    p.type = l.inputs[0].type;
    p.kind = kind_;
    p.inCount = volume(x);
    std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
    if (axes.empty() && l.attrs->getInt("noop_with_empty_axes", 0) != 0) {
      p.copy = true;
      return 0;
    }
    for (int64_t a : axes) {
      const int64_t n = normalizeAxis(l, a, rank);
      if (reduced[n]) opError(l, "axis " + std::to_string(a) + " appears more than once in axes");
      reduced[n] = true;
    }
    // Merge adjacent dims of the same kind (size-1 dims do not matter); strides of row-major X.
    struct Group {
      int64_t size, stride;
      bool reduced;
    };
    std::vector<Group> groups;
    const auto strides = rowMajorStrides(x);
    for (int64_t d = 0; d < rank; ++d) {
      if (x[d] == 1) continue;
      if (!groups.empty() && groups.back().reduced == reduced[d]) {
        groups.back().size *= x[d];
        groups.back().stride = strides[d];
      } else {
        groups.push_back({x[d], strides[d], static_cast<bool>(reduced[d])});
      }
    }
    p.outCount = 1;
    p.redCount = 1;
    for (const auto& g : groups) {
      if (g.reduced) {
        if (p.nRed == kMaxReduceDims) unsupported(l, "too many separate reduced dims");
        p.redDims[p.nRed] = g.size, p.redStrides[p.nRed++] = g.stride;
        p.redCount *= g.size;
      } else {
        if (p.nKept == kMaxReduceDims) unsupported(l, "too many separate kept dims");
        p.keptDims[p.nKept] = g.size, p.keptStrides[p.nKept++] = g.stride;
        p.outCount *= g.size;
      }
    }
    // Row form: at most one reduced group, and it is the innermost.
    p.rowForm = p.nRed == 0 || (p.nRed == 1 && groups.back().reduced);
    if (p.rowForm) p.geo = planRows(p.outCount, p.redCount, elementSize(p.type));
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    auto p = paramsOf<ReduceParams>(state);
    p.x = io.in[0].data;
    p.y = io.out[0].data;
    launchReduce(p, streamOf(io));
  }

 private:
  ReduceKind kind_;
};

// ---- ArgMax / ArgMin, TopK, CumSum -----------------------------------------------------------

bool supportsArg(const LayerDesc& l) { return l.inputs.size() == 1 && isSelectType(l.inputs[0].type); }
bool supportsTopK(const LayerDesc& l) { return l.inputs.size() == 2 && isSelectType(l.inputs[0].type); }
//! CumSum's axis is a value input: a constant, or read on the host when the shape is planned.
bool supportsCumSum(const LayerDesc& l) {
  if (l.inputs.size() != 2 || !l.present(1) || !isSelectType(l.inputs[0].type)) return false;
  const Dims& a = l.inputs[1].dims;
  return !isStatic(a) || volume(a) == 1;
}

//! [outer, len, inner] around `axis`.
void splitAround(const Dims& x, int64_t axis, int64_t& outer, int64_t& len, int64_t& inner) {
  outer = product(x, 0, axis);
  len = x[axis];
  inner = product(x, axis + 1, x.size());
}

class ArgKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    const int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", 0), static_cast<int64_t>(x.size()));
    auto& p = makeState<ArgParams>(state);
    p.type = l.inputs[0].type;
    splitAround(x, axis, p.outer, p.len, p.inner);
    if (p.len == 0) opError(l, "cannot reduce an empty axis");
    p.isMax = l.op == "ArgMax";
    p.last = l.attrs->getInt("select_last_index", 0) != 0;
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    auto p = paramsOf<ArgParams>(state);
    p.x = io.in[0].data;
    p.y = static_cast<int64_t*>(io.out[0].data);
    launchArg(p, streamOf(io));
  }
};

class TopKKernel : public Kernel {
 public:
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    const int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", -1), static_cast<int64_t>(x.size()));
    if (!l.inputs[1].value.valid() || l.inputs[1].value.count() != 1) opError(l, "K must be known (one value)");
    auto& p = makeState<TopKParams>(state);
    p.type = l.inputs[0].type;
    splitAround(x, axis, p.outer, p.len, p.inner);
    p.k = l.inputs[1].value.getInt(0);
    if (p.k < 0 || p.k > p.len) opError(l, "K = " + std::to_string(p.k) + " is out of range for axis length " + std::to_string(p.len));
    p.largest = l.attrs->getInt("largest", 1) != 0;
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    auto p = paramsOf<TopKParams>(state);
    p.x = io.in[0].data;
    p.values = io.out[0].data;
    p.indices = static_cast<int64_t*>(io.out[1].data);
    launchTopK(p, streamOf(io));
  }
};

class CumSumKernel : public Kernel {
 public:
  explicit CumSumKernel(const LayerDesc&) {}
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    const Dims& x = l.inputs[0].dims;
    if (!l.inputs[1].value.valid() || l.inputs[1].value.count() != 1) unsupported(l, "the axis must be one known value");
    const int64_t axis = normalizeAxis(l, l.inputs[1].value.getInt(0), static_cast<int64_t>(x.size()));
    auto& p = makeState<CumSumParams>(state);
    p.type = l.inputs[0].type;
    splitAround(x, axis, p.outer, p.len, p.inner);
    p.exclusive = l.attrs->getInt("exclusive", 0) != 0;
    p.reverse = l.attrs->getInt("reverse", 0) != 0;
    p.product = l.op == "CumProd";
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    auto p = paramsOf<CumSumParams>(state);
    p.x = io.in[0].data;
    p.y = io.out[0].data;
    launchCumSum(p, streamOf(io));
  }
};

template <typename K>
std::unique_ptr<Kernel> createPlain(const LayerDesc&) {
  return std::make_unique<K>();
}
template <typename K>
std::unique_ptr<Kernel> createWithLayer(const LayerDesc& l) {
  return std::make_unique<K>(l);
}
template <NhwcPlan kPlan>
std::unique_ptr<Kernel> createGroupNormNhwc(const LayerDesc&) { return std::make_unique<GroupNormNhwcKernel>(kPlan); }
template <bool kOnePass>
std::unique_ptr<Kernel> createGroupNormSplit(const LayerDesc&) { return std::make_unique<GroupNormSplitKernel>(kOnePass); }
std::unique_ptr<Kernel> createLayerNorm(const LayerDesc& l) { return std::make_unique<LayerNormKernel>(l, false); }
std::unique_ptr<Kernel> createLayerNormWarpRows(const LayerDesc& l) { return std::make_unique<LayerNormKernel>(l, true); }

}  // namespace

namespace cuda {
KernelFactory softmaxCuda() { return {supportsSoftmax, createWithLayer<SoftmaxKernel>}; }  // Softmax, LogSoftmax
KernelFactory layerNormCuda() { return {supportsLayerNorm, createLayerNorm}; }  // and RMSNormalization
KernelFactory layerNormWarpRowsCuda() { return {supportsLayerNormWarpRows, createLayerNormWarpRows}; }  // and RMSNormalization
KernelFactory groupNormCuda() { return {supportsGroupNorm, createPlain<GroupNormKernel>}; }  // and InstanceNormalization
KernelFactory groupNormSplitCuda() { return {supportsGroupNorm, createGroupNormSplit<false>}; }  // and InstanceNormalization
KernelFactory groupNormSplitOnePassCuda() { return {supportsGroupNorm, createGroupNormSplit<true>}; }  // and InstanceNormalization
KernelFactory groupNormNhwcCuda() { return {supportsGroupNormNhwc, createGroupNormNhwc<NhwcPlan::kTwoPass>}; }  // and InstanceNormalization
KernelFactory groupNormNhwcOnePassCuda() { return {supportsGroupNormNhwc, createGroupNormNhwc<NhwcPlan::kOnePass>}; }  // and InstanceNormalization
KernelFactory groupNormNhwcClusterCuda() { return {supportsGroupNormNhwcCluster, createGroupNormNhwc<NhwcPlan::kCluster>}; }  // and InstanceNormalization
KernelFactory batchNormCuda() { return {supportsBatchNorm, createPlain<BatchNormKernel>}; }
KernelFactory reduceCuda() { return {supportsReduce, createWithLayer<ReduceKernel>}; }  // every Reduce* op
KernelFactory argCuda() { return {supportsArg, createPlain<ArgKernel>}; }  // ArgMax, ArgMin
KernelFactory topKCuda() { return {supportsTopK, createPlain<TopKKernel>}; }
KernelFactory cumulativeCuda() { return {supportsCumSum, createWithLayer<CumSumKernel>}; }  // CumSum, CumProd
}  // namespace cuda

}  // namespace kiln

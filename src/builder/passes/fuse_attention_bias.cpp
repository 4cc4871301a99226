// Attention fusion, step 2c: a runtime mask that is a bounded bias (fuse_attention_steps.h). T5's
// dynamic export computes its relative position bias at run time, Gather(table, buckets) ->
// Transpose -> Unsqueeze, where a fixed export has it as a constant. cuDNN's SDPA takes a constant
// mask as its bias once it has checked that no query row is fully masked (its softmax of such a
// row is not the zeros kiln's kernels write), and leaves runtime masks to the flash kernels, which
// are slower on these shapes. A runtime mask whose every value is finite and above kVeryNegative
// masks no key at all, so the check holds at any run: the fusion proves it here by interval
// arithmetic over the mask's subgraph, and marks the layer (kiln_mask_bias).
#include <algorithm>
#include <cmath>

#include "builder/passes/fuse_attention_steps.h"
#include "builder/passes/passes.h"
#include "core/type_dispatch.h"

namespace kiln::attention_fusion {

namespace {

constexpr int kMaxDepth = 16;
constexpr double kHalfMax = 65504;  // a bias cast to float16 must stay finite

struct Range {
  double lo = 0, hi = 0;
};

bool isRangePreserving(const std::string& op) {
  static const char* const kOps[] = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Expand", "Slice",
                                     "Identity", "Tile", "Gather", "GatherElements", "GatherND"};
  return std::any_of(std::begin(kOps), std::end(kOps), [&](const char* o) { return op == o; });
}

//! The values `t` can take, when they come from finite constants through layers that keep them
//! within a computable interval; false otherwise (any other op, a runtime input, a non-finite value).
bool valueRange(const Tensor* t, Range& r, int depth = 0) {
  if (!t || depth > kMaxDepth || !isFloatType(t->type)) return false;
  if (t->isConstant()) {
    const HostTensor& v = t->value;
    if (v.count() < 1) return false;
    r.lo = r.hi = v.getDouble(0);
    for (int64_t i = 0; i < v.count(); ++i) {
      const double x = v.getDouble(i);
      if (!std::isfinite(x)) return false;
      r.lo = std::min(r.lo, x), r.hi = std::max(r.hi, x);
    }
    return true;
  }
  const Layer* l = t->producer;
  if (!l || l->outputs.size() != 1 || l->inputs.empty() || !l->inputs[0] || (!l->domain.empty() && l->domain != "ai.onnx")) return false;
  if (isRangePreserving(l->op)) return valueRange(l->inputs[0], r, depth + 1);  // data (the other inputs: shapes, indices)
  if (l->op == "Cast") {
    if (!valueRange(l->inputs[0], r, depth + 1)) return false;
    return t->type != DataType::kHALF || (r.lo > -kHalfMax && r.hi < kHalfMax);
  }
  if (l->op == "Add" || l->op == "Concat") {
    bool first = true;
    for (const Tensor* in : l->inputs) {
      Range x;
      if (!in || !valueRange(in, x, depth + 1)) return false;
      if (first) r = x;
      else if (l->op == "Add") r.lo += x.lo, r.hi += x.hi;
      else r.lo = std::min(r.lo, x.lo), r.hi = std::max(r.hi, x.hi);
      first = false;
    }
    return !first && std::isfinite(r.lo) && std::isfinite(r.hi);
  }
  return false;
}

//! The mask's last two dims are the scores' Sq and Skv: statically, or at every sample.
bool fullQueryKeyDims(const AttentionMatch& am, const Tensor* m, SampleDims& samples) {
  auto full = [](const Dims& md, const Dims& sd) {
    return md.size() >= 2 && sd.size() == 4 && md[md.size() - 2] == sd[2] && md.back() == sd[3] && sd[2] > 0 && sd[3] > 0;
  };
  return holdsAtEveryShape(am, m, samples, [&](const DescOf& desc, const Dims& scores) { return full(desc(m).dims, scores); });
}

}  // namespace

bool maskIsBoundedBias(const AttentionMatch& am, const CanonicalMask& cm, SampleDims& samples) {
  const Tensor* m = cm.mask;
  if (!m || m->isConstant() || !isFloatType(m->type) || std::isfinite(cm.maskFill)) return false;
  Range r;
  return valueRange(m, r) && r.lo > kVeryNegative && fullQueryKeyDims(am, m, samples);
}

}  // namespace kiln::attention_fusion

// CUDA tactics: shape family (data movement). Every op here copies raw elements of any type
// (by element size). Reshape-like ops are one device memcpy (none when the runtime aliases the
// output to the input); layout ops are planned in reshape() as CopyPlans (axes merged, so
// [B,S,H,D] <-> [B,H,S,D] becomes a 16-byte-vector row gather and [.., M, N] -> [.., N, M] a
// tiled transpose) and execute() only launches them (shape_copy.cu). Index ops, Pad, Trilu,
// Range, Shape/Size live in shape_index.cu / shape_misc.cu, Resize in resize_cuda.cu.
#include <algorithm>
#include <cstring>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/shape_cuda.cuh"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"
#include "ops/layout_transpose.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

using cuda::CopyPlan;
using cuda::contiguousStrides;
using cuda::makeCopyPlan;

bool anyElementSize(const LayerDesc& l) {
  if (l.inputs.empty() || !l.present(0)) return false;
  size_t es = elementSize(l.inputs[0].type);
  return es == 1 || es == 2 || es == 4 || es == 8;
}

// ---------------------------------------------------------------- Reshape & co.: one memcpy

class CopyKernel : public Kernel {
 public:
  void execute(const KernelIO& io, KernelState*) const override {
    cudaStream_t s = cuda::streamOf(io);
    cuda::copyDevice(io.out[0].data, io.in[0].data, static_cast<size_t>(io.out[0].count) * elementSize(io.out[0].type), s);
    // Dropout's optional mask: all true at inference (bool: one byte each).
    if (io.out.size() > 1 && io.out[1].data && io.out[1].count > 0)
      KILN_CUDA_CHECK(cudaMemsetAsync(io.out[1].data, 1, static_cast<size_t>(io.out[1].count), s));
  }
};

std::unique_ptr<Kernel> createCopy(const LayerDesc&) { return std::make_unique<CopyKernel>(); }

// ---------------------------------------------------------------- planned copies

//! One strided copy from input `in` to output `out`.
struct Move {
  size_t in = 0, out = 0;
  CopyPlan plan;
};

struct MovesState : KernelState {
  std::vector<Move> moves;
};

using Planner = std::vector<Move> (*)(const LayerDesc& concrete);

class MoveKernel : public Kernel {
 public:
  explicit MoveKernel(Planner p) : planner_(p) {}
  size_t reshape(const LayerDesc& concrete, std::unique_ptr<KernelState>& state) const override {
    auto s = std::make_unique<MovesState>();
    s->moves = planner_(concrete);
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* s = static_cast<const MovesState*>(state);
    const size_t es = elementSize(io.in[0].type);
    for (const Move& m : s->moves)
      cuda::launchCopy(m.plan, es, io.in[m.in].data, io.out[m.out].data, cuda::streamOf(io));
  }

 private:
  Planner planner_;
};

template <Planner P>
std::unique_ptr<Kernel> createMove(const LayerDesc&) {
  return std::make_unique<MoveKernel>(P);
}

//! A gather into a contiguous output of `outDims` reading the input with `istr` from `ibase`.
Move gatherMove(const Dims& outDims, const std::vector<int64_t>& istr, int64_t ibase = 0) {
  Move m;
  m.plan = makeCopyPlan(outDims, istr, contiguousStrides(outDims), ibase, 0);
  return m;
}

std::vector<int64_t> permOf(const LayerDesc& l, size_t rank) {
  std::vector<int64_t> perm = l.attrs->getInts("perm");
  if (perm.empty() && !l.attrs->has("perm"))
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  if (perm.size() != rank) opError(l, "perm does not match the input rank");
  for (int64_t p : perm)
    if (p < 0 || p >= static_cast<int64_t>(rank)) opError(l, "perm is not a permutation");
  return perm;
}

std::vector<Move> planTranspose(const LayerDesc& l) {
  const Dims& in = l.inputs[0].dims;
  std::vector<int64_t> perm = permOf(l, in.size()), inStr = contiguousStrides(in), istr;
  Dims out;
  for (int64_t p : perm) {
    out.push_back(in[p]);
    istr.push_back(inStr[p]);
  }
  return {gatherMove(out, istr)};
}

//! A Concat as its bytes are stored: the logical dims and axis, or, for a channel Concat of the
//! GPU layout pass (every input and Y nhwc), the [N, H, W, C] dims joined along axis 3.
struct StoredConcat {
  std::vector<Dims> in;
  Dims out;
  int64_t axis = 0;
};

//! A channel Concat whose X and Y are both nhwc (gpu_layout.cpp's channelConcat).
bool channelsLastConcat(const LayerDesc& l) {
  if (inLayoutBlock(l) != kNhwcBlock || outLayoutBlock(l) != kNhwcBlock || l.outputs[0].dims.size() != 4) return false;
  const int64_t axis = l.attrs->getInt("axis", 0);
  return axis == 1 || axis == -3;
}

StoredConcat storedConcat(const LayerDesc& l) {
  StoredConcat c;
  const bool last = channelsLastConcat(l);
  for (const TensorDesc& t : l.inputs) c.in.push_back(last ? physicalDims(t.dims, kNhwcBlock) : t.dims);
  c.out = last ? physicalDims(l.outputs[0].dims, kNhwcBlock) : l.outputs[0].dims;
  c.axis = last ? 3 : normalizeAxis(l, l.attrs->getInt("axis", 0), static_cast<int64_t>(c.out.size()));
  return c;
}

//! Concat tactics: plain layouts, or a channel Concat with every tensor nhwc.
bool supportsConcat(const LayerDesc& l) { return anyElementSize(l) && (hasPlainLayouts(l) || channelsLastConcat(l)); }

std::vector<Move> planConcat(const LayerDesc& l) {
  const StoredConcat sc = storedConcat(l);
  const Dims& od = sc.out;
  const int64_t axis = sc.axis;
  const std::vector<int64_t> ostr = contiguousStrides(od);
  std::vector<Move> moves;
  int64_t offset = 0;
  for (size_t i = 0; i < l.inputs.size(); ++i) {
    const Dims& d = sc.in[i];
    Move m;
    m.in = i;
    m.plan = makeCopyPlan(d, contiguousStrides(d), ostr, 0, offset * ostr[axis]);
    offset += d[axis];
    if (m.plan.count() > 0) moves.push_back(m);
  }
  return moves;
}

std::vector<Move> planSplit(const LayerDesc& l) {
  const Dims& id = l.inputs[0].dims;
  const int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", 0), static_cast<int64_t>(id.size()));
  const std::vector<int64_t> istr = contiguousStrides(id);
  std::vector<Move> moves;
  int64_t offset = 0;
  for (size_t o = 0; o < l.outputs.size(); ++o) {
    const Dims& d = l.outputs[o].dims;
    Move m;
    m.out = o;
    m.plan = makeCopyPlan(d, istr, contiguousStrides(d), offset * istr[axis], 0);
    offset += d[axis];
    if (m.plan.count() > 0) moves.push_back(m);
  }
  return moves;
}

// ---------------------------------------------------------------- Concat/Split in one launch

struct SegmentsState : KernelState {
  cuda::SegmentPlan plan;
  std::vector<size_t> pieces;  // input (Concat) or output (Split) index of each plan piece
};

//! Concat (gather = true: inputs are the pieces) or Split (outputs are the pieces) as one
//! segment copy (segment_copy.cu) instead of one strided copy per piece.
class SegmentKernel : public Kernel {
 public:
  explicit SegmentKernel(bool gather) : gather_(gather) {}
  size_t reshape(const LayerDesc& l, std::unique_ptr<KernelState>& state) const override {
    // A Concat reads its stored bytes (channels last: the channels of each pixel are the row).
    std::vector<Dims> pieces;
    Dims whole;
    int64_t axis = 0;
    if (gather_) {
      StoredConcat sc = storedConcat(l);
      pieces = std::move(sc.in);
      whole = std::move(sc.out);
      axis = sc.axis;
    } else {
      for (const TensorDesc& t : l.outputs) pieces.push_back(t.dims);
      whole = l.inputs[0].dims;
      axis = normalizeAxis(l, l.attrs->getInt("axis", 0), static_cast<int64_t>(whole.size()));
    }
    const int64_t es = static_cast<int64_t>(elementSize(l.inputs[0].type));
    int64_t inner = es;
    for (size_t k = static_cast<size_t>(axis) + 1; k < whole.size(); ++k) inner *= whole[k];
    auto s = std::make_unique<SegmentsState>();
    s->plan.outer = 1;
    for (int64_t k = 0; k < axis; ++k) s->plan.outer *= whole[k];
    s->plan.rowBytes = whole[axis] * inner;
    int64_t offset = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const int64_t bytes = pieces[i][axis] * inner;
      if (bytes > 0 && s->plan.outer > 0) {
        s->plan.pieceRowBytes.push_back(bytes);
        s->plan.offsetBytes.push_back(offset);
        s->pieces.push_back(i);
      }
      offset += bytes;
    }
    state = std::move(s);
    return 0;
  }
  void execute(const KernelIO& io, KernelState* state) const override {
    const auto* s = static_cast<const SegmentsState*>(state);
    if (s->pieces.empty()) return;
    std::vector<void*> ptrs;
    ptrs.reserve(s->pieces.size());
    for (size_t i : s->pieces) ptrs.push_back(gather_ ? const_cast<void*>(io.in[i].data) : io.out[i].data);
    void* whole = gather_ ? io.out[0].data : const_cast<void*>(io.in[0].data);
    cuda::launchSegmentCopy(s->plan, ptrs.data(), whole, gather_, cuda::streamOf(io));
  }

 private:
  bool gather_;
};

std::unique_ptr<Kernel> createConcatSegments(const LayerDesc&) { return std::make_unique<SegmentKernel>(true); }
std::unique_ptr<Kernel> createSplitSegments(const LayerDesc&) { return std::make_unique<SegmentKernel>(false); }

std::vector<int64_t> valueInts(const LayerDesc& l, size_t i) { return knownValue(l, i).toInts(); }

//! ONNX Slice resolved against concrete dims: per axis (start, step); sizes come from the
//! output dims that shape inference computed with the same clamping rules.
std::vector<Move> planSlice(const LayerDesc& l) {
  const Dims& in = l.inputs[0].dims;
  const Dims& out = l.outputs[0].dims;
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts = valueInts(l, 1), ends = valueInts(l, 2), axes, steps;
  if (l.present(3)) axes = valueInts(l, 3);
  else for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (l.present(4)) steps = valueInts(l, 4);
  else steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    opError(l, "starts, ends, axes and steps have different lengths");
  std::vector<int64_t> start(rank, 0), step(rank, 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t a = normalizeAxis(l, axes[i], rank), dim = in[a];
    if (steps[i] == 0) opError(l, "step is 0");
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    s = steps[i] > 0 || dim == 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, 0, dim - 1);
    start[a] = out[a] > 0 ? s : 0;
    step[a] = steps[i];
  }
  const std::vector<int64_t> inStr = contiguousStrides(in);
  std::vector<int64_t> istr(rank);
  int64_t base = 0;
  for (int64_t k = 0; k < rank; ++k) {
    istr[k] = inStr[k] * step[k];
    base += start[k] * inStr[k];
  }
  return {gatherMove(out, istr, base)};
}

std::vector<Move> planExpand(const LayerDesc& l) {
  const Dims& out = l.outputs[0].dims;
  return {gatherMove(out, broadcastStrides(l.inputs[0].dims, out))};
}

//! Tile: the output viewed as [r0, d0, r1, d1, ...] reads the input with stride 0 over repeats.
std::vector<Move> planTile(const LayerDesc& l) {
  const Dims& in = l.inputs[0].dims;
  const Dims& out = l.outputs[0].dims;
  const std::vector<int64_t> inStr = contiguousStrides(in);
  Dims view;
  std::vector<int64_t> istr;
  for (size_t i = 0; i < in.size(); ++i) {
    view.push_back(in[i] == 0 ? 0 : out[i] / in[i]);
    view.push_back(in[i]);
    istr.push_back(0);
    istr.push_back(inStr[i]);
  }
  return {gatherMove(view, istr)};
}

struct Block {
  int64_t b;
  bool crd;
};

Block blockOf(const LayerDesc& l) {
  Block b{l.attrs->getInt("blocksize", 0), l.attrs->getString("mode", "DCR") == "CRD"};
  if (b.b < 1) opError(l, "blocksize must be positive");
  return b;
}

//! DepthToSpace as a 6-D transpose: depth [N, b, b, C, H, W] (DCR) or [N, C, b, b, H, W] (CRD)
//! to space [N, C, H, b, W, b].
std::vector<Move> planDepthToSpace(const LayerDesc& l) {
  const Block bk = blockOf(l);
  const Dims& o = l.outputs[0].dims;
  const int64_t n = o[0], c = o[1], b = bk.b, h = o[2] / b, w = o[3] / b;
  Dims depth = bk.crd ? Dims{n, c, b, b, h, w} : Dims{n, b, b, c, h, w};
  std::vector<int64_t> ds = contiguousStrides(depth);
  // Input strides of the space axes (n, c, h, by, w, bx).
  std::vector<int64_t> istr = bk.crd ? std::vector<int64_t>{ds[0], ds[1], ds[4], ds[2], ds[5], ds[3]}
                                     : std::vector<int64_t>{ds[0], ds[3], ds[4], ds[1], ds[5], ds[2]};
  return {gatherMove({n, c, h, b, w, b}, istr)};
}

//! SpaceToDepth: the inverse gather, space [N, C, H, b, W, b] read into the depth layout.
std::vector<Move> planSpaceToDepth(const LayerDesc& l) {
  const Block bk = blockOf(l);
  const Dims& i = l.inputs[0].dims;
  const int64_t n = i[0], c = i[1], b = bk.b, h = i[2] / b, w = i[3] / b;
  std::vector<int64_t> ss = contiguousStrides({n, c, h, b, w, b});  // n, c, h, by, w, bx
  if (bk.crd) return {gatherMove({n, c, b, b, h, w}, {ss[0], ss[1], ss[3], ss[5], ss[2], ss[4]})};
  return {gatherMove({n, b, b, c, h, w}, {ss[0], ss[3], ss[5], ss[1], ss[2], ss[4]})};
}

// ---------------------------------------------------------------- ConstantOfShape

class ConstantOfShapeKernel : public Kernel {
 public:
  explicit ConstantOfShapeKernel(const LayerDesc& l) {
    const HostTensor* v = l.attrs->getTensor("value");
    es_ = v ? elementSize(v->type()) : 4;
    if (v) {
      if (v->count() != 1) opError(l, "value must hold exactly one element");
      std::memcpy(&value_, v->data(), es_);
    }
  }
  void execute(const KernelIO& io, KernelState*) const override {
    cuda::launchFill(io.out[0].data, io.out[0].count, es_, value_, cuda::streamOf(io));
  }

 private:
  size_t es_ = 4;
  uint64_t value_ = 0;  // float 0 by default
};

bool supportsConstantOfShape(const LayerDesc& l) {
  const HostTensor* v = l.attrs->getTensor("value");
  if (!v) return true;
  size_t es = elementSize(v->type());
  return v->count() == 1 && (es == 1 || es == 2 || es == 4 || es == 8);
}

std::unique_ptr<Kernel> createConstantOfShape(const LayerDesc& l) { return std::make_unique<ConstantOfShapeKernel>(l); }

}  // namespace

namespace cuda {
KernelFactory copyCuda() { return {anyElementSize, createCopy}; }  // Reshape-like ops (none when aliased)
// Plain layouts: a planned gather. Under the GPU layout pass only the two permutes that are byte
// copies take layouts (ops/layout_transpose.h); the runtime aliases those unless an output or a
// user buffer is involved, and copies otherwise.
bool supportsTranspose(const LayerDesc& l) {
  return anyElementSize(l) && (hasPlainLayouts(l) || isLayoutCopyTranspose(*l.attrs, l.inputs[0].dims.size()));
}
std::unique_ptr<Kernel> createTranspose(const LayerDesc& l) {
  if (!hasPlainLayouts(l)) return createCopy(l);
  return createMove<planTranspose>(l);
}
KernelFactory transposeCuda() { return {supportsTranspose, createTranspose}; }
KernelFactory concatCuda() { return {supportsConcat, createMove<planConcat>}; }
KernelFactory splitCuda() { return {anyElementSize, createMove<planSplit>}; }
KernelFactory concatSegmentsCuda() { return {supportsConcat, createConcatSegments}; }
KernelFactory splitSegmentsCuda() { return {anyElementSize, createSplitSegments}; }
KernelFactory sliceCuda() { return {anyElementSize, createMove<planSlice>}; }
KernelFactory expandCuda() { return {anyElementSize, createMove<planExpand>}; }
KernelFactory tileCuda() { return {anyElementSize, createMove<planTile>}; }
KernelFactory depthToSpaceCuda() { return {anyElementSize, createMove<planDepthToSpace>}; }
KernelFactory spaceToDepthCuda() { return {anyElementSize, createMove<planSpaceToDepth>}; }
KernelFactory constantOfShapeCuda() { return {supportsConstantOfShape, createConstantOfShape}; }
}  // namespace cuda

}  // namespace kiln

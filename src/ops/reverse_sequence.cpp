// Op definition for ReverseSequence: per batch entry b, the first sequence_lens[b] steps along
// time_axis reversed, the rest copied. batch_axis / time_axis are 0 and 1 in either order.
// Data movement on raw elements (any type).
#include <cstring>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerReverseSequenceOps(OpRegistry& r);  // called from shape.cpp

namespace {

void axes(const LayerDesc& l, int64_t& batchAxis, int64_t& timeAxis) {
  batchAxis = l.attrs->getInt("batch_axis", 1);
  timeAxis = l.attrs->getInt("time_axis", 0);
  if (!((batchAxis == 0 && timeAxis == 1) || (batchAxis == 1 && timeAxis == 0)))
    opError(l, "batch_axis and time_axis must be 0 and 1 (in either order)");
}

void inferReverseSequence(LayerDesc& l) {
  requireInputs(l, 2, 2);
  int64_t b, t;
  axes(l, b, t);
  const Dims& x = l.inputs[0].dims;
  if (x.size() < 2) opError(l, "input must have rank >= 2, got " + toString(x));
  const Dims& s = l.inputs[1].dims;
  if (s.size() != 1 || (s[0] >= 0 && x[b] >= 0 && s[0] != x[b]))
    opError(l, "sequence_lens must be 1-D with the batch size " + std::to_string(x[b]) + ", got " + toString(s));
  if (l.inputs[1].type != DataType::kINT64) opError(l, "sequence_lens must be int64");
  setOutput(l, 0, l.inputs[0].type, x);
}

void refReverseSequence(const LayerDesc& l, const KernelIO& io) {
  int64_t batchAxis, timeAxis;
  axes(l, batchAxis, timeAxis);
  const TensorView &x = io.in[0], &y = io.out[0];
  const int64_t* lens = io.in[1].as<const int64_t>();
  const int64_t steps = x.dims[timeAxis], batch = x.dims[batchAxis];
  int64_t inner = static_cast<int64_t>(elementSize(x.type));  // bytes of one (time, batch) cell
  for (size_t k = 2; k < x.dims.size(); ++k) inner *= x.dims[k];
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lens[b];
    if (len < 0 || len > steps)
      throw Error("layer '" + l.name + "' (ReverseSequence): sequence_lens[" + std::to_string(b) + "] = " +
                  std::to_string(len) + " is outside [0, " + std::to_string(steps) + "]");
    for (int64_t t = 0; t < steps; ++t) {
      const int64_t src = t < len ? len - 1 - t : t;
      auto cell = [&](int64_t time) { return (timeAxis == 0 ? time * batch + b : b * steps + time) * inner; };
      std::memcpy(static_cast<char*>(y.data) + cell(t), static_cast<const char*>(x.data) + cell(src), static_cast<size_t>(inner));
    }
  }
}

}  // namespace

void registerReverseSequenceOps(OpRegistry& r) {
  OpDef d;
  d.name = "ReverseSequence";
  d.infer = inferReverseSequence;
  d.ref = refReverseSequence;
  d.anyType = true;
  d.minOpset = 10;
  r.add(d);
}

}  // namespace kiln

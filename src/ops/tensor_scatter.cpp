// Op definition for TensorScatter (opset 24): a KV-cache update. present_cache is past_cache with,
// for every batch b and every prefix before `axis`, the `update`'s sequence_length slices
// written at positions write_indices[b] + i along `axis` (write_indices omitted: 0); in mode
// "circular" the position wraps modulo max_sequence_length, in "linear" it must fit. Moves raw
// elements, so any element type.
#include <cstring>
#include <string>

#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

bool tensorScatterCircular(const LayerDesc& l) {
  const std::string mode = l.attrs->getString("mode", "linear");
  if (mode != "linear" && mode != "circular") opError(l, "mode must be linear or circular, got '" + mode + "'");
  return mode == "circular";
}

int64_t tensorScatterAxis(const LayerDesc& l, int64_t rank) {
  const int64_t axis = normalizeAxis(l, l.attrs->getInt("axis", -2), rank);
  if (axis == 0) opError(l, "axis must not be the batch axis 0");
  return axis;
}

void inferTensorScatter(LayerDesc& l) {
  requireInputs(l, 2, 3);
  tensorScatterCircular(l);
  const Dims &past = l.inputs[0].dims, &update = l.inputs[1].dims;
  if (past.size() < 2) opError(l, "past_cache must have rank 2 or more, got " + toString(past));
  if (update.size() != past.size()) opError(l, "update " + toString(update) + " must have past_cache's rank " + toString(past));
  if (l.inputs[1].type != l.inputs[0].type) opError(l, "update must have past_cache's type");
  const int64_t axis = tensorScatterAxis(l, static_cast<int64_t>(past.size()));
  for (size_t a = 0; a < past.size(); ++a) {
    if (past[a] < 0 || update[a] < 0) continue;
    if (static_cast<int64_t>(a) == axis ? update[a] > past[a] : update[a] != past[a])
      opError(l, "update " + toString(update) + " does not fit past_cache " + toString(past) + " along axis " + std::to_string(axis));
  }
  if (l.present(2)) {
    const Dims& w = l.inputs[2].dims;
    if (l.inputs[2].type != DataType::kINT64) opError(l, "write_indices must be int64");
    if (w.size() != 1 || (w[0] >= 0 && past[0] >= 0 && w[0] != past[0]))
      opError(l, "write_indices must be (batch_size), got " + toString(w));
  }
  setOutput(l, 0, l.inputs[0].type, past);
}

void refTensorScatter(const LayerDesc& l, const KernelIO& io) {
  const bool circular = tensorScatterCircular(l);
  const TensorView &past = io.in[0], &update = io.in[1], &y = io.out[0];
  const int64_t rank = static_cast<int64_t>(past.dims.size()), axis = tensorScatterAxis(l, rank);
  const size_t es = elementSize(past.type);
  if (y.data != past.data && past.count) std::memcpy(y.data, past.data, static_cast<size_t>(past.count) * es);
  const int64_t batch = past.dims[0], maxSeq = past.dims[axis], seq = update.dims[axis];
  const int64_t prefix = volume(Dims(past.dims.begin() + 1, past.dims.begin() + axis));  // per batch
  const int64_t inner = volume(Dims(past.dims.begin() + axis + 1, past.dims.end()));
  const size_t sliceBytes = static_cast<size_t>(inner) * es;
  const int64_t* write = io.in.size() > 2 && io.in[2].data ? io.in[2].as<const int64_t>() : nullptr;
  const uint8_t* src = static_cast<const uint8_t*>(update.data);
  uint8_t* dst = static_cast<uint8_t*>(y.data);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t start = write ? write[b] : 0;
    for (int64_t i = 0; i < seq; ++i) {
      int64_t pos = start + i;
      if (circular && maxSeq > 0) pos = ((pos % maxSeq) + maxSeq) % maxSeq;
      if (pos < 0 || pos >= maxSeq)
        opError(l, "write index " + std::to_string(start) + " + " + std::to_string(i) + " of batch " + std::to_string(b) +
                       " is outside the cache's " + std::to_string(maxSeq) + " positions (mode linear)");
      for (int64_t p = 0; p < prefix; ++p) {
        const int64_t row = b * prefix + p;
        std::memcpy(dst + ((row * maxSeq + pos) * inner) * static_cast<int64_t>(es),
                    src + ((row * seq + i) * inner) * static_cast<int64_t>(es), sliceBytes);
      }
    }
  }
}

}  // namespace

void registerTensorScatterOps(OpRegistry& r) {
  OpDef d;
  d.name = "TensorScatter";
  d.infer = inferTensorScatter;
  d.ref = refTensorScatter;
  d.anyType = true;
  d.minOpset = 24;
  r.add(d);
}

}  // namespace kiln

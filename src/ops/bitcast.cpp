// Op definition for BitCast (opset 26): the input's bits reinterpreted as type `to` of the same
// width, shape unchanged. A byte copy, except for the 4- and 2-bit types, which kiln stores one
// element per byte (int4/int2 sign-extended): their low bits are the bit pattern.
#include <cstring>

#include "core/narrow_types.h"
#include "ops/op_registry.h"
#include "ops/op_util.h"

namespace kiln {

void registerBitCastOps(OpRegistry& r);  // called from elementwise_cast.cpp

namespace {

void bitcastInfer(LayerDesc& l) {
  requireInputs(l, 1, 1);
  if (!l.attrs->has("to")) opError(l, "missing required attribute 'to'");
  const DataType from = l.inputs[0].type, to = fromOnnxType(l, l.attrs->getInt("to", 0));
  if (packedBits(from) != packedBits(to))
    opError(l, std::string("cannot reinterpret ") + toString(from) + " (" + std::to_string(packedBits(from)) + " bits) as " +
                   toString(to) + " (" + std::to_string(packedBits(to)) + " bits)");
  setOutput(l, 0, to, l.inputs[0].dims);
}

void bitcastRef(const LayerDesc&, const KernelIO& io) {
  const TensorView &x = io.in[0], &y = io.out[0];
  const int bits = packedBits(y.type);
  if (bits >= 8) {
    if (x.count) std::memmove(y.data, x.data, static_cast<size_t>(x.count) * elementSize(x.type));
    return;
  }
  const uint32_t mask = (1u << bits) - 1;
  const bool signExtend = isSignedSubByte(y.type);
  for (int64_t i = 0; i < x.count; ++i) {
    uint32_t v = x.as<const uint8_t>()[i] & mask;
    if (signExtend && (v >> (bits - 1))) v |= ~mask;
    y.as<uint8_t>()[i] = static_cast<uint8_t>(v);
  }
}

}  // namespace

void registerBitCastOps(OpRegistry& r) {
  OpDef d;
  d.name = "BitCast";
  d.infer = bitcastInfer;
  d.ref = bitcastRef;
  d.anyType = true;
  d.minOpset = 26;
  r.add(d);
}

}  // namespace kiln

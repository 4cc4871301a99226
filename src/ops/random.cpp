// Random ops: RandomUniform / RandomNormal (shape and dtype from attributes), RandomUniformLike /
// RandomNormalLike (the input's shape, dtype from the attribute or the input), Bernoulli (1 with
// probability p per element, dtype from the attribute or the input). Values come from
// ops/random.h's counter-based generator. With the attribute `seed`, every run draws the same
// values; without, each run draws a fresh seed. Never folded at build time (OpDef::foldable).
#include <atomic>
#include <cstring>
#include <random>

#include "ops/op_registry.h"
#include "ops/op_util.h"
#include "ops/random.h"

namespace kiln {

namespace {

DataType outputType(const LayerDesc& l, DataType dflt) {
  return l.attrs->has("dtype") ? fromOnnxType(l, l.attrs->getInt("dtype", 1)) : dflt;
}

void inferRandomShaped(LayerDesc& l) {
  requireInputs(l, 0, 0);
  if (!l.attrs->has("shape")) opError(l, "needs the attribute 'shape'");
  const Dims dims = l.attrs->getInts("shape");
  for (int64_t d : dims)
    if (d < 0) opError(l, "shape " + toString(dims) + " has a negative dimension");
  const DataType t = outputType(l, DataType::kFLOAT);
  if (!isFloat(t)) opError(l, std::string("dtype must be a float type, got ") + toString(t));
  setOutput(l, 0, t, dims);
}

void inferRandomLike(LayerDesc& l) {
  requireInputs(l, 1, 1);
  const DataType t = outputType(l, l.inputs[0].type);
  if (!isFloat(t)) opError(l, std::string("dtype must be a float type, got ") + toString(t));
  setOutput(l, 0, t, l.inputs[0].dims);
}

void inferBernoulli(LayerDesc& l) {
  requireInputs(l, 1, 1);
  if (!isFloat(l.inputs[0].type)) opError(l, std::string("input must be a float type, got ") + toString(l.inputs[0].type));
  setOutput(l, 0, outputType(l, l.inputs[0].type), l.inputs[0].dims);
}

void storeAs(const TensorView& y, int64_t i, float v) {
  switch (y.type) {
    case DataType::kFLOAT: y.as<float>()[i] = v; return;
    case DataType::kDOUBLE: y.as<double>()[i] = v; return;
    case DataType::kHALF: y.as<uint16_t>()[i] = floatToHalf(v); return;
    case DataType::kBF16: y.as<uint16_t>()[i] = floatToBf16(v); return;
    case DataType::kBOOL: y.as<uint8_t>()[i] = v != 0.f; return;
    default:
      dispatchType<kHostTypes>(y.type, [&](auto tag) { static_cast<decltype(tag)*>(y.data)[i] = static_cast<decltype(tag)>(v); },
                               "random op output");
  }
}

float loadFloat(const TensorView& x, int64_t i) {
  switch (x.type) {
    case DataType::kFLOAT: return x.as<float>()[i];
    case DataType::kDOUBLE: return static_cast<float>(x.as<double>()[i]);
    case DataType::kHALF: return halfToFloat(x.as<uint16_t>()[i]);
    default: return bf16ToFloat(x.as<uint16_t>()[i]);
  }
}

RandomKind kindOf(const std::string& op) {
  if (op == "Bernoulli") return RandomKind::kBernoulli;
  return op.rfind("RandomNormal", 0) == 0 ? RandomKind::kNormal : RandomKind::kUniform;
}

void refRandom(const LayerDesc& l, const KernelIO& io) {
  RandomDraw d = randomDraw(l);
  const TensorView& y = io.out[0];
  for (int64_t i = 0; i < y.count; ++i) {
    const float p = d.kind == RandomKind::kBernoulli ? loadFloat(io.in[0], i) : 0.f;
    storeAs(y, i, randomValue(d.kind, d.seed, static_cast<uint64_t>(i), d.a, d.b, p));
  }
}

}  // namespace

RandomDraw randomDraw(const LayerDesc& l) {
  RandomDraw d;
  d.kind = kindOf(l.op);
  if (d.kind == RandomKind::kUniform) {
    d.a = l.attrs->getFloat("low", 0.f);
    d.b = l.attrs->getFloat("high", 1.f);
  } else if (d.kind == RandomKind::kNormal) {
    d.a = l.attrs->getFloat("mean", 0.f);
    d.b = l.attrs->getFloat("scale", 1.f);
  }
  d.seeded = l.attrs->has("seed");
  if (d.seeded) {
    const float s = l.attrs->getFloat("seed", 0.f);
    uint32_t bits;
    std::memcpy(&bits, &s, 4);
    d.seed = randomMix(bits);
  } else {
    d.seed = freshRandomSeed();
  }
  return d;
}

uint64_t freshRandomSeed() {
  static const uint64_t base = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  return randomMix(base + counter.fetch_add(1));
}

void registerRandomOps(OpRegistry& r) {
  // Never folded (a build-time draw would be one sample for every run); the kernels write every
  // float type themselves (anyType).
  auto add = [&](const char* op, InferFn infer, int minOpset) {
    OpDef d;
    d.name = op;
    d.infer = infer;
    d.ref = refRandom;
    d.foldable = false;
    d.anyType = true;
    d.minOpset = minOpset;
    r.add(d);
  };
  add("RandomUniform", inferRandomShaped, 1);
  add("RandomNormal", inferRandomShaped, 1);
  add("RandomUniformLike", inferRandomLike, 1);
  add("RandomNormalLike", inferRandomLike, 1);
  add("Bernoulli", inferBernoulli, 15);
}

}  // namespace kiln

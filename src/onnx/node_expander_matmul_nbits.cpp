// com.microsoft MatMulNBits (ONNX Runtime's weight-only quantized MatMul: what its MatMul4Bits
// quantizer, and AWQ / GPTQ exports through optimum, write for a decoder's linears), expanded at
// import: Y = A @ W (+ bias), with W [K, N] dequantized here from its blocks,
//   W[k, n] = (q[n, k] - zero[n, g(k)]) * scale[n, g(k)],   g(k) = g_idx[k], or k / block_size
// where B [N, k_blocks, blob] packs q row by row, block by block, `bits` bits per element, lowest
// bits first; zero points are packed the same way per row (uint8), or given in the scales' type,
// or 2^(bits-1) when absent. W is a float32 constant (cast to A's type when A is float16 /
// bfloat16), so the engine runs a dense MatMul: the weights take 32 bits per element in the
// plan, not `bits` (a weight-only GEMM kernel would keep them packed; see README's limits).
#include <cmath>
#include <cstring>

#include "onnx/node_expander.h"
#include "onnx/node_expander_util.h"

namespace kiln {

namespace {

//! Element `i` of a row of `bits`-bit values packed lowest bits first.
uint32_t unpacked(const uint8_t* row, int64_t i, int bits) {
  const int64_t bit = i * bits;
  return (static_cast<uint32_t>(row[bit / 8]) >> (bit % 8)) & ((1u << bits) - 1);
}

}  // namespace

void NodeExpander::expandMatMulNBits(const onnx::NodeProto& node, std::vector<const onnx::NodeProto*>& out) {
  const std::string name = nodeName(node, out.size());
  const std::string what = "MatMulNBits node '" + name + "'";
  auto input = [&](int i) { return i < node.input_size() ? node.input(i) : std::string(); };
  if (input(0).empty() || input(1).empty() || input(2).empty() || node.output_size() != 1 || node.output(0).empty())
    throw Error(what + " needs A, B and scales, and one output");
  const int64_t K = intAttribute(node, "K", -1), N = intAttribute(node, "N", -1), bits = intAttribute(node, "bits", 4),
                block = intAttribute(node, "block_size", -1);
  if (K <= 0 || N <= 0) throw Error(what + ": attributes K and N must be positive");
  if (K * N > (int64_t(1) << 31)) throw UnsupportedError(what + ": " + std::to_string(K) + " x " + std::to_string(N) + " weights are too many");
  if (bits != 2 && bits != 4 && bits != 8) throw UnsupportedError(what + ": bits = " + std::to_string(bits) + " (supported: 2, 4, 8)");
  if (block < 16 || (block & (block - 1)) != 0) throw Error(what + ": block_size must be a power of 2 and at least 16, got " + std::to_string(block));
  const int64_t kBlocks = (K + block - 1) / block, blob = block * bits / 8;
  // The quantized weights and their parameters are initializers in every exporter's output.
  auto constant = [&](int i, const char* role) {
    HostTensor v = importTimeValue(input(i));
    if (!v.valid()) throw UnsupportedError(what + ": " + role + " '" + input(i) + "' must be a constant (an initializer)");
    return v;
  };
  const HostTensor B = constant(1, "B");
  if (B.type() != DataType::kUINT8 || B.count() != N * kBlocks * blob)
    throw Error(what + ": B must be uint8 with N x ceil(K / block_size) x block_size * bits / 8 = " + std::to_string(N * kBlocks * blob) +
                " bytes, got " + toString(B.type()) + " " + toString(B.dims()));
  const HostTensor scales = constant(2, "scales");
  if (scales.count() != N * kBlocks)
    throw Error(what + ": scales must have N x ceil(K / block_size) = " + std::to_string(N * kBlocks) + " values, got " + std::to_string(scales.count()));
  HostTensor zeros, gIdx;
  const int64_t zeroRowBytes = (kBlocks * bits + 7) / 8;
  if (!input(3).empty()) {
    zeros = constant(3, "zero_points");
    const bool packed = zeros.type() == DataType::kUINT8;
    if (packed ? zeros.count() != N * zeroRowBytes : zeros.count() != N * kBlocks)
      throw Error(what + ": zero_points must have " + std::to_string(packed ? N * zeroRowBytes : N * kBlocks) + " values, got " +
                  std::to_string(zeros.count()));
  }
  if (!input(4).empty()) {
    gIdx = constant(4, "g_idx");
    if (gIdx.count() != K) throw Error(what + ": g_idx must have K = " + std::to_string(K) + " values");
    for (int64_t k = 0; k < K; ++k)
      if (gIdx.getInt(k) < 0 || gIdx.getInt(k) >= kBlocks) throw Error(what + ": g_idx[" + std::to_string(k) + "] is out of range");
  }
  DataType type = DataType::kFLOAT;
  if (!inferType || !inferType(input(0), out, type))
    throw UnsupportedError(what + ": the element type of A is not known at import");
  const int typeCode = type == DataType::kDOUBLE ? 0 : onnxFloatCode(type);  // the op's T1: no float64
  if (!typeCode) throw Error(what + ": A must be float, float16 or bfloat16, got " + toString(type));

  // W [K, N], float32.
  onnx::TensorProto w;
  w.set_data_type(onnx::TensorProto::FLOAT);
  w.add_dims(K);
  w.add_dims(N);
  std::string bytes(static_cast<size_t>(K * N) * sizeof(float), '\0');
  auto* W = reinterpret_cast<float*>(bytes.data());
  const auto* q = B.as<uint8_t>();
  const double defaultZero = static_cast<double>(1 << (bits - 1));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const int64_t kb = k / block;
      const int64_t g = gIdx.valid() ? gIdx.getInt(k) : kb;
      const double code = unpacked(q + (n * kBlocks + kb) * blob, k % block, static_cast<int>(bits));
      double zero = defaultZero;
      if (zeros.valid())
        zero = zeros.type() == DataType::kUINT8 ? unpacked(zeros.as<uint8_t>() + n * zeroRowBytes, g, static_cast<int>(bits))
                                                : zeros.getDouble(n * kBlocks + g);
      W[k * N + n] = static_cast<float>((code - zero) * scales.getDouble(n * kBlocks + g));
    }
  }
  w.set_raw_data(std::move(bytes));
  const std::string p = name + "/";
  emitConstant(p + "weight", w, out);
  std::string weight = p + "weight";
  if (typeCode != onnx::TensorProto::FLOAT) {
    setAttribute(emit("Cast", {weight}, p + "weight_cast", p + "cast", out), "to", int64_t(typeCode));
    weight = p + "weight_cast";
  }
  const bool bias = !input(5).empty();
  emit("MatMul", {input(0), weight}, bias ? p + "matmul" : node.output(0), p + "matmul", out);
  if (bias) emit("Add", {p + "matmul", input(5)}, node.output(0), p + "bias", out);
}

}  // namespace kiln

// Helpers shared by op definitions: input checks, axes, broadcasting, type dispatch.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "core/type_dispatch.h"
#include "ir/layer_desc.h"

namespace kiln {

[[noreturn]] void opError(const LayerDesc& l, const std::string& msg);
//! Checks the count of inputs (present or not) is within [minIn, maxIn].
void requireInputs(const LayerDesc& l, size_t minIn, size_t maxIn);
//! Normalizes a possibly negative axis for `rank`; throws if out of range.
int64_t normalizeAxis(const LayerDesc& l, int64_t axis, int64_t rank);
//! Numpy-style broadcast of shapes (-1 dims allowed: the result is -1 where unknown).
Dims broadcastDims(const LayerDesc& l, const Dims& a, const Dims& b);
//! Strides (in elements) of a row-major tensor.
std::vector<int64_t> rowMajorStrides(const Dims& d);
//! Strides to read `from` broadcast to `to` (0 on broadcast dims); `from` right-aligned.
std::vector<int64_t> broadcastStrides(const Dims& from, const Dims& to);
//! Returns the values of input i, which must be known (a value input); throws otherwise.
const HostTensor& knownValue(const LayerDesc& l, size_t i);
//! ONNX TensorProto.DataType code -> kiln type (an attribute such as Cast's `to`); throws
//! UnsupportedError for string/complex/float8/4-bit codes, kiln::Error for unknown ones.
DataType fromOnnxType(const LayerDesc& l, int64_t code);
//! Sets output i's type and dims.
void setOutput(LayerDesc& l, size_t i, DataType t, const Dims& d);

//! v's float16/bfloat16 elements as float32 into dst (v.count floats; exact).
void widenToFloat(const TensorView& v, float* dst);
//! src (v.count floats) rounded into v's float16/bfloat16 elements.
void narrowFromFloat(const float* src, const TensorView& v);

//! Calls f(T{}) with T the C++ type for `t`. Half and bf16 are not dispatched (the builder
//! converts them to float for CPU compute); byte-moving ops should use elementSize instead.
template <typename F>
void dispatchNumeric(DataType t, F&& f) {
  dispatchType<kHostTypes>(t, f);
}

//! Two dims agree when equal or when either is unknown (-1): shape inference's check, exact again
//! at run time when every dim is concrete.
inline bool dimsAgree(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

//! Softmax / LogSoftmax / Hardmax lines: element k of line (o, i) is at (o * length + k) * inner
//! + i. Opset < 13 forms (kiln_coerce_2d) normalize the flattened block [axis, rank) instead.
struct AxisSplit {
  int64_t outer = 1, length = 1, inner = 1;
};
AxisSplit softmaxSplit(const LayerDesc& l, const Dims& x);

//! Einsum as nested loops (ops/matmul.cpp): the output's labels first (`outputLoops` of them),
//! then the summed labels; strides[i][d] is input i's element stride for loop d (0 where the
//! input lacks the label or broadcasts it; repeated labels add up, giving diagonals).
struct EinsumLoops {
  Dims loopDims;
  size_t outputLoops = 0;
  std::vector<std::vector<int64_t>> strides;
};
EinsumLoops planEinsumLoops(const LayerDesc& l, const std::vector<Dims>& inputDims);

}  // namespace kiln

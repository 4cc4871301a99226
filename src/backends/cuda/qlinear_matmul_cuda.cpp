// CUDA tactics for QLinearMatMul with constant 2-D int8/uint8 weights and constant scalars (what
// builder/passes/lower_qdq.cpp makes of quantize_static's MatMul and Gemm; A's batch dims fold
// into the rows):
//   q_linear_matmul_int_cublaslt: the int32 product through cuBLASLt's int8 tensor-core (IMMA)
//                                kernels, which read signed int8 only, in the "TN" layout (both
//                                operands K-contiguous), with K, N and leading dims multiples of 4
//                                (16 here, which the fast kernels want);
//   q_linear_matmul_int_dp4a:     the same product by a small dp4a kernel, for whatever cuBLASLt
//                                refuses, so that a lowered layer always has a GPU kernel.
// Both share the rest (qlinear_matmul_kernels.h): uint8 operands become int8 by subtracting 128
// (the zero points move with them), K and N are padded with zeros to multiples of 16, and one
// epilogue applies the zero-point corrections and QLinearParams::output's rounding exactly.
// Exact while |dot| < 2^31: K <= 131072 (|a_s w_s| <= 2^14). Activations: none, Relu and Clip
// (those round the same on host and device; lower_qdq fuses no other).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/device_copy.h"
#include "backends/cuda/matmul_cublaslt.h"
#include "backends/cuda/matmul_lt_run.h"
#include "backends/cuda/qlinear_matmul_kernels.h"
#include "ops/op_util.h"
#include "ops/qlinear.h"

namespace kiln {

namespace {

using cuda::QMatMulEpilogue;

constexpr int64_t kPad = 16;
constexpr int64_t kMaxK = 131072;

int64_t padded(int64_t n) { return (n + kPad - 1) / kPad * kPad; }
size_t align256(size_t n) { return (n + 255) / 256 * 256; }
bool isByte(DataType t) { return t == DataType::kINT8 || t == DataType::kUINT8; }
int32_t shiftOf(DataType t) { return t == DataType::kUINT8 ? 128 : 0; }

bool supportsQLinearMatMul(const LayerDesc& l) {
  if (l.inputs.size() <= kQWScale || !l.present(kQX) || !l.present(kQW)) return false;
  const TensorDesc &a = l.inputs[kQX], &w = l.inputs[kQW];
  if (!isByte(a.type) || !isByte(w.type) || a.dims.size() < 2 || w.dims.size() != 2 || !w.value.valid() || !isStatic(w.dims))
    return false;
  const int64_t K = w.dims[0], N = w.dims[1];
  if (K < 1 || K > kMaxK || N < 1 || N > int64_t(65535) * 16 || (a.dims.back() >= 0 && a.dims.back() != K)) return false;
  if (!qlinearScalarsConstant(l)) return false;
  try {
    const QLinearParams q = readQLinearParams(l, constantInputViews(l), N, a.dims[a.dims.size() - 2]);
    return q.act.kind == ActKind::kNone || q.act.kind == ActKind::kRelu || q.act.kind == ActKind::kClip;
  } catch (const Error&) {
    return false;
  }
}

struct QLinearMatMulState : KernelState {
  int64_t rows = 0;
  std::unique_ptr<cuda::LtPlan> plan;  // null: the dp4a kernel
  size_t prepBytes = 0, sumBytes = 0, dotBytes = 0;
};

class QLinearMatMulCuda : public Kernel {
 public:
  QLinearMatMulCuda(const LayerDesc& l, bool cublasLt) : lt_(cublasLt) {
    const TensorDesc& w = l.inputs[kQW];
    K_ = w.dims[0];
    N_ = w.dims[1];
    Kp_ = padded(K_);
    Np_ = padded(N_);
    M_ = l.inputs[kQX].dims[l.inputs[kQX].dims.size() - 2];
    aUnsigned_ = l.inputs[kQX].type == DataType::kUINT8;
    const QLinearParams q = readQLinearParams(l, constantInputViews(l), N_, M_);
    const int32_t wShift = shiftOf(w.type), aZero = q.xZero - shiftOf(l.inputs[kQX].type);
    // W_s [Np, Kp]: transposed, shifted to int8, zero padded; and its column sums.
    auto shiftPadTranspose = [K = K_, N = N_, Kp = Kp_, Np = Np_, wShift](const HostTensor& src) {
      HostTensor out(DataType::kINT8, {Np, Kp});
      const uint8_t* s = src.as<uint8_t>();
      int8_t* d = out.as<int8_t>();
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n)
          d[n * Kp + k] = static_cast<int8_t>(wShift ? int32_t(s[k * N + n]) - wShift : int32_t(static_cast<int8_t>(s[k * N + n])));
      return out;
    };
    const HostTensor packed = shiftPadTranspose(w.value);
    weights_ = cuda::sharedDeviceCopy(w.value, "qlinear_matmul:" + std::to_string(K_) + "x" + std::to_string(N_) + ":nk_pad16_shift" + std::to_string(wShift),
                                      [&packed](const HostTensor&) { return packed; });
    // The constant block: channelTerm int64[N] | wZero int32[N] | wScale float[N] | xScale float[xCount].
    const int64_t xCount = static_cast<int64_t>(q.xScale.size());
    HostTensor block(DataType::kUINT8, {16 * N_ + 4 * xCount});
    auto* term = reinterpret_cast<int64_t*>(block.as<uint8_t>());
    auto* wz = reinterpret_cast<int32_t*>(term + N_);
    auto* ws = reinterpret_cast<float*>(wz + N_);
    auto* xs = ws + N_;
    const int8_t* pw = packed.as<int8_t>();
    for (int64_t n = 0; n < N_; ++n) {
      int64_t colSum = 0;
      for (int64_t k = 0; k < K_; ++k) colSum += pw[n * Kp_ + k];
      wz[n] = q.wz(n) - wShift;
      term[n] = int64_t(q.biasAt(n)) - int64_t(aZero) * colSum + K_ * int64_t(aZero) * wz[n];
      ws[n] = q.ws(n);
      needRowSums_ = needRowSums_ || wz[n] != 0;
    }
    std::copy(q.xScale.begin(), q.xScale.end(), xs);
    block_ = cuda::sharedDeviceCopy(block, "", {});
    const char* base = static_cast<const char*>(block_->ptr);
    epi_.channelTerm = reinterpret_cast<const int64_t*>(base);
    epi_.wZero = reinterpret_cast<const int32_t*>(base + 8 * N_);
    epi_.wScale = reinterpret_cast<const float*>(base + 12 * N_);
    epi_.xScale = reinterpret_cast<const float*>(base + 16 * N_);
    epi_.xCount = xCount;
    epi_.floatOut = q.floatOut;
    epi_.yScale = q.yScale;
    epi_.yZero = q.yZero;
    epi_.lo = static_cast<int32_t>(q.lo);
    epi_.hi = static_cast<int32_t>(q.hi);
    epi_.act = q.act.kind;
    epi_.alpha = q.act.alpha;
    epi_.beta = q.act.beta;
  }

  size_t reshape(const LayerDesc& concrete, std::unique_ptr<KernelState>& state) const override {
    const Dims& a = concrete.inputs[kQX].dims;
    if (a.back() != K_ || (epi_.xCount > 1 && a[a.size() - 2] != M_))
      opError(concrete, "x " + toString(a) + " does not fit the constant weights and scales this kernel was built for");
    auto st = std::make_unique<QLinearMatMulState>();
    st->rows = volume(a) / K_;
    st->prepBytes = align256(static_cast<size_t>(st->rows * Kp_));
    st->sumBytes = align256(static_cast<size_t>(st->rows) * 4);
    st->dotBytes = align256(static_cast<size_t>(st->rows * Np_) * 4);
    size_t ws = st->prepBytes + st->sumBytes + st->dotBytes;
    if (lt_ && st->rows > 0) {
      cuda::GemmProblem p;
      p.type = DataType::kINT8;
      p.M = st->rows;
      p.N = Np_;
      p.K = Kp_;
      p.transB = true;
      st->plan = std::make_unique<cuda::LtPlan>(p, 0, 16u, cuda::kLtMaxWorkspace);  // UnsupportedError: no IMMA algorithm
      ws += st->plan->workspace();
    }
    state = std::move(st);
    return ws;
  }

  void execute(const KernelIO& io, KernelState* state) const override {
    const auto& st = *static_cast<const QLinearMatMulState*>(state);
    if (st.rows == 0) return;
    const cudaStream_t s = cuda::streamOf(io);
    char* ws = static_cast<char*>(io.workspace);
    auto* prep = reinterpret_cast<int8_t*>(ws);
    auto* sums = reinterpret_cast<int32_t*>(ws + st.prepBytes);
    auto* dot = reinterpret_cast<int32_t*>(ws + st.prepBytes + st.sumBytes);
    const void* x = io.in[kQX].data;
    // cuBLASLt reads a signed, 16-aligned A with K = Kp in place; everything else is prepared.
    const bool direct = st.plan && !aUnsigned_ && K_ == Kp_ && !needRowSums_ && reinterpret_cast<uintptr_t>(x) % 16 == 0;
    const int8_t* a = direct ? static_cast<const int8_t*>(x) : prep;
    if (!direct) cuda::launchQPrepareA(x, aUnsigned_, st.rows, K_, Kp_, prep, needRowSums_ ? sums : nullptr, s);
    const auto* w = static_cast<const int8_t*>(weights_->ptr);
    if (st.plan) st.plan->run(a, w, nullptr, dot, nullptr, ws + st.prepBytes + st.sumBytes + st.dotBytes, s);
    else cuda::launchQDotDp4a(a, w, st.rows, Np_, Kp_, dot, s);
    cuda::launchQEpilogue(dot, Np_, needRowSums_ ? sums : nullptr, st.rows, N_, epi_, io.out[0].data, s);
  }

  bool holdsInput(size_t i) const override { return i != kQX; }  // weights on the device, scalars in epi_

 private:
  bool lt_;
  int64_t K_ = 0, N_ = 0, Kp_ = 0, Np_ = 0, M_ = -1;
  bool aUnsigned_ = false, needRowSums_ = false;
  std::shared_ptr<const cuda::DeviceCopy> weights_, block_;
  QMatMulEpilogue epi_;
};

std::unique_ptr<Kernel> createCublasLt(const LayerDesc& l) { return std::make_unique<QLinearMatMulCuda>(l, true); }
std::unique_ptr<Kernel> createDp4a(const LayerDesc& l) { return std::make_unique<QLinearMatMulCuda>(l, false); }

}  // namespace

namespace cuda {
KernelFactory qlinearMatMulCublasLt() { return {supportsQLinearMatMul, createCublasLt}; }
KernelFactory qlinearMatMulDp4a() { return {supportsQLinearMatMul, createDp4a}; }
}  // namespace cuda

}  // namespace kiln

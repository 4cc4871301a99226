// cuBLASLt wrapper for the matmul family (see matmul_cublaslt.h).
// Row-major trick: cuBLASLt is column-major, and a row-major [R,C] matrix is the column-major
// [C,R] matrix with the same memory. So row-major D = op(A) op(B) is computed as the column-major
// D^T = op(B)^T op(A)^T: cuBLASLt's "A" operand is our B, its "B" operand is our A, m = N, n = M.
#include "backends/cuda/matmul_cublaslt.h"

#include <algorithm>
#include <climits>
#include <string>

namespace kiln::cuda {

namespace {

void checkLt(cublasStatus_t st, const char* what) {
  if (st != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLASLt error ") + cublasLtGetStatusName(st) + " (" + cublasLtGetStatusString(st) + ") in " + what);
}

cudaDataType_t cudaTypeOf(DataType t) {
  switch (t) {
    case DataType::kFLOAT: return CUDA_R_32F;
    case DataType::kHALF: return CUDA_R_16F;
    case DataType::kBF16: return CUDA_R_16BF;
    case DataType::kINT8: return CUDA_R_8I;
    default: throw UnsupportedError(std::string("cuBLASLt matmul: unsupported data type ") + toString(t));
  }
}

//! Largest power of two <= cap that divides `bytes` (cap when bytes == 0).
unsigned alignOf(int64_t bytes, unsigned cap) {
  unsigned a = cap;
  while (a > 1 && bytes % a != 0) a /= 2;
  return a;
}

void checkInt32(int64_t v, const char* what) {
  if (v > INT_MAX) throw UnsupportedError(std::string("cuBLASLt matmul: ") + what + " = " + std::to_string(v) + " exceeds int32");
}

cublasLtMatrixLayout_t makeLayout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  checkLt(cublasLtMatrixLayoutCreate(&l, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld), "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    cublasStatus_t s1 = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
    cublasStatus_t s2 = cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride));
    if (s1 != CUBLAS_STATUS_SUCCESS || s2 != CUBLAS_STATUS_SUCCESS) {
      cublasLtMatrixLayoutDestroy(l);
      checkLt(s1 != CUBLAS_STATUS_SUCCESS ? s1 : s2, "cublasLtMatrixLayoutSetAttribute");
    }
  }
  return l;
}

}  // namespace

cublasLtHandle_t ltHandle() {
  // Created once per process (thread-safe static initialization) and never destroyed: destroying
  // it during static destruction could run after the CUDA runtime has shut down.
  static cublasLtHandle_t h = [] {
    cublasLtHandle_t handle = nullptr;
    checkLt(cublasLtCreate(&handle), "cublasLtCreate");
    return handle;
  }();
  return h;
}

LtPlan::LtPlan(const GemmProblem& p, int algoIndex, unsigned alignBytes, size_t maxWorkspace) : p_(p), align_(alignBytes) {
  checkInt32(p.M, "M");
  checkInt32(p.N, "N");
  checkInt32(p.K, "K");
  checkInt32(p.batch, "batch count");
  const cudaDataType_t dt = cudaTypeOf(p.type);
  const bool int8 = p.type == DataType::kINT8;
  if (int8 && (!p.transB || p.transA || p.batch > 1 || p.useC || p.bias || p.act != LtAct::kNone))
    throw UnsupportedError("cuBLASLt int8 matmul: only a single [M,K] x [N,K]^T product without epilogue");
  if (p.fp8 && (int8 || !p.transB || p.transA || p.K % 16 != 0 || (p.bias && p.type == DataType::kFLOAT)))
    throw UnsupportedError("cuBLASLt fp8 matmul: only [M,K] x [N,K]^T with K % 16 == 0 (and a bias only with a 16-bit D)");
  if (p.fp8Out && (!p.fp8 || p.type == DataType::kFLOAT || p.useC || !p.dScale))
    throw UnsupportedError("cuBLASLt fp8 matmul: float8 D only with float16 / bfloat16 C, no C read, and a D scale");
  // Operand (A, B) type and bytes; C and D are `type` (D: float8 codes with fp8Out).
  const cudaDataType_t abType = p.fp8 ? CUDA_R_8F_E4M3 : dt;
  const int64_t es = p.fp8 ? 1 : static_cast<int64_t>(elementSize(p.type));
  const int64_t esD = p.fp8Out ? 1 : static_cast<int64_t>(elementSize(p.type)) * (int8 ? 4 : 1);
  const cudaDataType_t outType = int8 ? CUDA_R_32I : dt;
  const cudaDataType_t dType = p.fp8Out ? CUDA_R_8F_E4M3 : outType;
  const cublasComputeType_t compute = int8                                 ? CUBLAS_COMPUTE_32I
                                      : p.type == DataType::kFLOAT && p.tf32 && !p.fp8 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                             : CUBLAS_COMPUTE_32F;
  try {
    checkLt(cublasLtMatmulDescCreate(&op_, compute, int8 ? CUDA_R_32I : CUDA_R_32F), "cublasLtMatmulDescCreate");
    // cuBLASLt's A = our B: stored [K,N] row-major = col-major N x K (op N), or [N,K] = K x N (op T).
    int32_t opA = p.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    // cuBLASLt's B = our A: stored [M,K] row-major = col-major K x M (op N), or [K,M] = M x K (op T).
    int32_t opB = p.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    checkLt(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA)), "set TRANSA");
    checkLt(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB)), "set TRANSB");
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    if (p.act == LtAct::kRelu) epi = p.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    else if (p.act == LtAct::kGeluTanh) epi = p.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
    else if (p.bias) epi = CUBLASLT_EPILOGUE_BIAS;
    checkLt(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "set EPILOGUE");
    if (p.fp8) {
      // Fast accumulation, as Transformer Engine runs its forward (inference) FP8 GEMMs: the tensor
      // cores' partial sums are not promoted to FP32 every few k-steps (faster; ~2^-8 relative).
      const int8_t fast = 1;
      checkLt(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof(fast)), "set FAST_ACCUM");
    }
    if (p.fp8Out) {
      checkLt(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &p.dScale, sizeof(p.dScale)), "set D_SCALE_POINTER");
      if (p.bias) {  // the bias is C's type (the float8 D's default would be another)
        const int32_t biasType = dt;
        checkLt(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &biasType, sizeof(biasType)), "set BIAS_DATA_TYPE");
      }
    }

    la_ = p.transB ? makeLayout(abType, p.K, p.N, p.K, p.batch, p.strideB) : makeLayout(abType, p.N, p.K, p.N, p.batch, p.strideB);
    lb_ = p.transA ? makeLayout(abType, p.M, p.K, p.M, p.batch, p.strideA) : makeLayout(abType, p.K, p.M, p.K, p.batch, p.strideA);
    lc_ = makeLayout(outType, p.N, p.M, p.N, p.batch, p.strideD);
    ld_ = makeLayout(dType, p.N, p.M, p.N, p.batch, p.strideD);

    // Later matrices of a strided batch are only as aligned as the stride.
    auto operandAlign = [&](int64_t stride, int64_t bytes) {
      return p.batch > 1 && stride != 0 ? alignOf(stride * bytes, alignBytes) : alignBytes;
    };
    uint32_t alA = operandAlign(p.strideB, es), alB = operandAlign(p.strideA, es), alD = operandAlign(p.strideD, esD);
    uint64_t wsMax = maxWorkspace;
    cublasLtMatmulPreference_t pref = nullptr;
    checkLt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    constexpr int kRequested = 8;
    cublasLtMatmulHeuristicResult_t res[kRequested] = {};
    int found = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsMax, sizeof(wsMax));
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alA, sizeof(alA));
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alB, sizeof(alB));
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alD, sizeof(alD));
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alD, sizeof(alD));
    if (st == CUBLAS_STATUS_SUCCESS)
      st = cublasLtMatmulAlgoGetHeuristic(ltHandle(), op_, la_, lb_, lc_, ld_, pref, kRequested, res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && found == 0))
      throw UnsupportedError("cuBLASLt has no algorithm for this matmul (" + std::to_string(p.M) + "x" + std::to_string(p.N) + "x" +
                             std::to_string(p.K) + ", " + toString(p.type) + ")");
    checkLt(st, "cublasLtMatmulAlgoGetHeuristic");
    int pick = algoIndex >= 0 && algoIndex < found && res[algoIndex].state == CUBLAS_STATUS_SUCCESS ? algoIndex : 0;
    algo_ = res[pick].algo;
    workspace_ = res[pick].workspaceSize;
  } catch (...) {
    destroy();
    throw;
  }
}

LtPlan::~LtPlan() { destroy(); }

void LtPlan::destroy() {
  if (ld_) cublasLtMatrixLayoutDestroy(ld_);
  if (lc_) cublasLtMatrixLayoutDestroy(lc_);
  if (lb_) cublasLtMatrixLayoutDestroy(lb_);
  if (la_) cublasLtMatrixLayoutDestroy(la_);
  if (op_) cublasLtMatmulDescDestroy(op_);
  ld_ = lc_ = lb_ = la_ = nullptr;
  op_ = nullptr;
}

void LtPlan::run(const void* a, const void* b, const void* c, void* d, const void* bias, void* ws, cudaStream_t s) {
  if (p_.bias) checkLt(cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)), "set BIAS_POINTER");
  const float beta = p_.useC ? p_.beta : 0.f;
  static const int32_t kOne = 1, kZero = 0;  // the int8 path's int32 scale type
  const bool int8 = p_.type == DataType::kINT8;
  const void* alpha = int8 ? static_cast<const void*>(&kOne) : &p_.alpha;
  const void* betaPtr = int8 ? static_cast<const void*>(&kZero) : &beta;
  // No C is read (beta 0): D itself, or nothing when D holds float8 codes (another type than C's).
  const void* cArg = p_.useC ? c : p_.fp8Out ? nullptr : d;
  checkLt(cublasLtMatmul(ltHandle(), op_, alpha, b, la_, a, lb_, betaPtr, cArg, lc_, d, ld_, &algo_,
                         workspace_ ? ws : nullptr, workspace_, s),
          "cublasLtMatmul");
}

AlignedLtPlans::AlignedLtPlans(const GemmProblem& p, int algoIndex, size_t maxWorkspace)
    : fast_(std::make_unique<LtPlan>(p, algoIndex, 16u, maxWorkspace)) {
  try {
    safe_ = std::make_unique<LtPlan>(p, algoIndex, static_cast<unsigned>(elementSize(p.type)), maxWorkspace);
  } catch (const UnsupportedError&) {
    safe_.reset();  // then only aligned buffers run
  }
}

size_t AlignedLtPlans::workspace() const { return std::max(fast_->workspace(), safe_ ? safe_->workspace() : size_t(0)); }

void AlignedLtPlans::run(const void* a, const void* b, void* d, void* ws, cudaStream_t s, const char* who) const {
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  const bool fast = aligned(a) && aligned(b) && aligned(d);
  if (!fast && !safe_) throw Error(std::string(who) + ": buffers are not 16-byte aligned and no element-aligned algorithm exists");
  (fast ? *fast_ : *safe_).run(a, b, nullptr, d, nullptr, ws, s);
}

}  // namespace kiln::cuda

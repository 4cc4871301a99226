// kiln's own SGEMM: Goto/BLIS-style blocking. B is packed into KC x 16 column panels, A into
// KC x 6 row panels, and a 6x16 AVX2/FMA micro-kernel (12 accumulator registers) computes each
// tile. Work is split into independent (row block, column block) tasks over the thread pool, each
// running through all of K, so no task ever waits for another.
#include "backends/cpu/gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/thread_pool.h"
#include "kiln/types.h"

namespace kiln {
namespace cpu {

namespace {

constexpr int64_t kMR = 6;     // micro-tile rows
constexpr int64_t kNR = 16;    // micro-tile columns (two ymm registers)
constexpr int64_t kKC = 256;   // K block: a B panel (16 KB) stays in L1
constexpr int64_t kMC = 192;   // max rows per task: the packed A block (192 KB) stays in L2
constexpr int64_t kNCMax = 1024;  // max columns per task

int64_t roundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

//! A growable 64-byte-aligned scratch buffer, kept per thread so that repeated calls do not allocate.
class Scratch {
 public:
  ~Scratch() { std::free(p_); }
  float* get(int64_t floats) {
    if (floats > cap_) {
      std::free(p_);
      size_t bytes = roundUp(floats * static_cast<int64_t>(sizeof(float)), 64);
      p_ = static_cast<float*>(std::aligned_alloc(64, bytes));
      if (!p_) throw Error("sgemm: out of memory for a " + std::to_string(bytes) + "-byte packing buffer");
      cap_ = floats;
    }
    return p_;
  }

 private:
  float* p_ = nullptr;
  int64_t cap_ = 0;
};

float* threadScratchA(int64_t floats) {
  thread_local Scratch s;
  return s.get(floats);
}
float* threadScratchB(int64_t floats) {
  thread_local Scratch s;
  return s.get(floats);
}

// ---- packing ----

//! Packs rows [0,mc) x k [0,kc) of op(A) (starting at A's element (m0,k0)) into 6-row panels:
//! panel p holds kc steps of 6 values (rows beyond mc are zero).
void packA(bool transA, const float* A, int64_t lda, int64_t m0, int64_t mc, int64_t k0, int64_t kc, float* dst) {
  for (int64_t p = 0; p < mc; p += kMR) {
    int64_t rows = std::min(kMR, mc - p);
    float* out = dst + p * kc;
    if (!transA) {
      const float* src[kMR];
      for (int64_t r = 0; r < kMR; ++r) src[r] = A + (m0 + p + std::min(r, rows - 1)) * lda + k0;
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t r = 0; r < kMR; ++r) out[k * kMR + r] = r < rows ? src[r][k] : 0.f;
    } else {  // op(A)[m][k] = A[k][m]: each k step reads contiguous rows
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = A + (k0 + k) * lda + m0 + p;
        for (int64_t r = 0; r < kMR; ++r) out[k * kMR + r] = r < rows ? src[r] : 0.f;
      }
    }
  }
}

//! Packs the 16-column panel starting at column n0 of op(B), k range [k0,k0+kc), into dst (kc x 16).
void packBPanel(bool transB, const float* B, int64_t ldb, int64_t N, int64_t n0, int64_t k0, int64_t kc, float* dst) {
  int64_t cols = std::min(kNR, N - n0);
  if (!transB) {
    for (int64_t k = 0; k < kc; ++k) {
      const float* src = B + (k0 + k) * ldb + n0;
      float* out = dst + k * kNR;
      if (cols == kNR) {
        _mm256_storeu_ps(out, _mm256_loadu_ps(src));
        _mm256_storeu_ps(out + 8, _mm256_loadu_ps(src + 8));
      } else {
        for (int64_t c = 0; c < kNR; ++c) out[c] = c < cols ? src[c] : 0.f;
      }
    }
  } else {  // op(B)[k][n] = B[n][k]
    for (int64_t c = 0; c < kNR; ++c) {
      if (c >= cols) {
        for (int64_t k = 0; k < kc; ++k) dst[k * kNR + c] = 0.f;
        continue;
      }
      const float* src = B + (n0 + c) * ldb + k0;
      for (int64_t k = 0; k < kc; ++k) dst[k * kNR + c] = src[k];
    }
  }
}

//! Packed-B layout: K block starting at k0 lives at k0 * Npad; its panel j at j * kc * 16.
int64_t packedBFloats(int64_t K, int64_t N) { return K * roundUp(N, kNR); }

void packBAll(bool transB, const float* B, int64_t ldb, int64_t K, int64_t N, float* dst, ThreadPool* pool) {
  int64_t npad = roundUp(N, kNR), panels = npad / kNR, kblocks = (K + kKC - 1) / kKC;
  auto work = [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t kb = t / panels, j = t % panels;
      int64_t k0 = kb * kKC, kc = std::min(kKC, K - k0);
      packBPanel(transB, B, ldb, N, j * kNR, k0, kc, dst + k0 * npad + j * kc * kNR);
    }
  };
  if (pool) pool->parallelFor(kblocks * panels, 16, work);
  else work(0, kblocks * panels);
}

// ---- micro-kernel ----

//! c[6x16] = alpha * (a-panel . b-panel) + beta * c, for kc steps. beta == 0 never reads c.
inline void microKernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, float alpha, float beta) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(), c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
#pragma GCC unroll 4
  for (int64_t k = 0; k < kc; ++k) {
    __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
    __m256 a0 = _mm256_broadcast_ss(a), a1 = _mm256_broadcast_ss(a + 1);
    c00 = _mm256_fmadd_ps(a0, b0, c00); c01 = _mm256_fmadd_ps(a0, b1, c01);
    c10 = _mm256_fmadd_ps(a1, b0, c10); c11 = _mm256_fmadd_ps(a1, b1, c11);
    a0 = _mm256_broadcast_ss(a + 2); a1 = _mm256_broadcast_ss(a + 3);
    c20 = _mm256_fmadd_ps(a0, b0, c20); c21 = _mm256_fmadd_ps(a0, b1, c21);
    c30 = _mm256_fmadd_ps(a1, b0, c30); c31 = _mm256_fmadd_ps(a1, b1, c31);
    a0 = _mm256_broadcast_ss(a + 4); a1 = _mm256_broadcast_ss(a + 5);
    c40 = _mm256_fmadd_ps(a0, b0, c40); c41 = _mm256_fmadd_ps(a0, b1, c41);
    c50 = _mm256_fmadd_ps(a1, b0, c50); c51 = _mm256_fmadd_ps(a1, b1, c51);
    a += kMR;
    b += kNR;
  }
  const __m256 va = _mm256_set1_ps(alpha);
  auto store = [&](float* row, __m256 x0, __m256 x1) {
    x0 = _mm256_mul_ps(x0, va);
    x1 = _mm256_mul_ps(x1, va);
    if (beta == 1.f) {
      x0 = _mm256_add_ps(x0, _mm256_loadu_ps(row));
      x1 = _mm256_add_ps(x1, _mm256_loadu_ps(row + 8));
    } else if (beta != 0.f) {
      const __m256 vb = _mm256_set1_ps(beta);
      x0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(row), x0);
      x1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(row + 8), x1);
    }
    _mm256_storeu_ps(row, x0);
    _mm256_storeu_ps(row + 8, x1);
  };
  store(c, c00, c01);
  store(c + ldc, c10, c11);
  store(c + 2 * ldc, c20, c21);
  store(c + 3 * ldc, c30, c31);
  store(c + 4 * ldc, c40, c41);
  store(c + 5 * ldc, c50, c51);
}

//! A partial tile (rows < 6 or cols < 16): computes into a local tile, then merges.
void edgeKernel(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int64_t rows, int64_t cols,
                float alpha, float beta) {
  alignas(32) float tile[kMR * kNR];
  microKernel(kc, a, b, tile, kNR, alpha, 0.f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j) {
      float v = tile[r * kNR + j];
      c[r * ldc + j] = beta == 0.f ? v : v + beta * c[r * ldc + j];
    }
}

//! What one call computes: C = alpha * op(A) * packedB + beta * C, then the epilogue.
struct GemmProblem {
  bool transA;
  int64_t M, N, K;
  float alpha;
  const float* A;
  int64_t lda;
  const float* packedB;  // packBAll layout
  float beta;
  float* C;
  int64_t ldc;
  const GemmEpilogue* ep;
};

//! Computes C rows [m0,m0+mc) x columns [n0,n0+nc) through all of K (n0 is a multiple of 16).
void computeBlock(const GemmProblem& g, int64_t m0, int64_t mc, int64_t n0, int64_t nc, float* packedA) {
  int64_t npad = roundUp(g.N, kNR);
  for (int64_t k0 = 0; k0 < g.K; k0 += kKC) {
    int64_t kc = std::min(kKC, g.K - k0);
    float beta = k0 == 0 ? g.beta : 1.f;
    packA(g.transA, g.A, g.lda, m0, mc, k0, kc, packedA);
    const float* bBlock = g.packedB + k0 * npad;
    for (int64_t j = n0; j < n0 + nc; j += kNR) {
      const float* bPanel = bBlock + (j / kNR) * kc * kNR;
      int64_t cols = std::min(kNR, n0 + nc - j);
      for (int64_t i = 0; i < mc; i += kMR) {
        int64_t rows = std::min(kMR, mc - i);
        float* c = g.C + (m0 + i) * g.ldc + j;
        if (rows == kMR && cols == kNR) microKernel(kc, packedA + i * kc, bPanel, c, g.ldc, g.alpha, beta);
        else edgeKernel(kc, packedA + i * kc, bPanel, c, g.ldc, rows, cols, g.alpha, beta);
      }
    }
  }
  if (g.K == 0) {  // no K steps: C = beta * C
    for (int64_t i = m0; i < m0 + mc; ++i)
      for (int64_t j = n0; j < n0 + nc; ++j) g.C[i * g.ldc + j] = g.beta == 0.f ? 0.f : g.beta * g.C[i * g.ldc + j];
  }
  if (!g.ep->empty()) applyEpilogue(*g.ep, g.C, g.ldc, m0, m0 + mc, n0, n0 + nc);
}

void runTasks(const GemmProblem& g, ThreadPool* pool) {
  if (g.M == 0 || g.N == 0) return;
  int threads = pool ? pool->size() : 1;
  // Row blocks: as few as possible (each costs a re-pack of B panels from cache, not memory).
  int64_t mBlocks = (g.M + kMC - 1) / kMC;
  int64_t mc = roundUp((g.M + mBlocks - 1) / mBlocks, kMR);
  mBlocks = (g.M + mc - 1) / mc;
  // Column blocks: enough tasks for load balance (~4 per thread), each a multiple of 16 columns.
  int64_t panels = (g.N + kNR - 1) / kNR;
  int64_t nBlocks = std::min(panels, std::max<int64_t>((4 * threads + mBlocks - 1) / mBlocks, 1));
  if (threads == 1) nBlocks = 1;
  nBlocks = std::max(nBlocks, (panels * kNR + kNCMax - 1) / kNCMax);
  int64_t ncPanels = (panels + nBlocks - 1) / nBlocks;
  nBlocks = (panels + ncPanels - 1) / ncPanels;
  int64_t kc = std::min(kKC, std::max<int64_t>(g.K, 1));
  auto work = [&](int64_t b, int64_t e) {
    float* packedA = threadScratchA(mc * kc);
    for (int64_t t = b; t < e; ++t) {
      int64_t mb = t / nBlocks, nb = t % nBlocks;
      int64_t m0 = mb * mc, n0 = nb * ncPanels * kNR;
      computeBlock(g, m0, std::min(mc, g.M - m0), n0, std::min(ncPanels * kNR, g.N - n0), packedA);
    }
  };
  if (pool) pool->parallelFor(mBlocks * nBlocks, 1, work);
  else work(0, mBlocks * nBlocks);
}

void checkArgs(int64_t M, int64_t N, int64_t K, bool transA, int64_t lda, bool transB, int64_t ldb, int64_t ldc) {
  if (M < 0 || N < 0 || K < 0) throw Error("sgemm: negative size");
  if (lda < std::max<int64_t>(1, transA ? M : K) || ldb < std::max<int64_t>(1, transB ? K : N) ||
      ldc < std::max<int64_t>(1, N))
    throw Error("sgemm: leading dimension smaller than the matrix row");
  volume({M, K});
  volume({K, roundUp(N, kNR)});
  volume({M, ldc});
}

// ---- epilogue ----

//! exp(x) for 8 floats (range-reduced polynomial, ~1 ulp over the finite range).
inline __m256 expPs(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

inline __m256 sigmoidPs(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.f);
  return _mm256_div_ps(one, _mm256_add_ps(one, expPs(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

//! erf(x) (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7), sign restored.
inline __m256 erfPs(__m256 x) {
  const __m256 signMask = _mm256_set1_ps(-0.f);
  __m256 sign = _mm256_and_ps(x, signMask), ax = _mm256_andnot_ps(signMask, x);
  __m256 t = _mm256_div_ps(_mm256_set1_ps(1.f), _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), ax, _mm256_set1_ps(1.f)));
  __m256 p = _mm256_set1_ps(1.061405429f);
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-1.453152027f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(1.421413741f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(-0.284496736f));
  p = _mm256_fmadd_ps(p, t, _mm256_set1_ps(0.254829592f));
  p = _mm256_mul_ps(p, t);
  __m256 y = _mm256_fnmadd_ps(p, expPs(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(ax, ax))), _mm256_set1_ps(1.f));
  return _mm256_or_ps(y, sign);
}

//! The activations whose scalar form calls libm get an AVX2 form; others are cheap scalars
//! that the compiler vectorizes.
bool vectorActivation(ActKind k) {
  return k == ActKind::kSigmoid || k == ActKind::kTanh || k == ActKind::kGelu || k == ActKind::kGeluTanh ||
         k == ActKind::kSilu;
}

inline __m256 activatePs(ActKind k, __m256 x) {
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.f), two = _mm256_set1_ps(2.f);
  switch (k) {
    case ActKind::kSigmoid: return sigmoidPs(x);
    case ActKind::kSilu: return _mm256_mul_ps(x, sigmoidPs(x));
    case ActKind::kTanh: {  // tanh(x) = 2 sigmoid(2x) - 1; odd symmetry keeps small |x| accurate
      __m256 signMask = _mm256_set1_ps(-0.f), ax = _mm256_andnot_ps(signMask, x);
      __m256 e = expPs(_mm256_mul_ps(ax, _mm256_set1_ps(-2.f)));
      __m256 y = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
      return _mm256_or_ps(y, _mm256_and_ps(x, signMask));
    }
    case ActKind::kGelu:
      return _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(one, erfPs(_mm256_mul_ps(x, _mm256_set1_ps(float(kGeluErfScale))))));
    case ActKind::kGeluTanh: {  // 0.5x(1+tanh(u)) = x * sigmoid(2u)
      __m256 u = _mm256_mul_ps(_mm256_set1_ps(float(kGeluTanhScale)),
                               _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(float(kGeluTanhCubic)), x), _mm256_mul_ps(x, x), x));
      return _mm256_mul_ps(x, sigmoidPs(_mm256_mul_ps(two, u)));
    }
    default: return x;
  }
}

void activateRow(const Activation& act, float* p, int64_t n) {
  if (act.kind == ActKind::kNone) return;
  int64_t j = 0;
  if (vectorActivation(act.kind)) {
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(p + j, activatePs(act.kind, _mm256_loadu_ps(p + j)));
    for (; j < n; ++j) p[j] = act(p[j]);
    return;
  }
  switch (act.kind) {  // branch-free loops the compiler vectorizes
    case ActKind::kRelu: for (; j < n; ++j) p[j] = p[j] > 0.f ? p[j] : 0.f; break;
    case ActKind::kLeakyRelu: for (; j < n; ++j) p[j] = p[j] >= 0.f ? p[j] : act.alpha * p[j]; break;
    case ActKind::kClip: for (; j < n; ++j) p[j] = std::min(std::max(p[j], act.alpha), act.beta); break;
    default: for (; j < n; ++j) p[j] = act(p[j]); break;
  }
}

}  // namespace

void applyEpilogue(const GemmEpilogue& ep, float* C, int64_t ldc, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  for (int64_t i = m0; i < m1; ++i) {
    float* row = C + i * ldc;
    if (ep.colBias)
      for (int64_t j = n0; j < n1; ++j) row[j] += ep.colBias[j];
    if (ep.rowBias) {
      float b = ep.rowBias[i];
      for (int64_t j = n0; j < n1; ++j) row[j] += b;
    }
    activateRow(ep.act, row + n0, n1 - n0);
  }
}

void sgemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ThreadPool* pool,
           const GemmEpilogue& epilogue) {
  checkArgs(M, N, K, transA, lda, transB, ldb, ldc);
  if (M == 0 || N == 0) return;
  float* packed = threadScratchB(std::max<int64_t>(packedBFloats(K, N), 1));
  packBAll(transB, B, ldb, K, N, packed, pool);
  runTasks(GemmProblem{transA, M, N, K, alpha, A, lda, packed, beta, C, ldc, &epilogue}, pool);
}

PackedB::PackedB(bool transB, int64_t K, int64_t N, const float* B, int64_t ldb, ThreadPool* pool) : k_(K), n_(N) {
  checkArgs(1, N, K, false, std::max<int64_t>(K, 1), transB, ldb, std::max<int64_t>(N, 1));
  int64_t floats = std::max<int64_t>(packedBFloats(K, N), 1);
  float* p = static_cast<float*>(std::aligned_alloc(64, roundUp(floats * 4, 64)));
  if (!p) throw Error("sgemm: out of memory packing a " + std::to_string(K) + "x" + std::to_string(N) + " matrix");
  buf_ = std::shared_ptr<float>(p, [](float* q) { std::free(q); });
  packBAll(transB, B, ldb, K, N, p, pool);
}

void sgemmPacked(bool transA, int64_t M, float alpha, const float* A, int64_t lda, const PackedB& B, float beta,
                 float* C, int64_t ldc, ThreadPool* pool, const GemmEpilogue& epilogue) {
  checkArgs(M, B.N(), B.K(), transA, lda, false, std::max<int64_t>(B.N(), 1), ldc);
  if (M == 0 || B.N() == 0) return;
  runTasks(GemmProblem{transA, M, B.N(), B.K(), alpha, A, lda, B.data(), beta, C, ldc, &epilogue}, pool);
}

}  // namespace cpu
}  // namespace kiln

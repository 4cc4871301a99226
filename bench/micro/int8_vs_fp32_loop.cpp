// Inner-loop throughput on this CPU, from L1: q_linear_conv_int_avx2's micro-tile (vpmaddubsw +
// vpmaddwd + vpaddd, 4 channels x 16 pixels, 2 loads and 4 broadcasts per 256 multiply-adds)
// against a float32 FMA micro-tile of the same shape (6 rows x 16 columns: 2 loads, 6
// broadcasts, 12 FMAs per 96 multiply-adds, as in backends/cpu/gemm.cpp). Why INT8 is no faster
// than FP32 on AVX2 CPUs without VNNI where vpmaddubsw / vpmaddwd issue on one pipe:
//   g++ -O2 -mavx2 -mfma bench/micro/int8_vs_fp32_loop.cpp -o /tmp/loop && /tmp/loop
#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

static inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

__attribute__((noinline)) __m256i int8Loop(const uint8_t* a, const int8_t* w, long k4s, long reps) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  for (long r = 0; r < reps; ++r) {
    const int8_t *w0 = w, *w1 = w + k4s * 4, *w2 = w1 + k4s * 4, *w3 = w2 + k4s * 4;
    for (long k = 0; k < k4s; ++k) {
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + k * 64));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + k * 64 + 32));
#define STEP(c0, c1, ww)                                                                  \
  {                                                                                       \
    const __m256i b = broadcast4(ww + k * 4);                                             \
    c0 = _mm256_add_epi32(c0, _mm256_madd_epi16(_mm256_maddubs_epi16(x0, b), ones));      \
    c1 = _mm256_add_epi32(c1, _mm256_madd_epi16(_mm256_maddubs_epi16(x1, b), ones));      \
  }
      STEP(c00, c01, w0) STEP(c10, c11, w1) STEP(c20, c21, w2) STEP(c30, c31, w3)
#undef STEP
    }
  }
  return _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(c00, c01), _mm256_add_epi32(c10, c11)),
                          _mm256_add_epi32(_mm256_add_epi32(c20, c21), _mm256_add_epi32(c30, c31)));
}

__attribute__((noinline)) float fp32Loop(const float* b, const float* a, long ks, long reps) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00, c40 = c00,
         c41 = c00, c50 = c00, c51 = c00;
  for (long r = 0; r < reps; ++r)
    for (long k = 0; k < ks; ++k) {
      const __m256 b0 = _mm256_loadu_ps(b + k * 16), b1 = _mm256_loadu_ps(b + k * 16 + 8);
#define ROW(i, c0, c1)                                   \
  {                                                      \
    const __m256 x = _mm256_broadcast_ss(a + k * 6 + i); \
    c0 = _mm256_fmadd_ps(x, b0, c0);                     \
    c1 = _mm256_fmadd_ps(x, b1, c1);                     \
  }
      ROW(0, c00, c01) ROW(1, c10, c11) ROW(2, c20, c21) ROW(3, c30, c31) ROW(4, c40, c41) ROW(5, c50, c51)
#undef ROW
    }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c00, c01), _mm256_add_ps(c10, c11)),
                                 _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c20, c21), _mm256_add_ps(c30, c31)),
                                               _mm256_add_ps(_mm256_add_ps(c40, c41), _mm256_add_ps(c50, c51))));
  return s[0];
}

int main() {
  const long k4s = 144, ks = 256, reps = 200000;
  static uint8_t a[144 * 64];
  static int8_t w[4 * 144 * 4];
  static float fb[256 * 16], fa[256 * 6];
  for (int i = 0; i < 144 * 64; ++i) a[i] = static_cast<uint8_t>(i);
  for (int i = 0; i < 4 * 144 * 4; ++i) w[i] = static_cast<int8_t>(i % 64);
  for (int i = 0; i < 256 * 16; ++i) fb[i] = 1e-3f * (i % 7);
  for (int i = 0; i < 256 * 6; ++i) fa[i] = 1e-3f * (i % 5);
  double t0 = now();
  __m256i r = int8Loop(a, w, k4s, reps);
  double t1 = now();
  float f = fp32Loop(fb, fa, ks, reps);
  double t2 = now();
  std::printf("int8 vpmaddubsw tile: %.1f GMAC/s   fp32 FMA tile: %.1f GMAC/s   (%d %g)\n", reps * k4s * 256 / (t1 - t0) / 1e9,
              reps * ks * 96 / (t2 - t1) / 1e9, _mm256_extract_epi32(r, 0), f);
}

// The mixed-radix complex FFT (ops/fft.h) behind DFT and STFT: float32 inverse transforms equal
// numpy.fft.ifft on complex64 bit for bit where the plans agree (tests/unit/gen_state_image_signal_ref.py
// writes fft_ref.inc), and float32 / float64 transforms of many lengths (every factor kind: 2, 3, 4,
// 5, other primes, large primes) agree with a direct DFT in long double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/fft.h"

using namespace kiln;

namespace {
#include "fft_ref.inc"

float fromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

uint32_t toBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Transforms random data of length n and returns the largest error against a long double DFT,
// relative to the sum of the input magnitudes (the bound of every output).
template <typename T>
double relativeError(int64_t n, bool forward, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<Complex<T>> x(static_cast<size_t>(n)), scratch(static_cast<size_t>(n));
  double norm = 0;
  for (auto& v : x) {
    v = {static_cast<T>(u(rng)), static_cast<T>(u(rng))};
    norm += std::hypot(static_cast<double>(v.r), static_cast<double>(v.i));
  }
  const std::vector<Complex<T>> in = x;
  const T fct = forward ? T(1) : T(1) / static_cast<T>(n);
  ComplexFft<T>(n).run(x.data(), scratch.data(), forward, fct);
  const long double pi2 = 6.283185307179586476925286766559005768L;
  std::vector<long double> cosine(static_cast<size_t>(n)), sine(static_cast<size_t>(n));
  for (int64_t m = 0; m < n; ++m) {
    const long double a = (forward ? -pi2 : pi2) * static_cast<long double>(m) / static_cast<long double>(n);
    cosine[m] = std::cos(a);
    sine[m] = std::sin(a);
  }
  double worst = 0;
  for (int64_t k = 0; k < n; ++k) {
    long double re = 0, im = 0;
    for (int64_t j = 0; j < n; ++j) {
      const size_t m = static_cast<size_t>((j * k) % n);
      re += in[j].r * cosine[m] - in[j].i * sine[m];
      im += in[j].r * sine[m] + in[j].i * cosine[m];
    }
    const double scale = forward ? 1.0 : 1.0 / static_cast<double>(n);
    worst = std::max(worst, std::hypot(static_cast<double>(x[k].r - re * scale), static_cast<double>(x[k].i - im * scale)) / (norm * scale));
  }
  return worst;
}

const int64_t kLengths[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 16, 24, 25, 27, 32, 49, 60, 64, 77, 97, 100, 120, 128, 210, 243, 256, 1000, 1009};

}  // namespace

TEST(ComplexFft, Float32InverseEqualsNumpyOnComplex64) {
  ASSERT_EQ(kFftCases.size(), 15u);
  for (const FftCase& c : kFftCases) {
    std::vector<Complex<float>> x(static_cast<size_t>(c.n)), scratch(static_cast<size_t>(c.n));
    for (int64_t j = 0; j < c.n; ++j) x[j] = {fromBits(c.in[2 * j]), fromBits(c.in[2 * j + 1])};
    ComplexFft<float>(c.n).run(x.data(), scratch.data(), false, 1.0f / static_cast<float>(c.n));
    for (int64_t k = 0; k < c.n; ++k) {
      EXPECT_EQ(toBits(x[k].r), c.want[2 * k]) << "n=" << c.n << " bin " << k << " (real)";
      EXPECT_EQ(toBits(x[k].i), c.want[2 * k + 1]) << "n=" << c.n << " bin " << k << " (imag)";
    }
  }
}

TEST(ComplexFft, AgreesWithTheDirectTransform) {
  for (int64_t n : kLengths)
    for (bool forward : {true, false}) {
      EXPECT_LT(relativeError<float>(n, forward, static_cast<uint32_t>(n)), 4e-7 * std::log2(2.0 * n)) << "float n=" << n;
      EXPECT_LT(relativeError<double>(n, forward, static_cast<uint32_t>(n)), 1e-15 * std::log2(2.0 * n)) << "double n=" << n;
    }
}

TEST(ComplexFft, ForwardThenBackwardIsTheIdentity) {
  for (int64_t n : kLengths) {
    std::mt19937 rng(static_cast<uint32_t>(n) + 7);
    std::uniform_real_distribution<double> u(-1, 1);
    std::vector<Complex<double>> x(static_cast<size_t>(n)), scratch(static_cast<size_t>(n));
    for (auto& v : x) v = {u(rng), u(rng)};
    const std::vector<Complex<double>> in = x;
    const ComplexFft<double> fft(n);
    fft.run(x.data(), scratch.data(), true, 1.0);
    fft.run(x.data(), scratch.data(), false, 1.0 / static_cast<double>(n));
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_NEAR(x[j].r, in[j].r, 1e-13) << "n=" << n;
      EXPECT_NEAR(x[j].i, in[j].i, 1e-13) << "n=" << n;
    }
  }
}

// The random numbers of RandomUniform(Like), RandomNormal(Like) and Bernoulli (ops/random.cpp),
// shared by the reference kernels and the CUDA tactic (backends/cuda/random_cuda.cu): element i
// of a run draws from a counter-based generator (SplitMix64 of the seed and i), so CPU and GPU give
// the same values for one seed, in any order and on any number of threads.
#pragma once
#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace kiln {

//! How a layer draws: the value distribution and the seed of this run.
enum class RandomKind : int { kUniform = 0, kNormal = 1, kBernoulli = 2 };

KILN_HOST_DEVICE inline uint64_t randomMix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

//! Uniform in [0, 1), 24 random bits.
KILN_HOST_DEVICE inline float randomUniform01(uint64_t seed, uint64_t i) {
  return static_cast<float>(randomMix(seed ^ randomMix(i)) >> 40) * (1.0f / 16777216.0f);
}

//! Standard normal (Box-Muller over draws 2i and 2i + 1; 1 - u is in (0, 1], so the log is finite).
KILN_HOST_DEVICE inline float randomNormal01(uint64_t seed, uint64_t i) {
  const float u1 = 1.0f - randomUniform01(seed, 2 * i), u2 = randomUniform01(seed, 2 * i + 1);
  return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

//! Element i of a layer's output: low + (high - low) u, mean + scale z, or (u < p ? 1 : 0).
KILN_HOST_DEVICE inline float randomValue(RandomKind kind, uint64_t seed, uint64_t i, float a, float b, float p) {
  if (kind == RandomKind::kUniform) return a + (b - a) * randomUniform01(seed, i);
  if (kind == RandomKind::kNormal) return a + b * randomNormal01(seed, i);
  return randomUniform01(seed, i) < p ? 1.0f : 0.0f;
}

struct LayerDesc;

//! A layer's draw: the distribution, its parameters (low/high or mean/scale) and this run's seed
//! (from the attribute `seed`, else fresh per call).
struct RandomDraw {
  RandomKind kind = RandomKind::kUniform;
  float a = 0.f, b = 1.f;
  bool seeded = false;  //!< the layer has the attribute `seed`: every run draws `seed`
  uint64_t seed = 0;
};
RandomDraw randomDraw(const LayerDesc& l);
//! A seed no earlier call returned (a process-wide random base and a counter): a run of a layer
//! without the attribute `seed`.
uint64_t freshRandomSeed();

}  // namespace kiln

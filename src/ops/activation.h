// Scalar activations shared by the elementwise ops and by fused layers (ops/fused_attrs.h stores
// them on layers). No dependencies beyond <cmath>, so that CUDA code can share the kind enum and
// the constants (backends/cuda/activation_math.cuh) and every floor computes GELU from one place.
#pragma once
#include <cmath>
#include <cstddef>

namespace kiln {

enum class ActKind { kNone, kRelu, kLeakyRelu, kClip, kSigmoid, kTanh, kHardSwish, kHardSigmoid, kGelu, kGeluTanh, kElu, kSoftplus, kSilu, kMish };

//! A fused activation kind, its stored name and which parameters it reads (alpha: LeakyRelu and
//! Elu's alpha, Clip's min, HardSigmoid's alpha; beta: Clip's max, HardSigmoid's beta).
struct ActivationInfo {
  ActKind kind;
  const char* name;
  bool usesAlpha, usesBeta;
};

//! Every fusable activation (all of ActKind but kNone), in enum order. docs/internals.md lists
//! these names; a unit test (FusedAttrs.DocsListEveryActivation) keeps the two equal.
inline constexpr ActivationInfo kActivations[] = {
    {ActKind::kRelu, "Relu", false, false},          {ActKind::kLeakyRelu, "LeakyRelu", true, false},
    {ActKind::kClip, "Clip", true, true},            {ActKind::kSigmoid, "Sigmoid", false, false},
    {ActKind::kTanh, "Tanh", false, false},          {ActKind::kHardSwish, "HardSwish", false, false},
    {ActKind::kHardSigmoid, "HardSigmoid", true, true}, {ActKind::kGelu, "Gelu", false, false},
    {ActKind::kGeluTanh, "GeluTanh", false, false},  {ActKind::kElu, "Elu", true, false},
    {ActKind::kSoftplus, "Softplus", false, false},  {ActKind::kSilu, "Silu", false, false},
    {ActKind::kMish, "Mish", false, false},
};
static_assert(sizeof(kActivations) / sizeof(kActivations[0]) == static_cast<size_t>(ActKind::kMish),
              "kActivations must list every ActKind but kNone");

//! The table entry of a kind other than kNone.
constexpr const ActivationInfo& activationInfo(ActKind k) { return kActivations[static_cast<size_t>(k) - 1]; }

// GELU's constants (double: cast to the compute type at the use; float(k) equals the float literal).
constexpr double kGeluErfScale = 0.70710678118654752;   //!< 1/sqrt(2): Gelu = 0.5 x (1 + erf(x/sqrt 2))
constexpr double kGeluTanhScale = 0.7978845608028654;   //!< sqrt(2/pi): GeluTanh = 0.5 x (1 + tanh(k (x + c x^3)))
constexpr double kGeluTanhCubic = 0.044715;             //!< c of GeluTanh

struct Activation {
  ActKind kind = ActKind::kNone;
  float alpha = 0.f, beta = 0.f;
  float operator()(float x) const {
    switch (kind) {
      case ActKind::kNone: return x;
      case ActKind::kRelu: return x > 0.f ? x : 0.f;
      case ActKind::kLeakyRelu: return x >= 0.f ? x : alpha * x;
      case ActKind::kClip: return x < alpha ? alpha : (x > beta ? beta : x);
      case ActKind::kSigmoid: return 1.f / (1.f + std::exp(-x));
      case ActKind::kTanh: return std::tanh(x);
      case ActKind::kHardSwish: { float t = x / 6.f + 0.5f; t = t < 0.f ? 0.f : (t > 1.f ? 1.f : t); return x * t; }
      case ActKind::kHardSigmoid: { float t = alpha * x + beta; return t < 0.f ? 0.f : (t > 1.f ? 1.f : t); }
      case ActKind::kGelu: return 0.5f * x * (1.f + std::erf(x * float(kGeluErfScale)));
      case ActKind::kGeluTanh:
        return 0.5f * x * (1.f + std::tanh(float(kGeluTanhScale) * (x + float(kGeluTanhCubic) * x * x * x)));
      case ActKind::kElu: return x >= 0.f ? x : alpha * (std::exp(x) - 1.f);
      case ActKind::kSoftplus: return x > 20.f ? x : std::log1p(std::exp(x));
      case ActKind::kSilu: return x / (1.f + std::exp(-x));  // x * sigmoid(x), exported as Sigmoid + Mul
      case ActKind::kMish: return x * std::tanh(x > 20.f ? x : std::log1p(std::exp(x)));  // x tanh(softplus x)
    }
    return x;
  }
};

}  // namespace kiln

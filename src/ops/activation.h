// Scalar activations shared by the elementwise ops and by fused layers (kiln_activation).
#pragma once
#include <cmath>
#include <string>

#include "kiln/network.h"

namespace kiln {

enum class ActKind { kNone, kRelu, kLeakyRelu, kClip, kSigmoid, kTanh, kHardSwish, kHardSigmoid, kGelu, kGeluTanh, kElu, kSoftplus };

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
      case ActKind::kGelu: return 0.5f * x * (1.f + std::erf(x * 0.70710678118654752f));
      case ActKind::kGeluTanh: return 0.5f * x * (1.f + std::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
      case ActKind::kElu: return x >= 0.f ? x : alpha * (std::exp(x) - 1.f);
      case ActKind::kSoftplus: return x > 20.f ? x : std::log1p(std::exp(x));
    }
    return x;
  }
};

//! Reads kiln_activation / kiln_act_alpha / kiln_act_beta from a fused layer's attributes.
inline Activation fusedActivation(const Attributes& a) {
  Activation act;
  std::string k = a.getString("kiln_activation", "");
  act.alpha = a.getFloat("kiln_act_alpha", 0.f);
  act.beta = a.getFloat("kiln_act_beta", 0.f);
  if (k.empty()) act.kind = ActKind::kNone;
  else if (k == "Relu") act.kind = ActKind::kRelu;
  else if (k == "LeakyRelu") act.kind = ActKind::kLeakyRelu;
  else if (k == "Clip") act.kind = ActKind::kClip;
  else if (k == "Sigmoid") act.kind = ActKind::kSigmoid;
  else if (k == "Tanh") act.kind = ActKind::kTanh;
  else if (k == "HardSwish") act.kind = ActKind::kHardSwish;
  else if (k == "HardSigmoid") act.kind = ActKind::kHardSigmoid;
  else if (k == "Gelu") act.kind = ActKind::kGelu;
  else if (k == "GeluTanh") act.kind = ActKind::kGeluTanh;
  else if (k == "Elu") act.kind = ActKind::kElu;
  else if (k == "Softplus") act.kind = ActKind::kSoftplus;
  else throw Error("unknown fused activation '" + k + "'");
  return act;
}

}  // namespace kiln

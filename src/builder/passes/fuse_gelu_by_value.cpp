// GELU however it is spelled: fuse_gelu matches the orders PyTorch's own GELU exports in; models that
// write the formula themselves (BLOOM's 0.5x(1 + tanh(0.79788456 x (1 + 0.044715 x^2))), "NewGELU"
// and "FastGELU" classes, x * sigmoid(1.702 x)-free variants) spell it in ways no pattern list keeps
// up with, and became two or three pointwise chains. Here a region of elementwise layers that is a
// function of one tensor x (each layer reads x, the region's own values or scalar constants) and
// whose values leave it through one tensor y is evaluated at many x values (double precision); where
// y(x) is the exact or the tanh GELU, the region becomes one Gelu layer (which then joins its
// producer's epilogue). Only regions with an Erf or a Tanh are evaluated.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "builder/passes/passes.h"

namespace kiln {

namespace {

constexpr size_t kMaxRegion = 24;

bool unaryOp(const std::string& op) {
  return op == "Neg" || op == "Tanh" || op == "Erf" || op == "Sqrt" || op == "Exp" || op == "Sigmoid" || op == "Reciprocal" ||
         op == "Abs";
}
bool binaryOp(const std::string& op) { return op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow"; }

//! A scalar constant (scalarValue) that does not raise x's rank by broadcasting.
bool scalarConstant(const Tensor* t, size_t rank) {
  double v = 0;
  return scalarValue(t, &v) && t->dims.size() <= rank;
}

double apply(const std::string& op, double a, double b) {
  if (op == "Add") return a + b;
  if (op == "Sub") return a - b;
  if (op == "Mul") return a * b;
  if (op == "Div") return a / b;
  if (op == "Pow") return std::pow(a, b);
  if (op == "Neg") return -a;
  if (op == "Tanh") return std::tanh(a);
  if (op == "Erf") return std::erf(a);
  if (op == "Sqrt") return std::sqrt(a);
  if (op == "Exp") return std::exp(a);
  if (op == "Sigmoid") return 1.0 / (1.0 + std::exp(-a));
  if (op == "Reciprocal") return 1.0 / a;
  return std::fabs(a);  // Abs
}

//! The layers that compute `y` from `x` inside `region` (in region order, which is topological),
//! or empty when y does not depend on x that way.
std::vector<Layer*> ancestorsIn(const std::vector<Layer*>& region, const Tensor* y) {
  std::set<const Tensor*> need{y};
  std::vector<Layer*> out;
  for (auto it = region.rbegin(); it != region.rend(); ++it) {
    if (!need.count((*it)->outputs[0])) continue;
    out.insert(out.begin(), *it);
    for (const Tensor* t : (*it)->inputs) need.insert(t);
  }
  return out;
}

//! y(x) over `layers` at the probe points; false when some value is not finite.
bool evaluate(const std::vector<Layer*>& layers, const Tensor* x, const Tensor* y, const std::vector<double>& xs,
              std::vector<double>& ys) {
  ys.assign(xs.size(), 0.0);
  for (size_t i = 0; i < xs.size(); ++i) {
    std::map<const Tensor*, double> v{{x, xs[i]}};
    for (const Layer* l : layers) {
      auto val = [&](const Tensor* t) {
        double c = 0;
        return scalarValue(t, &c) ? c : v.at(t);
      };
      const double a = val(l->inputs[0]), b = l->inputs.size() > 1 ? val(l->inputs[1]) : 0.0;
      v[l->outputs[0]] = apply(l->op, a, b);
    }
    ys[i] = v.at(y);
    if (!std::isfinite(ys[i])) return false;
  }
  return true;
}

double geluErf(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double geluTanh(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

//! Whether ys match f at xs: the exported constants are float32 roundings of the formula's.
bool matches(double (*f)(double), const std::vector<double>& xs, const std::vector<double>& ys) {
  for (size_t i = 0; i < xs.size(); ++i)
    if (std::fabs(ys[i] - f(xs[i])) > 1e-6 * (1.0 + std::fabs(xs[i]))) return false;
  return true;
}

//! The elementwise region of x: layers (topological order) whose non-constant inputs are x or the
//! region's outputs, grown from x's readers.
std::vector<Layer*> regionOf(const Network& net, Tensor* x) {
  std::vector<Layer*> region;
  std::set<const Tensor*> inside{x};
  std::vector<Tensor*> frontier{x};
  while (!frontier.empty() && region.size() < kMaxRegion) {
    Tensor* t = frontier.back();
    frontier.pop_back();
    for (Layer* l : net.consumers(t)) {
      if (std::find(region.begin(), region.end(), l) != region.end() || l->outputs.size() != 1) continue;
      const bool un = unaryOp(l->op) && l->inputs.size() == 1, bin = binaryOp(l->op) && l->inputs.size() == 2;
      if (!un && !bin) continue;
      bool ok = l->outputs[0]->type == DataType::kFLOAT;
      for (const Tensor* in : l->inputs) ok = ok && in && (inside.count(in) || scalarConstant(in, x->dims.size()));
      if (!ok) continue;
      region.push_back(l);
      inside.insert(l->outputs[0]);
      frontier.push_back(l->outputs[0]);
    }
  }
  // Region order must be topological for evaluation: the network's own order.
  std::vector<Layer*> ordered;
  for (const auto& l : net.layers())
    if (std::find(region.begin(), region.end(), l.get()) != region.end()) ordered.push_back(l.get());
  return ordered;
}

//! The one non-constant leaf x of the elementwise layers that compute `t` (walking up through
//! unary / binary layers with scalar operands, at most kMaxRegion of them); null when there are
//! several or none.
Tensor* soleLeaf(Tensor* t) {
  Tensor* leaf = nullptr;
  std::vector<Tensor*> todo{t};
  std::set<const Tensor*> seen;
  size_t layers = 0;
  while (!todo.empty()) {
    Tensor* u = todo.back();
    todo.pop_back();
    if (!seen.insert(u).second) continue;
    const Layer* p = u->producer;
    bool elementwise = p && p->outputs.size() == 1 && ((unaryOp(p->op) && p->inputs.size() == 1) ||
                                                       (binaryOp(p->op) && p->inputs.size() == 2));
    for (size_t k = 0; elementwise && k < p->inputs.size(); ++k)  // a bias Add is where x comes from
      elementwise = p->inputs[k] && (!p->inputs[k]->isConstant() || p->inputs[k]->value.count() == 1);
    if (u != t && !elementwise) {  // a leaf
      if (leaf && leaf != u) return nullptr;
      leaf = u;
      continue;
    }
    if (!elementwise || ++layers > kMaxRegion) return nullptr;
    for (Tensor* in : p->inputs)
      if (!in->isConstant()) todo.push_back(in);
  }
  return leaf;
}

}  // namespace

bool fuseGeluByValue(Network& net) {
  std::vector<double> xs;
  for (int i = -400; i <= 400; ++i) xs.push_back(i * 0.02);  // [-8, 8]
  for (double v : {-30.0, -15.0, 12.0, 25.0}) xs.push_back(v);
  bool changed = false;
  for (size_t i = 0; i < net.layers().size(); ++i) {
    Layer* special = net.layer(static_cast<int>(i));
    if ((special->op != "Erf" && special->op != "Tanh") || special->outputs.size() != 1) continue;
    Tensor* x = soleLeaf(special->outputs[0]);
    if (!x || x->isConstant() || x->type != DataType::kFLOAT) continue;
    const std::vector<Layer*> region = regionOf(net, x);
    // Candidate outputs, latest first: the largest function of x that is a GELU.
    for (auto it = region.rbegin(); it != region.rend(); ++it) {
      Tensor* y = (*it)->outputs[0];
      const std::vector<Layer*> sub = ancestorsIn(region, y);
      bool closed = !sub.empty();
      for (const Layer* l : sub) {
        if (l->outputs[0] == y) continue;
        if (l->outputs[0]->isOutput) closed = false;
        for (const Layer* c : net.consumers(l->outputs[0]))
          if (std::find(sub.begin(), sub.end(), c) == sub.end()) closed = false;
      }
      std::vector<double> ys;
      if (!closed || !evaluate(sub, x, y, xs, ys)) continue;
      const char* approximate = matches(geluErf, xs, ys) ? "none" : (matches(geluTanh, xs, ys) ? "tanh" : nullptr);
      if (!approximate) continue;
      Attributes a;
      a.set("approximate", std::string(approximate));
      Layer* gelu = net.addLayer("Gelu", {x}, 1, a, net.uniqueName(sub.back()->name + "_gelu"));
      replaceWithFused(net, gelu, sub, y);
      changed = true;
      i = static_cast<size_t>(-1);  // replaceWithFused re-sorted the layers: start over
      break;
    }
  }
  return changed;
}

}  // namespace kiln

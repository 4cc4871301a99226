// The layout planner shared by the CPU and GPU layout passes (layout_planner.h).
#include "builder/passes/layout_planner.h"

#include <map>
#include <set>
#include <tuple>

#include "builder/passes/passes.h"
#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"
#include "ops/qlinear.h"
#include "ops/shape_propagation.h"

namespace kiln {

bool isLayoutConv(const Layer& l) { return l.op == "Conv" && l.outputs.size() == 1; }
bool isLayoutWindowPool(const Layer& l) { return (l.op == "MaxPool" || l.op == "AveragePool") && l.outputs.size() == 1; }
bool isLayoutGlobalPool(const Layer& l) { return l.op == "GlobalAveragePool" || l.op == "GlobalMaxPool"; }
bool isLayoutGroupNorm(const Layer& l) {
  return (l.op == "GroupNormalization" || l.op == "InstanceNormalization") && l.outputs.size() == 1 && !l.inputs.empty() &&
         l.inputs[0] && l.inputs[0]->dims.size() == 4;
}
bool isLayoutChannelConcat(const Layer& l) {
  if (l.op != "Concat" || l.outputs.size() != 1 || l.outputs[0]->dims.size() != 4) return false;
  const int64_t axis = l.attrs.getInt("axis", 0);
  return axis == 1 || axis == -3;
}

namespace {

enum class Slot { kOther, kData, kResidual };

class LayoutPlanner {
 public:
  LayoutPlanner(Network& net, const LayoutPolicy& p) : net_(net), policy_(p), block_(p.block), backend_(p.backend) {}

  //! Chooses the blocked tensors: until every layer that takes part has an optimized tactic for
  //! its layouts (a layer without one reads and writes plain NCHW instead).
  void plan() {
    for (;;) {
      chooseBlockedTensors();
      bool rejectedAny = false;
      for (auto& lp : net_.layers()) {
        Layer& l = *lp;
        const bool through = passesThrough(l);
        if (!through && (!accepting(l) || (!isBlocked(l.inputs[0]) && !isBlocked(l.outputs[0])))) continue;
        const int64_t in = through || isBlocked(l.inputs[0]) ? block_ : 1, out = isBlocked(l.outputs[0]) ? block_ : 1;
        if (!optimizedTacticRuns(l, in, out)) {
          rejected_.insert(&l);
          rejectedAny = true;
        }
      }
      if (!rejectedAny) return;
    }
  }

  //! Sets the layout attributes and inserts the LayoutConvert layers. Returns whether anything changed.
  bool rewrite() {
    if (blocked_.empty()) return false;
    std::vector<Layer*> layers;
    for (auto& lp : net_.layers()) layers.push_back(lp.get());
    for (Layer* l : layers) {
      // Shape / Size read only the dims, which stay logical NCHW whatever the layout: a dynamic
      // engine's Shape of a conv output (a UNet's interpolate(size=skip.shape[2:])) needs no copy.
      if (l->op == "Shape" || l->op == "Size") continue;
      const bool through = passesThrough(*l);
      const bool takesPart = through || (accepting(*l) && (isBlocked(l->inputs[0]) || isBlocked(l->outputs[0])));
      for (size_t k = 0; k < l->inputs.size(); ++k) {
        Tensor* t = l->inputs[k];
        if (!t || (through && !fullInput(*l, k))) continue;  // an invariant broadcast: same bytes in both
        const int64_t want = through ? block_ : wantedBlock(*l, k, takesPart), have = isBlocked(t) ? block_ : 1;
        if (want != have) l->inputs[k] = converted(t, have, want);
      }
      if (through) setLayouts(l->attrs, block_, block_);
      else if (takesPart) setLayouts(l->attrs, isBlocked(l->inputs[0]) ? block_ : 1, isBlocked(l->outputs[0]) ? block_ : 1);
    }
    return true;
  }

 private:
  bool accepting(const Layer& l) const { return policy_.reads(l) && !rejected_.count(&l) && !l.inputs.empty() && l.inputs[0]; }
  Slot slotOf(const Layer& l, size_t k) const {
    if (!policy_.reads(l)) return Slot::kOther;
    if (k == 0) return Slot::kData;
    if (k == 3 && (l.op == "Conv" || isLayoutGroupNorm(l))) return Slot::kResidual;
    if (k == kQR && l.op == "QLinearConv") return Slot::kResidual;  // kiln's int8 residual, in Y's layout
    return Slot::kOther;
  }
  bool isBlocked(const Tensor* t) const { return t && blocked_.count(t); }

  bool isChannelConcat(const Layer& l) const { return policy_.channelConcat && policy_.channelConcat(l); }
  //! A transparent layer's input k that shares Y's layout: of Y's shape (the others are
  //! broadcasts), or any input of a channel concat.
  bool fullInput(const Layer& l, size_t k) const {
    if (!l.inputs[k]) return false;
    if (isChannelConcat(l)) return true;
    return policy_.sameDims ? policy_.sameDims(l.inputs[k], l.outputs[0]) : l.inputs[k]->dims == l.outputs[0]->dims;
  }
  //! A transparent layer that may run in the layout: every input of another shape is invariant
  //! (a channel concat: every input may take the layout).
  bool transparentOk(const Layer& l) const {
    if (rejected_.count(&l) || l.outputs.size() != 1 || l.inputs.empty()) return false;
    if (isChannelConcat(l)) {
      for (const Tensor* t : l.inputs)
        if (!t || !policy_.eligible(t)) return false;
      return policy_.eligible(l.outputs[0]);
    }
    if (!policy_.transparent || !policy_.transparent(l)) return false;
    bool anyFull = false;
    for (size_t k = 0; k < l.inputs.size(); ++k) {
      if (!l.inputs[k]) continue;
      if (fullInput(l, k)) anyFull = true;
      else if (!layoutInvariantDims(l.inputs[k]->dims)) return false;
    }
    return anyFull;
  }
  //! A transparent layer that runs in the layout (its Y was chosen).
  bool passesThrough(const Layer& l) const { return transparentOk(l) && isBlocked(l.outputs[0]); }
  bool fullInputsBlocked(const Layer& l) const {
    for (size_t k = 0; k < l.inputs.size(); ++k)
      if (fullInput(l, k) && !isBlocked(l.inputs[k])) return false;
    return true;
  }

  //! Blocked: written by a layer that can write it blocked (or by a transparent layer whose
  //! inputs of its shape are all blocked) and read by at least one layer that reads it blocked (a
  //! conv/pool, or a transparent layer whose Y is blocked); else a conversion would only add work.
  void chooseBlockedTensors() {
    blocked_.clear();
    auto candidate = [&](const Tensor* t) {
      return t && t->producer && !t->isInput && !t->isOutput && !t->isConstant() && policy_.eligible(t);
    };
    for (auto& tp : net_.tensors())
      if (candidate(tp.get()) && policy_.writes(*tp->producer) && accepting(*tp->producer)) blocked_.insert(tp.get());
    for (bool grew = true; grew;) {  // through transparent layers, in any order
      grew = false;
      for (auto& lp : net_.layers())
        if (transparentOk(*lp) && !isBlocked(lp->outputs[0]) && candidate(lp->outputs[0]) && fullInputsBlocked(*lp)) {
          blocked_.insert(lp->outputs[0]);
          grew = true;
        }
    }
    for (bool shrank = true; shrank;) {  // drop tensors nobody reads blocked, then what that strands
      shrank = false;
      for (auto it = blocked_.begin(); it != blocked_.end();) {
        const Tensor* t = *it;
        const Layer& p = *t->producer;
        bool keep = !transparentOk(p) || policy_.writes(p) || fullInputsBlocked(p);
        bool read = false;
        for (Layer* c : net_.consumers(t))
          for (size_t k = 0; keep && !read && k < c->inputs.size(); ++k) {
            if (c->inputs[k] != t) continue;
            read = (slotOf(*c, k) != Slot::kOther && accepting(*c)) ||
                   (transparentOk(*c) && fullInput(*c, k) && isBlocked(c->outputs[0]));
          }
        if (keep && read) {
          ++it;
        } else {
          it = blocked_.erase(it);
          shrank = true;
        }
      }
    }
  }

  //! The block in which layer l wants input k: the data input as it is, the residual in Y's layout,
  //! anything else plain.
  int64_t wantedBlock(const Layer& l, size_t k, bool takesPart) const {
    if (!takesPart) return 1;
    switch (slotOf(l, k)) {
      case Slot::kData: return isBlocked(l.inputs[k]) ? block_ : 1;
      case Slot::kResidual: return isBlocked(l.outputs[0]) ? block_ : 1;
      default: return 1;
    }
  }

  //! Whether a non-reference tactic supports l with the layouts chosen so far (memoized: with
  //! `verify`, answering builds library plans).
  bool optimizedTacticRuns(const Layer& l, int64_t in, int64_t out) const {
    auto key = std::make_tuple(&l, in, out);
    auto it = runs_.find(key);
    if (it != runs_.end()) return it->second;
    Attributes attrs = l.attrs;
    setLayouts(attrs, in, out);
    LayerDesc d = describeLayer(l);
    d.attrs = &attrs;
    bool ok = false;
    LayerDesc at = d;  // the shapes to verify at
    if (policy_.atOpt) policy_.atOpt(l, at);
    for (const Tactic& t : backend_->tactics(d)) {
      if (t.name == "ref") continue;
      // a library may still have no kernel for these layouts (tacticBuilds)
      if (!policy_.verify || !t.create || !isStatic(at.outputs[0].dims) || tacticBuilds(t, d, at)) {
        ok = true;
        break;
      }
    }
    return runs_[key] = ok;
  }

  //! t in layout block `to` (one LayoutConvert per tensor and direction, shared by its readers).
  Tensor* converted(Tensor* t, int64_t from, int64_t to) {
    auto key = std::make_pair(t, to);
    auto it = converted_.find(key);
    if (it != converted_.end()) return it->second;
    Attributes a;
    setLayouts(a, from, to);
    Layer* conv = net_.addLayer("LayoutConvert", {t}, 1, a, net_.uniqueName(t->name + "_to_" + layoutName(to)));
    converted_[key] = conv->outputs[0];
    return conv->outputs[0];
  }

  Network& net_;
  const LayoutPolicy& policy_;
  int64_t block_;
  Backend* backend_;
  std::set<const Tensor*> blocked_;
  std::set<const Layer*> rejected_;
  std::map<std::pair<Tensor*, int64_t>, Tensor*> converted_;
  mutable std::map<std::tuple<const Layer*, int64_t, int64_t>, bool> runs_;
};

}  // namespace

bool layoutsAssigned(const Network& net) {
  for (auto& l : net.layers())
    if (hasLayouts(l->attrs)) return true;
  return false;
}

bool assignLayouts(Network& net, const LayoutPolicy& policy) {
  if (layoutsAssigned(net)) return false;
  LayoutPlanner planner(net, policy);
  planner.plan();
  return planner.rewrite();
}

}  // namespace kiln

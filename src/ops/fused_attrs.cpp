// The fusion contract's accessors (fused_attrs.h): the only code that spells the stored names.
#include "ops/fused_attrs.h"

#include "ops/conv_layout.h"
#include "ops/op_util.h"

namespace kiln {

namespace {

bool flag(const Attributes& a, const char* name) { return a.getInt(name, 0) != 0; }
void setFlag(Attributes& a, const char* name) { a.set(name, int64_t(1)); }

//! A layout attribute's block: 1 when absent, 0 when unknown or not a string.
int64_t layoutBlockOf(const LayerDesc& l, const char* name) {
  if (!l.attrs || !l.attrs->has(name)) return 1;
  try {
    return layoutBlock(l.attrs->getString(name, "nchw"));
  } catch (const Error&) {  // not a string attribute
    return 0;
  }
}

}  // namespace

bool activationKindOf(const std::string& name, ActKind* kind) {
  for (const ActivationInfo& info : kActivations)
    if (name == info.name) {
      *kind = info.kind;
      return true;
    }
  return false;
}

bool hasFusedActivation(const Attributes& a) { return a.has(attr::kActivation); }

Activation fusedActivation(const Attributes& a) {
  Activation act;
  const std::string k = a.getString(attr::kActivation, "");
  act.alpha = a.getFloat(attr::kActAlpha, 0.f);
  act.beta = a.getFloat(attr::kActBeta, 0.f);
  if (!k.empty() && !activationKindOf(k, &act.kind)) throw Error("unknown fused activation '" + k + "'");
  return act;
}

void setFusedActivation(Attributes& a, const Activation& act) {
  const ActivationInfo& info = activationInfo(act.kind);
  a.set(attr::kActivation, std::string(info.name));
  if (info.usesAlpha) a.set(attr::kActAlpha, act.alpha);
  if (info.usesBeta) a.set(attr::kActBeta, act.beta);
}

int64_t inLayoutBlock(const LayerDesc& l) { return layoutBlockOf(l, attr::kLayoutIn); }
int64_t outLayoutBlock(const LayerDesc& l) { return layoutBlockOf(l, attr::kLayoutOut); }
bool hasPlainLayouts(const LayerDesc& l) { return inLayoutBlock(l) == 1 && outLayoutBlock(l) == 1; }
bool elementwiseInLayout(const LayerDesc& l) {
  const int64_t b = outLayoutBlock(l);
  if (b == 1 || inLayoutBlock(l) != b || l.outputs.size() != 1 || l.outputs[0].dims.size() != 4) return false;
  for (size_t i = 0; i < l.inputs.size(); ++i)
    if (l.present(i) && l.inputs[i].dims != l.outputs[0].dims && !layoutInvariantDims(l.inputs[i].dims)) return false;
  return true;
}

RotaryColumns rotaryColumns(const LayerDesc& l) {
  RotaryColumns c;
  if (!l.attrs || !l.attrs->has(attr::kRotaryColumns)) return c;
  const std::vector<int64_t> v = l.attrs->getInts(attr::kRotaryColumns, {});
  if (v.size() != 2 || v[0] < 0 || v[1] <= 0)
    opError(l, std::string(attr::kRotaryColumns) + " must be [offset >= 0, width > 0]");
  c.offset = v[0];
  c.width = v[1];
  return c;
}

void setRotaryColumns(Attributes& a, const RotaryColumns& c) { a.set(attr::kRotaryColumns, std::vector<int64_t>{c.offset, c.width}); }

bool hasLayouts(const Attributes& a) { return a.has(attr::kLayoutIn) || a.has(attr::kLayoutOut); }
std::string inLayoutName(const Attributes& a) { return a.getString(attr::kLayoutIn, "nchw"); }
std::string outLayoutName(const Attributes& a) { return a.getString(attr::kLayoutOut, "nchw"); }
void setLayouts(Attributes& a, int64_t inBlock, int64_t outBlock) {
  a.set(attr::kLayoutIn, layoutName(inBlock));
  a.set(attr::kLayoutOut, layoutName(outBlock));
}

bool hasSkipInput(const Attributes& a) { return flag(a, attr::kSkip); }
void setSkipInput(Attributes& a) { setFlag(a, attr::kSkip); }
bool perActivationBatchNorm(const Attributes& a) { return flag(a, attr::kPerActivation); }
void setPerActivationBatchNorm(Attributes& a) { setFlag(a, attr::kPerActivation); }
bool perGroupAffine(const Attributes& a) { return flag(a, attr::kPerGroupAffine); }
void setPerGroupAffine(Attributes& a) { setFlag(a, attr::kPerGroupAffine); }
bool coercedTo2d(const Attributes& a) { return flag(a, attr::kCoerce2d); }
void setCoercedTo2d(Attributes& a) { setFlag(a, attr::kCoerce2d); }

bool tf32Allowed(const Attributes& a) { return a.getInt(attr::kTf32, 1) != 0; }
void disallowTf32(Attributes& a) { a.set(attr::kTf32, int64_t(0)); }

bool hasQkvViews(const Attributes& a) { return a.has(attr::kViewDims); }

namespace {

//! The view attributes' values in viewValues' order, each checked for its count; *oRank: the
//! output view's rank (0 without one).
std::vector<int64_t> rawViewValues(const LayerDesc& l, size_t* oRank) {
  const Attributes& a = *l.attrs;
  std::vector<int64_t> x = a.getInts(attr::kViewDims);
  if (x.size() != 6) opError(l, std::string(attr::kViewDims) + " must hold 6 sizes");
  for (const char* name : {attr::kQView, attr::kKView, attr::kVView}) {
    const std::vector<int64_t> s = a.getInts(name);
    if (s.size() != 4) opError(l, std::string(name) + " must hold an offset and 3 strides");
    x.insert(x.end(), s.begin(), s.end());
  }
  *oRank = 0;
  if (a.has(attr::kOView)) {
    const std::vector<int64_t> o = a.getInts(attr::kOView), d = a.getInts(attr::kODims);
    if (o.size() != 3 || d.empty()) opError(l, std::string(attr::kOView) + " needs 3 strides and " + attr::kODims);
    x.insert(x.end(), d.begin(), d.end());
    x.insert(x.end(), o.begin(), o.end());
    *oRank = d.size();
  }
  return x;
}

//! Dynamic shapes: the values kiln_view_exprs gives at the layer's input dims (-1 where a dim is
//! not known yet).
void resolveViewExprs(const LayerDesc& l, std::vector<int64_t>& x, size_t oRank) {
  const std::vector<int64_t> e = l.attrs->getInts(attr::kViewExprs);
  const std::string name = attr::kViewExprs;
  if (e.size() != x.size() * kViewExprInts)
    opError(l, name + " must hold " + std::to_string(kViewExprInts) + " ints per view value (" + std::to_string(x.size()) + ")");
  std::array<const Dims*, 4> refs{};
  for (size_t i = 0; i < 3; ++i) refs[i] = l.inputs.size() > i ? &l.inputs[i].dims : nullptr;
  Dims oDims;
  const size_t firstOStride = x.size() - 3;
  try {
    for (size_t i = 0; i < x.size(); ++i) {
      const int64_t* ei = &e[i * kViewExprInts];
      if (oRank && i == firstOStride) refs[kViewRefOutput] = &oDims;  // the output's dims are known from here on
      else if (ei[1] == kViewRefOutput && !refs[kViewRefOutput]) opError(l, name + ": only the output strides may read the output dims");
      x[i] = evalViewExpr(ei, refs, name);
      if (oRank && i >= 18 && i < firstOStride) oDims.push_back(x[i]);
    }
  } catch (const Error& ex) {
    opError(l, ex.what());
  }
}

//! Checks that the strided write fits kiln_o_dims.
void checkOutputView(const LayerDesc& l, const QkvViews& v) {
  const std::string oView = attr::kOView, oDims = attr::kODims;
  for (int64_t x : v.oDims)
    if (x <= 0) opError(l, oDims + " must be positive");
  int64_t last = v.dv - 1;
  const int64_t sizes[3] = {v.b, v.h, v.sq};
  for (int k = 0; k < 3; ++k) {
    if (v.o[k] < 0) opError(l, oView + " must not be negative");
    last += (sizes[k] - 1) * v.o[k];
  }
  if (volume(v.oDims) != v.b * v.h * v.sq * v.dv || last >= volume(v.oDims))
    opError(l, oView + " does not fit " + oDims + " " + toString(v.oDims));
}

}  // namespace

QkvViews parseQkvViews(const LayerDesc& l) {
  size_t oRank = 0;
  std::vector<int64_t> x = rawViewValues(l, &oRank);
  if (l.attrs->has(attr::kViewExprs)) {
    resolveViewExprs(l, x, oRank);
    for (int64_t e : x)
      if (e < 0) return viewsFromValues(x, oRank);  // some input dim not known yet (build time): nothing to check
  }
  for (size_t i = 0; i < 6; ++i)
    if (x[i] <= 0) opError(l, std::string(attr::kViewDims) + " must be positive");
  QkvViews v = viewsFromValues(x, oRank);
  if (v.outView) checkOutputView(l, v);
  const char* names[3] = {attr::kQView, attr::kKView, attr::kVView};
  const std::array<int64_t, 4>* views[3] = {&v.q, &v.k, &v.v};
  const Dims shapes[3] = {v.qDims(), v.kDims(), v.vDims()};
  for (int i = 0; i < 3; ++i) {
    const std::array<int64_t, 4>& s = *views[i];
    int64_t last = s[0];
    for (int k = 0; k < 4; ++k)
      if (s[k] < 0) opError(l, std::string(names[i]) + " must not be negative");
    for (int k = 0; k < 3; ++k) last += (shapes[i][k] - 1) * s[k + 1];
    last += shapes[i][3] - 1;
    if (l.inputs.size() > static_cast<size_t>(i) && isStatic(l.inputs[i].dims) && last >= volume(l.inputs[i].dims))
      opError(l, std::string(names[i]) + " reaches past the end of its input " + toString(l.inputs[i].dims));
  }
  // A sequence of one row never steps its row stride, and the fit may leave it 0 (XCiT's class
  // attention: one query, fitted at the samples); kernels that pass it on as a GEMM's leading
  // dimension need at least the row's width, which addresses nothing else.
  if (v.sq == 1 && v.q[3] == 0) v.q[3] = v.d;
  if (v.skv == 1 && v.k[3] == 0) v.k[3] = v.d;
  if (v.skv == 1 && v.v[3] == 0) v.v[3] = v.dv;
  if (v.outView && v.sq == 1 && v.o[2] == 0) v.o[2] = v.dv;
  return v;
}

bool viewsUnresolved(const QkvViews& v) {
  for (int64_t e : viewValues(v))
    if (e < 0) return true;
  return false;
}

void setQkvViews(Attributes& a, const QkvViews& v) {
  a.set(attr::kViewDims, std::vector<int64_t>{v.b, v.h, v.sq, v.skv, v.d, v.dv});
  a.set(attr::kQView, std::vector<int64_t>(v.q.begin(), v.q.end()));
  a.set(attr::kKView, std::vector<int64_t>(v.k.begin(), v.k.end()));
  a.set(attr::kVView, std::vector<int64_t>(v.v.begin(), v.v.end()));
  if (v.outView) {
    a.set(attr::kOView, std::vector<int64_t>(v.o.begin(), v.o.end()));
    a.set(attr::kODims, std::vector<int64_t>(v.oDims.begin(), v.oDims.end()));
  }
}

void setQkvViewExprs(Attributes& a, const std::vector<int64_t>& exprs) { a.set(attr::kViewExprs, exprs); }

PointwiseChainAttrs pointwiseChainAttrs(const Attributes& a) {
  PointwiseChainAttrs c;
  c.steps = a.getStrings(attr::kChainSteps);
  c.operand = a.getInts(attr::kChainOperand);
  c.swapped = a.getInts(attr::kChainSwapped);
  c.alpha = a.getFloats(attr::kChainAlpha);
  c.beta = a.getFloats(attr::kChainBeta);
  return c;
}

size_t pointwiseChainLength(const Attributes& a) { return a.getStrings(attr::kChainSteps).size(); }

void setPointwiseChainAttrs(Attributes& a, const PointwiseChainAttrs& c) {
  a.set(attr::kChainSteps, c.steps);
  a.set(attr::kChainOperand, c.operand);
  a.set(attr::kChainSwapped, c.swapped);
  a.set(attr::kChainAlpha, c.alpha);
  a.set(attr::kChainBeta, c.beta);
}

}  // namespace kiln

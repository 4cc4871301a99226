// The fusion contract (ops/fused_attrs.h): the stored names are pinned (they are plan format), the
// typed accessors round-trip, and docs/internals.md lists exactly the activation kinds there are.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "ops/fused_attrs.h"

namespace kiln {
namespace {

TEST(FusedAttrs, StoredNamesArePinned) {
  // Changing any of these strings changes what plans hold: bump the plan format with it.
  EXPECT_STREQ(attr::kActivation, "kiln_activation");
  EXPECT_STREQ(attr::kActAlpha, "kiln_act_alpha");
  EXPECT_STREQ(attr::kActBeta, "kiln_act_beta");
  EXPECT_STREQ(attr::kLayoutIn, "kiln_layout_in");
  EXPECT_STREQ(attr::kLayoutOut, "kiln_layout_out");
  EXPECT_STREQ(attr::kSkip, "kiln_skip");
  EXPECT_STREQ(attr::kPerActivation, "kiln_per_activation");
  EXPECT_STREQ(attr::kPerGroupAffine, "kiln_per_group_affine");
  EXPECT_STREQ(attr::kCoerce2d, "kiln_coerce_2d");
  EXPECT_STREQ(attr::kTf32, "kiln_tf32");
  EXPECT_STREQ(attr::kViewDims, "kiln_view_dims");
  EXPECT_STREQ(attr::kQView, "kiln_q_view");
  EXPECT_STREQ(attr::kKView, "kiln_k_view");
  EXPECT_STREQ(attr::kVView, "kiln_v_view");
  EXPECT_STREQ(attr::kOView, "kiln_o_view");
  EXPECT_STREQ(attr::kODims, "kiln_o_dims");
  EXPECT_STREQ(attr::kViewExprs, "kiln_view_exprs");
  EXPECT_STREQ(activationInfo(ActKind::kGeluTanh).name, "GeluTanh");
}

TEST(FusedAttrs, ActivationRoundTripStoresOnlyUsedParameters) {
  EXPECT_EQ(fusedActivation(Attributes{}).kind, ActKind::kNone);
  for (const ActivationInfo& info : kActivations) {
    Attributes a;
    setFusedActivation(a, Activation{info.kind, 0.25f, 0.75f});
    EXPECT_TRUE(hasFusedActivation(a));
    EXPECT_EQ(a.getString(attr::kActivation, ""), info.name);
    EXPECT_EQ(a.has(attr::kActAlpha), info.usesAlpha) << info.name;
    EXPECT_EQ(a.has(attr::kActBeta), info.usesBeta) << info.name;
    const Activation back = fusedActivation(a);
    EXPECT_EQ(back.kind, info.kind);
    EXPECT_EQ(back.alpha, info.usesAlpha ? 0.25f : 0.f);
    EXPECT_EQ(back.beta, info.usesBeta ? 0.75f : 0.f);
  }
  Attributes bad;
  bad.set(attr::kActivation, std::string("Swish"));
  EXPECT_THROW(fusedActivation(bad), Error);
}

TEST(FusedAttrs, LayoutsAndFlags) {
  Attributes a;
  LayerDesc l;
  l.attrs = &a;
  EXPECT_TRUE(hasPlainLayouts(l));
  EXPECT_FALSE(hasLayouts(a));
  EXPECT_EQ(inLayoutName(a), "nchw");
  setLayouts(a, 8, 1);
  EXPECT_EQ(a.getString(attr::kLayoutIn, ""), "nChw8c");
  EXPECT_EQ(inLayoutBlock(l), 8);
  EXPECT_EQ(outLayoutBlock(l), 1);
  EXPECT_FALSE(hasPlainLayouts(l));
  a.set(attr::kLayoutOut, int64_t(3));  // not a string: unknown
  EXPECT_EQ(outLayoutBlock(l), 0);

  EXPECT_TRUE(tf32Allowed(a));
  disallowTf32(a);
  EXPECT_FALSE(tf32Allowed(a));
  EXPECT_FALSE(hasSkipInput(a) || perActivationBatchNorm(a) || perGroupAffine(a) || coercedTo2d(a));
  setSkipInput(a);
  setPerActivationBatchNorm(a);
  setPerGroupAffine(a);
  setCoercedTo2d(a);
  EXPECT_TRUE(hasSkipInput(a) && perActivationBatchNorm(a) && perGroupAffine(a) && coercedTo2d(a));
}

TEST(FusedAttrs, QkvViewsRoundTripAndChecks) {
  QkvViews v;
  v.b = 2, v.h = 3, v.sq = 4, v.skv = 5, v.d = 8, v.dv = 8;
  v.q = {0, 4 * 72, 8, 72};  // packed [B, S, 3 * H * D] projection: Q, K, V at offsets 0, 24, 48
  v.k = {24, 5 * 72, 8, 72};
  v.v = {48, 5 * 72, 8, 72};
  v.outView = true;
  v.o = {4 * 24, 8, 24};  // heads merged back: [B, Sq, H * Dv]
  v.oDims = {2, 4, 24};
  Attributes a;
  setQkvViews(a, v);
  LayerDesc l;
  l.name = "att";
  l.attrs = &a;
  ASSERT_TRUE(hasQkvViews(a));
  const QkvViews back = parseQkvViews(l);
  EXPECT_EQ(back.q, v.q);
  EXPECT_EQ(back.k, v.k);
  EXPECT_EQ(back.v, v.v);
  EXPECT_TRUE(back.outView);
  EXPECT_EQ(back.o, v.o);
  EXPECT_EQ(back.outDims(), v.oDims);
  EXPECT_EQ(back.kDims(), (Dims{2, 3, 5, 8}));
  a.set(attr::kQView, std::vector<int64_t>{0, 1, 2});
  EXPECT_THROW(parseQkvViews(l), Error);
}

// A one-row sequence's row stride addresses nothing, and a fit at sample shapes may leave it 0
// (XCiT's class attention: one query over 197 keys); parsed, it is the row's width, which kernels
// that pass it on as a GEMM's leading dimension need (the CPU kernel refused 0).
TEST(FusedAttrs, OneRowSequencesGetARowStride) {
  QkvViews v;
  v.b = 2, v.h = 4, v.sq = 1, v.skv = 197, v.d = 32, v.dv = 32;
  v.q = {0, 128, 32, 0};
  v.k = {0, 197 * 128, 32, 128};
  v.v = {0, 197 * 128, 32, 128};
  v.outView = true;
  v.o = {128, 32, 0};
  v.oDims = {2, 1, 128};
  Attributes a;
  setQkvViews(a, v);
  LayerDesc l;
  l.name = "cls_att";
  l.attrs = &a;
  const QkvViews back = parseQkvViews(l);
  EXPECT_EQ(back.q, (std::array<int64_t, 4>{0, 128, 32, 32}));
  EXPECT_EQ(back.o, (std::array<int64_t, 3>{128, 32, 32}));
  EXPECT_EQ(back.k, v.k);  // more than one key row: as written
}

// Dynamic shapes: the views as expressions of the input dims (kiln_view_exprs), resolved per shape,
// unresolved (-1, unchecked) while dims are unknown, and malformed expressions refused.
TEST(FusedAttrs, QkvViewExprsResolveFromTheInputDims) {
  // A packed [B, S, 3E] projection, E = 2 heads x 4: every view value of batch b and sequence s.
  constexpr int64_t H = 2, D = 4, E = H * D;
  auto views = [](int64_t b, int64_t s) {
    QkvViews v;
    v.b = b, v.h = H, v.sq = s, v.skv = s, v.d = D, v.dv = D;
    v.q = {0, s * 3 * E, D, 3 * E}, v.k = {E, s * 3 * E, D, 3 * E}, v.v = {2 * E, s * 3 * E, D, 3 * E};
    return v;
  };
  // c * prod(Q dims [k0, k1)): b = dim 0, s = dim 1, strides over the batch 3E * dim 1; the rest constants.
  const std::vector<std::array<int64_t, 4>> byValue = {
      {1, 0, 0, 1}, {H, -1, 0, 0}, {1, 0, 1, 2}, {1, 0, 1, 2}, {D, -1, 0, 0}, {D, -1, 0, 0},
      {0, -1, 0, 0}, {3 * E, 0, 1, 2}, {D, -1, 0, 0}, {3 * E, -1, 0, 0},
      {E, -1, 0, 0}, {3 * E, 0, 1, 2}, {D, -1, 0, 0}, {3 * E, -1, 0, 0},
      {2 * E, -1, 0, 0}, {3 * E, 0, 1, 2}, {D, -1, 0, 0}, {3 * E, -1, 0, 0}};
  std::vector<int64_t> exprs;
  for (const auto& e : byValue) exprs.insert(exprs.end(), e.begin(), e.end());
  Attributes a;
  QkvViews stored = views(1, 1);
  stored.b = stored.sq = stored.skv = -1;
  setQkvViews(a, stored);
  setQkvViewExprs(a, exprs);
  LayerDesc l;
  l.name = "att";
  l.attrs = &a;
  l.inputs.assign(3, TensorDesc{DataType::kFLOAT, {-1, -1, 3 * E}, {}});
  EXPECT_TRUE(viewsUnresolved(parseQkvViews(l)));  // build time: nothing to check yet
  for (auto [b, s] : {std::pair<int64_t, int64_t>{3, 7}, {1, 1}}) {
    for (TensorDesc& t : l.inputs) t.dims = {b, s, 3 * E};
    const QkvViews got = parseQkvViews(l), want = views(b, s);
    EXPECT_EQ(viewValues(got), viewValues(want)) << b << "x" << s;
  }
  l.inputs[0].dims = {3, 7, 2 * E};  // Q's buffer narrower than the constant strides: the view reaches past its end
  EXPECT_THROW(parseQkvViews(l), Error);
  for (TensorDesc& t : l.inputs) t.dims = {3, 7, 3 * E};
  std::vector<int64_t> bad = exprs;
  bad[1] = 9;  // no such reference
  a.set(attr::kViewExprs, bad);
  EXPECT_THROW(parseQkvViews(l), Error);
  bad = exprs;
  bad[3] = 4;  // dims [0, 4) of a rank-3 buffer
  a.set(attr::kViewExprs, bad);
  EXPECT_THROW(parseQkvViews(l), Error);
  bad = exprs;
  bad[1] = kViewRefOutput;  // the output's dims, with no output view
  a.set(attr::kViewExprs, bad);
  EXPECT_THROW(parseQkvViews(l), Error);
  a.set(attr::kViewExprs, std::vector<int64_t>(exprs.begin(), exprs.end() - 4));  // a value short
  EXPECT_THROW(parseQkvViews(l), Error);
}

TEST(FusedAttrs, PointwiseChainRoundTrip) {
  PointwiseChainAttrs c;
  c.steps = {"Add", "Gelu"};
  c.operand = {1, -1};
  c.swapped = {0, 0};
  c.alpha = {0.f, 1.f};
  c.beta = {0.f, 0.f};
  Attributes a;
  setPointwiseChainAttrs(a, c);
  EXPECT_EQ(pointwiseChainLength(a), 2u);
  const PointwiseChainAttrs back = pointwiseChainAttrs(a);
  EXPECT_EQ(back.steps, c.steps);
  EXPECT_EQ(back.operand, c.operand);
  EXPECT_EQ(back.alpha, c.alpha);
}

TEST(FusedAttrs, DocsListEveryActivation) {
  std::ifstream f(std::string(KILN_SOURCE_DIR) + "/docs/internals.md");
  ASSERT_TRUE(f) << "docs/internals.md not found under " << KILN_SOURCE_DIR;
  const std::string prefix = "Activation kinds (";
  std::string line, listed;
  while (std::getline(f, line))
    if (line.rfind(prefix, 0) == 0) listed = line.substr(line.find("): ") + 3);
  std::string expected;
  for (const ActivationInfo& info : kActivations) expected += std::string(expected.empty() ? "" : ", ") + info.name;
  EXPECT_EQ(listed, expected + ".");
}

}  // namespace
}  // namespace kiln

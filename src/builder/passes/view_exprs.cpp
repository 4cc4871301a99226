// Fitting kiln_view_exprs at sample shapes (view_exprs.h says why this is enough).
#include "builder/passes/view_exprs.h"

#include <algorithm>

namespace kiln {

namespace {

//! prod(d[k0:k1]), or -1 when it is not positive.
int64_t rangeProduct(const Dims& d, size_t k0, size_t k1) {
  int64_t p = 1;
  for (size_t k = k0; k < k1; ++k) {
    if (d[k] <= 0) return -1;
    p *= d[k];
  }
  return p;
}

//! Which values of viewValues(v) say nothing: the stride of a dim of size 1 (a trace gives it 0).
std::vector<bool> freeValues(const QkvViews& v) {
  std::vector<bool> free(viewValues(v).size(), false);
  const int64_t sizes[3][3] = {{v.b, v.h, v.sq}, {v.b, v.h, v.skv}, {v.b, v.h, v.skv}};
  for (size_t i = 0; i < 3; ++i)
    for (size_t k = 0; k < 3; ++k) free[6 + 4 * i + 1 + k] = sizes[i][k] == 1;
  if (v.outView)
    for (size_t k = 0; k < 3; ++k) free[free.size() - 3 + k] = sizes[0][k] == 1;
  return free;
}

//! The expression for values[s] (one per sample; skipped where free[s]) over dims of ref:
//! c * prod(dims[k0:k1]), shortest ranges first; false when none fits.
bool fitOver(const std::vector<int64_t>& values, const std::vector<bool>& free, const std::vector<std::array<Dims, 4>>& refs,
             size_t ref, int64_t* e) {
  const size_t rank = refs[0][ref].size();
  for (size_t s = 1; s < refs.size(); ++s)
    if (refs[s][ref].size() != rank) return false;
  for (size_t len = 1; len <= rank; ++len)
    for (size_t k0 = 0; k0 + len <= rank; ++k0) {
      int64_t c = -1;
      bool fits = true;
      for (size_t s = 0; s < values.size() && fits; ++s) {
        if (free[s]) continue;
        const int64_t p = rangeProduct(refs[s][ref], k0, k0 + len);
        fits = p > 0 && values[s] > 0 && values[s] % p == 0 && (c < 0 || c == values[s] / p);
        c = fits ? values[s] / p : c;
      }
      if (fits && c > 0) {
        e[0] = c, e[1] = static_cast<int64_t>(ref), e[2] = static_cast<int64_t>(k0), e[3] = static_cast<int64_t>(k0 + len);
        return true;
      }
    }
  return false;
}

}  // namespace

bool fitViewExprs(const std::vector<QkvViews>& views, const std::vector<std::array<Dims, 4>>& refs, std::vector<int64_t>& exprs) {
  if (views.size() < 2 || refs.size() != views.size()) return false;
  std::vector<std::vector<int64_t>> values;
  std::vector<std::vector<bool>> free;
  for (const QkvViews& v : views) {
    values.push_back(viewValues(v));
    free.push_back(freeValues(v));
    if (v.outView != views[0].outView || values.back().size() != values[0].size()) return false;
  }
  const size_t n = values[0].size(), firstOStride = views[0].outView ? n - 3 : n;
  exprs.assign(n * kViewExprInts, 0);
  for (size_t i = 0; i < n; ++i) {
    std::vector<int64_t> at;
    std::vector<bool> atFree;
    int64_t first = -1;  // the value at the first sample where it says something
    for (size_t s = 0; s < values.size(); ++s) {
      at.push_back(values[s][i]);
      atFree.push_back(free[s][i]);
      if (!free[s][i] && first < 0) first = values[s][i];
    }
    int64_t* e = &exprs[i * kViewExprInts];
    bool constant = true;
    for (size_t s = 0; s < at.size(); ++s) constant = constant && (atFree[s] || at[s] == first);
    if (constant) {  // (a stride of a dim that is 1 at every sample: any value, 0)
      e[0] = std::max<int64_t>(first, 0), e[1] = -1;
      continue;
    }
    // The output's strides follow its own dims first; every other value follows Q, K or V.
    std::vector<size_t> order{0, 1, 2};
    if (i >= firstOStride) order.insert(order.begin(), static_cast<size_t>(kViewRefOutput));
    bool fitted = false;
    for (size_t ref : order)
      if ((fitted = fitOver(at, atFree, refs, ref, e))) break;
    if (!fitted) return false;
  }
  return true;
}

QkvViews constantViewValues(const QkvViews& first, const std::vector<int64_t>& exprs) {
  std::vector<int64_t> values = viewValues(first);
  for (size_t i = 0; i < values.size(); ++i)
    if (exprs[i * kViewExprInts + 1] != -1) values[i] = -1;
  return viewsFromValues(values, first.outView ? first.oDims.size() : 0);
}

}  // namespace kiln

// Strided Attention views as flat values and their dynamic-shape expressions (attention_views.h).
#include "ops/attention_views.h"

#include <limits>

#include "kiln/types.h"

namespace kiln {

std::vector<int64_t> viewValues(const QkvViews& v) {
  std::vector<int64_t> out{v.b, v.h, v.sq, v.skv, v.d, v.dv};
  for (const auto* w : {&v.q, &v.k, &v.v}) out.insert(out.end(), w->begin(), w->end());
  if (v.outView) {
    out.insert(out.end(), v.oDims.begin(), v.oDims.end());
    out.insert(out.end(), v.o.begin(), v.o.end());
  }
  return out;
}

QkvViews viewsFromValues(const std::vector<int64_t>& x, size_t oRank) {
  const size_t want = 18 + (oRank ? oRank + 3 : 0);
  if (x.size() != want)
    throw Error("attention views: " + std::to_string(x.size()) + " values where " + std::to_string(want) + " were expected");
  QkvViews v;
  v.b = x[0], v.h = x[1], v.sq = x[2], v.skv = x[3], v.d = x[4], v.dv = x[5];
  size_t i = 6;
  for (auto* w : {&v.q, &v.k, &v.v})
    for (int64_t& e : *w) e = x[i++];
  if (oRank) {
    v.outView = true;
    v.oDims.assign(x.begin() + static_cast<std::ptrdiff_t>(i), x.begin() + static_cast<std::ptrdiff_t>(i + oRank));
    i += oRank;
    for (int64_t& e : v.o) e = x[i++];
  }
  return v;
}

int64_t evalViewExpr(const int64_t* e, const std::array<const Dims*, 4>& refs, const std::string& what) {
  const int64_t c = e[0], ref = e[1], k0 = e[2], k1 = e[3];
  if (c < 0) throw Error(what + ": a negative factor");
  if (ref == -1) return c;
  if (ref < 0 || ref > kViewRefOutput) throw Error(what + ": reference " + std::to_string(ref) + " is not Q, K, V or the output");
  const Dims* d = refs[static_cast<size_t>(ref)];
  if (!d) return -1;
  if (k0 < 0 || k1 < k0 || k1 > static_cast<int64_t>(d->size()))
    throw Error(what + ": dims [" + std::to_string(k0) + ", " + std::to_string(k1) + ") of a rank-" + std::to_string(d->size()) +
                " tensor");
  int64_t p = c;
  for (int64_t k = k0; k < k1; ++k) {
    const int64_t x = (*d)[static_cast<size_t>(k)];
    if (x < 0) return -1;
    if (x != 0 && p > std::numeric_limits<int64_t>::max() / x) throw Error(what + ": overflows");
    p *= x;
  }
  return p;
}

}  // namespace kiln

// Transposes that are byte copies under the GPU's nhwc layout (layout_transpose.h).
#include "ops/layout_transpose.h"

#include "ops/conv_layout.h"
#include "ops/fused_attrs.h"

namespace kiln {

const std::vector<int64_t>& toChannelsLastPerm() {
  static const std::vector<int64_t> p = {0, 2, 3, 1};
  return p;
}
const std::vector<int64_t>& fromChannelsLastPerm() {
  static const std::vector<int64_t> p = {0, 3, 1, 2};
  return p;
}

bool isLayoutCopyTranspose(const Attributes& a, size_t rank) {
  if (rank != 4 || !hasLayouts(a)) return false;
  const std::vector<int64_t> perm = a.getInts("perm");
  const int64_t in = layoutBlock(inLayoutName(a)), out = layoutBlock(outLayoutName(a));
  return (perm == toChannelsLastPerm() && in == kNhwcBlock && out == 1) ||
         (perm == fromChannelsLastPerm() && in == 1 && out == kNhwcBlock);
}

}  // namespace kiln

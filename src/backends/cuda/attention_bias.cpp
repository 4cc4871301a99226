#include "backends/cuda/attention_bias.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace kiln::cuda {

namespace {

//! `m` with leading 1s to rank 4; empty when its rank is not 1..4 or it does not broadcast to
//! `target` (its last dim may be shorter than the keys: ONNX short masks).
Dims mask4(const Dims& m, const Dims& target) {
  if (m.empty() || m.size() > 4 || target.size() != 4) return {};
  Dims d(4 - m.size(), 1);
  d.insert(d.end(), m.begin(), m.end());
  for (int i = 0; i < 3; ++i)
    if (d[i] != 1 && d[i] != target[i]) return {};
  if (d[3] <= 0 || d[3] > target[3]) return {};
  return d;
}

bool attends(const HostTensor& m, int64_t i) {
  const double v = m.getDouble(i);
  return m.type() == DataType::kBOOL ? v != 0 : v > kSdpaHiddenKey;  // NaN counts as hidden
}

}  // namespace

Dims sdpaBiasDims(const Dims& mask, const Dims& target) {
  const Dims d = mask4(mask, target);
  return d.empty() ? Dims{} : Dims{d[0], d[1], target[2], target[3]};
}

bool sdpaMaskLeavesRowsOpen(const HostTensor& mask, const Dims& target, bool causal) {
  const Dims d = mask4(mask.dims(), target);
  if (d.empty() || !mask.valid() || target[2] <= 0) return false;
  const int64_t len = d[3], rows = d[0] * d[1] * d[2];
  std::vector<int64_t> first(static_cast<size_t>(rows), len);  // each mask row's first open key
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < len; ++j)
      if (attends(mask, r * len + j)) {
        first[static_cast<size_t>(r)] = j;
        break;
      }
  for (int64_t bh = 0; bh < d[0] * d[1]; ++bh)
    for (int64_t i = 0; i < target[2]; ++i) {
      const int64_t visible = causal ? std::min(len, i + 1) : len;
      if (first[static_cast<size_t>(bh * d[2] + (d[2] == 1 ? 0 : i))] >= visible) return false;
    }
  return true;
}

HostTensor denseSdpaBias(const HostTensor& mask, const Dims& target, DataType type) {
  const Dims d = mask4(mask.dims(), target);
  if (d.empty() || (type != DataType::kHALF && type != DataType::kBF16)) throw Error("cuDNN SDPA bias: unsupported mask or type");
  const Dims out = sdpaBiasDims(mask.dims(), target);
  const int64_t sq = target[2], skv = target[3], len = d[3];
  HostTensor bias(type, out);
  auto* dst = bias.as<uint16_t>();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t bh = 0; bh < out[0] * out[1]; ++bh)
    for (int64_t i = 0; i < sq; ++i) {
      const int64_t row = (bh * d[2] + (d[2] == 1 ? 0 : i)) * len;
      for (int64_t j = 0; j < skv; ++j) {
        float v = -inf;
        if (j < len) {
          const double m = mask.getDouble(row + j);
          v = mask.type() == DataType::kBOOL ? (m != 0 ? 0.f : -inf) : static_cast<float>(m);
        }
        *dst++ = type == DataType::kHALF ? floatToHalf(v) : floatToBf16(v);
      }
    }
  return bias;
}

}  // namespace kiln::cuda

// Device copies of constant host tensors (weights, biases), shared by every kernel that uploads
// the same host buffer, with the same contents, in the same packing, to the same device: the
// tactics timed for one layer, the kernels of several optimization profiles, layers that share
// weights (ALBERT). A copy is freed with its last user.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "kiln/types.h"

namespace kiln::cuda {

//! One device allocation holding a (possibly repacked) constant.
struct DeviceCopy {
  void* ptr = nullptr;
  //! The source host tensor, held so that its buffer's address (part of the sharing key) cannot
  //! name another tensor while the copy lives.
  HostTensor source;
  ~DeviceCopy();
};

//! Repacks a constant for a kernel (e.g. KCRS weights to channels last); nullptr: as it is.
using Packer = std::function<HostTensor(const HostTensor&)>;

//! The device copy of `pack(source)` (of `source` when `pack` is empty). `packing` names the
//! repacking with every parameter it depends on ("" for none): it is part of the key, so two
//! kernels that repack the same weights differently get their own copies. Null for an invalid
//! or empty source.
std::shared_ptr<const DeviceCopy> sharedDeviceCopy(const HostTensor& source, const std::string& packing, const Packer& pack);

}  // namespace kiln::cuda

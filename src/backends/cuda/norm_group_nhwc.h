// GroupNormalization / InstanceNormalization on channels-last ("nhwc") tensors (tactics
// *_fp_cuda_nhwc, norm_group_nhwc.cu): the GPU layout pass keeps a CNN's conv chain NHWC through
// its GroupNorms (ResNet-GN, PoolFormer) instead of converting to NCHW around each of them.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "kiln/types.h"

namespace kiln::cuda {

struct GroupNormNhwcParams {
  DataType type = DataType::kHALF;
  int64_t n = 0, hw = 0, c = 0, groups = 1;
  float eps = 1e-5f;
  bool perGroupAffine = false;  //!< scale / bias hold one value per group
  int act = 0;                  //!< fused activation (ActKind), after the affine
  float actAlpha = 0.f, actBeta = 0.f;
  // Plan (planGroupNormNhwc): vectors of `vec` channels, a block of tx x ty threads (tx vectors
  // cover one pixel's channels, ty pixels at a time), `pixels` pixels per block, `chunks` blocks
  // per image.
  int vec = 1, tx = 1, ty = 1;
  int64_t pixels = 1, chunks = 1;
  //! One-pass plan (planGroupNormNhwcOnePass): pixel vectors each thread holds in registers across
  //! a grid-wide barrier (1, 2 or 4); 0: the two kernels (statistics, apply).
  int perThread = 0;
  //! Cluster plan (planGroupNormNhwcCluster): blocks of one image's thread-block cluster (its
  //! pixels in `pixels`-pixel chunks, held in shared memory across a cluster barrier), or 0.
  int cluster = 0;
  size_t clusterSmem = 0;  //!< dynamic shared memory per block of the cluster plan
  // Set at execute.
  const void* x = nullptr;
  void* y = nullptr;
  const void* scale = nullptr;
  const void* bias = nullptr;
  const void* residual = nullptr;  //!< fused residual (channels-last like Y), added before the activation
  //! Workspace: one float2 (sum, sum of squares) per image, chunk and group, then each image's and
  //! group's shift (read by the statistics pass: the apply pass may write over X).
  //! None for the cluster plan (its sums stay in the cluster's shared memory).
  size_t workspaceBytes() const {
    return cluster ? 0 : static_cast<size_t>(n * chunks * groups * 2 + n * groups) * sizeof(float);
  }
};

//! Whether the kernel takes C channels of `elemSize` bytes in G groups (one pixel's channel
//! vectors fit one block's row of threads).
bool groupNormNhwcFits(int64_t c, int64_t groups, size_t elemSize);
//! Fills p's plan from its shape (p.n, p.hw, p.c, p.groups, p.type).
void planGroupNormNhwc(GroupNormNhwcParams& p);
//! The one-pass plan when the tensor is small enough for a cooperative grid of resident blocks
//! (batch-1 CNN activations); otherwise the two-pass plan, and false.
bool planGroupNormNhwcOnePass(GroupNormNhwcParams& p);
//! The cluster plan when one image fits the shared memory of a thread-block cluster (Hopper and
//! later; batch-1 CNN activations up to ~1.6 MB in float16): one launch, X read once from global
//! memory, no grid-wide barrier. Otherwise the two-pass plan, and false.
bool planGroupNormNhwcCluster(GroupNormNhwcParams& p);
//! Runs p's plan (cluster, one pass or two).
void launchGroupNormNhwc(const GroupNormNhwcParams& p, void* workspace, cudaStream_t stream);
//! Runs a cluster plan (norm_group_nhwc_cluster.cu; launchGroupNormNhwc calls it).
void launchGroupNormNhwcCluster(const GroupNormNhwcParams& p, cudaStream_t stream);

}  // namespace kiln::cuda

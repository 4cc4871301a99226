// Fused attention kernels (attention_flash.cu) as the Attention tactics (attention_cuda.cpp) call
// them: Y = softmax(scale * Q K^T + mask [+ causal]) V for 4-D [B, H, S, D] inputs (K/V may have
// fewer heads: GQA/MQA), one pass over K and V with an online softmax, float32 accumulation.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kiln/types.h"

namespace kiln::cuda {

//! Mask element types the kernels read (additive float masks; bool: true = attend).
enum class FlashMask : int { kNone = 0, kFloat = 1, kHalf = 2, kBf16 = 3, kBool = 4 };

//! Element strides of one Q/K/V/O tensor: batch, head and row (the head dim is contiguous).
//! [B, H, S, D] tensors have {H*S*D, S*D, D}; 3-D [B, S, H*D] ones (heads interleaved in the
//! hidden dim, as the projections write them) have {S*H*D, D, H*D}: no transposes needed.
struct FlashStrides {
  int64_t b = 0, h = 0, row = 0;
};

struct FlashParams {
  const void* q = nullptr;  //!< [B, H, Sq, D] (by qs)
  const void* k = nullptr;  //!< [B, H / group, Skv, D] (by ks)
  const void* v = nullptr;  //!< [B, H / group, Skv, Dv] (by vs)
  void* o = nullptr;        //!< [B, H, Sq, Dv] (by os)
  FlashStrides qs, ks, vs, os;
  const void* mask = nullptr;
  FlashMask maskType = FlashMask::kNone;
  //! Element strides of the mask for batch, head and query row (0 where it broadcasts); the key
  //! index has stride 1 and keys at or past maskLen are masked out (ONNX short masks).
  int64_t maskStrideB = 0, maskStrideH = 0, maskStrideQ = 0;
  int maskLen = 0;
  int maskPeriodB = 0;  //!< > 0: batch b reads mask batch b % maskPeriodB (kiln_mask_batch_period)
  int batch = 0, heads = 0, sq = 0, skv = 0, d = 0, dv = 0;
  int group = 1;  //!< query heads per K/V head (GQA/MQA): query head h reads K/V head h / group
  float scaleLog2 = 0;  //!< scale * log2(e): scores are kept in the exp2 domain
  bool causal = false;  //!< key j is masked for query i when j > i
  //! The exp2-domain logit of a key masked by causal or a bool mask: -inf, or kiln_mask_fill *
  //! log2(e) (ops/attention_config.h): then a row with every key masked is uniform over all keys.
  float maskedLog2 = -INFINITY;
  //! The mask is bool key flags [B|1, 1, 1, Skv] (maskStrideH = maskStrideQ = 0, maskLen = Skv):
  //! the tensor-core kernel reads them once per K tile into shared memory.
  bool keyPad = false;
  bool vec = false;     //!< 16-byte aligned rows, strides and pointers: cp.async 16-byte copies
  //! Tensor-core kernel as a fallback (attention_cudnn.cpp's key-padding path): device ints per
  //! row of the key-flags mask (one when maskStrideB is 0); the blocks of a batch whose int is
  //! non-zero return at once (the primary kernel computed that batch).
  const int* skipWhen = nullptr;
};

//! Tensor-core kernel (float16/bfloat16, d == dv up to 128, run in tiles of 32/64/96/128 head
//! columns); `warps` = 2, 4 or 8 (32, 64 or 128 query rows per block). prepare* sets the kernel's
//! shared-memory limit (host call, no stream).
bool flashTcSupported(DataType t, int d, int dv, int warps);
void prepareFlashTc(DataType t, int d, int warps);
void launchFlashTc(const FlashParams& p, DataType t, int warps, cudaStream_t s);

//! SIMT kernel: float32/float16/bfloat16, d and dv up to kFlashSimtMaxD, float32 math.
constexpr int kFlashSimtMaxD = 128;
void launchFlashSimt(const FlashParams& p, DataType t, cudaStream_t s);

}  // namespace kiln::cuda

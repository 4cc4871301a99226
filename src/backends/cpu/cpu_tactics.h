// The CPU backend's kernel families: what each file exports (one KernelFactory per
// implementation) and the table that names them in timing-priority order (tactic_table.cpp).
// Every op also has its naive reference kernel (OpDef::ref), the layer's only tactic ("ref") when
// no table entry supports it.
#pragma once
#include <vector>

#include "backends/backend.h"

namespace kiln {

//! Every optimized CPU tactic, best guess first per op (tactic_table.cpp).
const std::vector<TacticDef>& cpuTacticTable();

namespace cpu {
// elementwise_cpu.cpp: float32 unary ops / broadcasting binary ops (the op picks the function)
KernelFactory unaryAvx2();
KernelFactory binaryAvx2();
// conv_depthwise.cpp, conv_pointwise.cpp, conv_grouped.cpp, conv_onednn.cpp (with oneDNN only), conv_im2col.cpp
KernelFactory depthwiseConvAvx2();
KernelFactory pointwiseConvAvx2();
KernelFactory groupedBlockedConvAvx2();  // conv_grouped.cpp: narrow groups in nChw8c / nChw16c
#ifdef KILN_HAVE_ONEDNN
KernelFactory oneDnnConv();
KernelFactory oneDnnConvBlocked();
#endif
KernelFactory im2colConv();
// pool_window.cpp, pool_direct.cpp
KernelFactory windowPool();  // MaxPool / AveragePool, plain or blocked layouts
KernelFactory globalAveragePoolAvx2();
KernelFactory globalMaxPoolAvx2();
// matmul_cpu.cpp
KernelFactory matMulGemmAvx2();
KernelFactory gemmAvx2();
#ifdef KILN_HAVE_ONEDNN
KernelFactory oneDnnMatMul();
KernelFactory oneDnnGemm();
#endif
#ifdef KILN_HAVE_ONEDNN
// qlinear_onednn.cpp: QLinearConv / QLinearMatMul through oneDNN's int8 primitives
KernelFactory oneDnnQLinearConv();
KernelFactory oneDnnQLinearMatMul();
#endif
// qlinear_conv_avx2.cpp: QLinearConv with weights in [-64, 64] through vpmaddubsw (exact)
KernelFactory qlinearConvAvx2();
// quantize_cpu.cpp: per-tensor QuantizeLinear float32 -> uint8 / int8 and DequantizeLinear back
KernelFactory quantizeLinearAvx2();
KernelFactory dequantizeLinearAvx2();
//! Backend::int8WeightLimit of this CPU (qlinear_onednn.cpp): 63 where oneDNN's int8 primitives sum
//! u8 x s8 pairs in saturating int16 (no VNNI), else 127; without oneDNN, 63 on AVX2 CPUs (for
//! q_linear_conv_int_avx2), else 127 (the reference is exact).
int int8WeightLimit();
// attention_cpu.cpp: the Attention op (the attention fusion's layer) as two GEMMs and a softmax
KernelFactory attentionGemmAvx2();
// normalization_cpu.cpp
KernelFactory softmaxAvx2();
KernelFactory logSoftmaxAvx2();
KernelFactory layerNormAvx2();
KernelFactory batchNormAvx2();
// group_norm_cpu.cpp (GroupNormalization and InstanceNormalization)
KernelFactory groupNormAvx2();
// reduction_cpu.cpp
KernelFactory reduceSumAvx2();
KernelFactory reduceMeanAvx2();
// shape_cpu.cpp: data movement of any element type
KernelFactory copyAnyType();  // Reshape-like ops: one memcpy (none when the runtime aliases)
KernelFactory transposeBlocked();
KernelFactory concatMemcpy();
KernelFactory sliceMemcpy();
KernelFactory gatherMemcpy();
// resize_cpu.cpp
KernelFactory resizeNchwAvx2();
// fused_cpu.cpp
KernelFactory pointwiseChainAvx2();
}  // namespace cpu

}  // namespace kiln

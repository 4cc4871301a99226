// Control flow ops (ops/control_flow.cpp): `If`, in the form the ONNX importer gives it.
#pragma once

namespace kiln {

class OpRegistry;
//! Registers `If`: inputs [cond, then_0..then_{n-1}, else_0..else_{n-1}], n outputs.
void registerControlFlowOps(OpRegistry& r);
//! Registers `Loop` as the importer leaves a loop it cannot unroll (ops/loop.cpp): inputs [M, cond,
//! carried..., outer...], its body a Network in the uint8 attribute `body`, run on the host.
void registerLoopOps(OpRegistry& r);

}  // namespace kiln

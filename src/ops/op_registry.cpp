#include "ops/op_registry.h"

#include <cstring>

#include "core/thread_pool.h"
#include "ops/control_flow.h"
#include "ops/op_util.h"

namespace kiln {

void registerMaxRoiPoolOps(OpRegistry& r);  // max_roi_pool.cpp
void registerFp8MatMulOps(OpRegistry& r);   // fp8_matmul.cpp

OpRegistry::OpRegistry() {
  registerElementwiseOps(*this);
  registerConvPoolOps(*this);
  registerMatMulOps(*this);
  registerNormalizationOps(*this);
  registerReductionOps(*this);
  registerShapeOps(*this);
  registerResizeOps(*this);
  registerSelectionOps(*this);
  registerRecurrentOps(*this);
  registerAttentionOps(*this);
  registerFusedOps(*this);
  registerLayoutOps(*this);
  registerPluginOps(*this);
  registerQuantizeOps(*this);
  registerGridSampleOps(*this);
  registerDetectionOps(*this);
  registerUniqueOps(*this);
  registerLossOps(*this);
  registerCausalConvOps(*this);
  registerLinearAttentionOps(*this);
  registerCol2ImOps(*this);
  registerCenterCropPadOps(*this);
  registerTensorScatterOps(*this);
  registerAffineGridOps(*this);
  registerSignalWindowOps(*this);
  registerDftOps(*this);
  registerDeformConvOps(*this);
  registerConvIntegerOps(*this);
  registerMaxUnpoolOps(*this);
  registerMaxRoiPoolOps(*this);
  registerFp8MatMulOps(*this);
  registerControlFlowOps(*this);
  registerLoopOps(*this);
  registerRandomOps(*this);
}

OpRegistry& OpRegistry::instance() {
  static OpRegistry r;
  return r;
}

void OpRegistry::add(OpDef def) {
  if (ops_.count(def.name)) throw Error("op registered twice: " + def.name);
  ops_[def.name] = std::move(def);
}

const OpDef* OpRegistry::find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> v;
  for (auto& [k, _] : ops_) v.push_back(k);
  return v;
}

void inferLayer(LayerDesc& layer) {
  const OpDef* def = OpRegistry::instance().find(layer.op);
  if (!def || !def->infer) throw Error("no op definition for '" + layer.op + "' (layer '" + layer.name + "')");
  try {
    def->infer(layer);
  } catch (const UnsupportedError& e) {
    std::string m = e.what();
    if (m.rfind("layer '", 0) == 0) throw;
    throw UnsupportedError("layer '" + layer.name + "' (" + layer.op + "): " + m);
  } catch (const Error& e) {
    std::string m = e.what();
    if (m.rfind("layer '", 0) == 0) throw;
    throw Error("layer '" + layer.name + "' (" + layer.op + "): " + m);
  }
}

bool allInputsKnown(const LayerDesc& layer) {
  for (size_t i = 0; i < layer.inputs.size(); ++i)
    if (layer.present(i) && !layer.inputs[i].value.valid()) return false;
  return true;
}

void evaluateOnHost(LayerDesc& layer) {
  const OpDef* def = OpRegistry::instance().find(layer.op);
  if (!def || !def->ref) throw Error("cannot evaluate '" + layer.op + "' on the host");
  // Reference kernels compute float16/bfloat16 in float32, as the CPU engine does (its builder
  // casts around them): widen the inputs, evaluate, round the outputs back. Ops that move raw
  // elements (anyType) take every type as it is.
  bool half = false;
  for (size_t i = 0; i < layer.inputs.size(); ++i) half = half || (layer.present(i) && isHalfType(layer.inputs[i].type));
  if (half && !def->anyType) {
    LayerDesc wide = layer;
    for (size_t i = 0; i < wide.inputs.size(); ++i)
      if (wide.present(i) && isHalfType(wide.inputs[i].type)) {
        const HostTensor& h = layer.inputs[i].value;
        wide.inputs[i].value = HostTensor(DataType::kFLOAT, h.dims());
        widenToFloat(TensorView{const_cast<void*>(h.data()), h.type(), h.dims(), h.count()}, wide.inputs[i].value.as<float>());
        wide.inputs[i].type = DataType::kFLOAT;
      }
    for (auto& o : wide.outputs) {
      o.value = HostTensor();
      if (isHalfType(o.type)) o.type = DataType::kFLOAT;
    }
    evaluateOnHost(wide);
    for (size_t k = 0; k < layer.outputs.size(); ++k) {
      TensorDesc& o = layer.outputs[k];
      if (!o.value.valid()) o.value = HostTensor(o.type, o.dims);
      const HostTensor& w = wide.outputs[k].value;
      if (isHalfType(o.type)) narrowFromFloat(w.as<float>(), TensorView{o.value.data(), o.type, o.dims, o.value.count()});
      else std::memcpy(o.value.data(), w.data(), o.value.bytes());
    }
    return;
  }
  static ThreadPool serial(1);
  KernelIO io;
  io.pool = &serial;
  for (size_t i = 0; i < layer.inputs.size(); ++i) {
    TensorView v;
    if (layer.present(i)) {
      auto& t = layer.inputs[i].value;
      v.data = const_cast<void*>(t.data());
      v.type = t.type();
      v.dims = t.dims();
      v.count = t.count();
    }
    io.in.push_back(v);
  }
  for (auto& o : layer.outputs) {
    if (!o.value.valid()) o.value = HostTensor(o.type, o.dims);
    io.out.push_back(TensorView{o.value.data(), o.type, o.dims, o.value.count()});
  }
  def->ref(layer, io);
}

}  // namespace kiln

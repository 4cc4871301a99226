// The network definition: kiln's graph IR and the public API to build one by hand.
// Layers carry an op name with ONNX semantics (latest opset): "Conv", "Relu", "MatMul", ...
// The ONNX importer normalizes older opsets to that form, so one op definition serves all.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "kiln/types.h"

namespace kiln {

using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                               std::vector<std::string>, HostTensor>;

//! Named attributes of a layer (ONNX attribute names).
class Attributes {
 public:
  bool has(const std::string& n) const { return map_.count(n) != 0; }
  void set(const std::string& n, AttrValue v) { map_[n] = std::move(v); }
  void erase(const std::string& n) { map_.erase(n); }
  int64_t getInt(const std::string& n, int64_t dflt) const;
  float getFloat(const std::string& n, float dflt) const;
  std::string getString(const std::string& n, const std::string& dflt) const;
  std::vector<int64_t> getInts(const std::string& n, const std::vector<int64_t>& dflt = {}) const;
  std::vector<float> getFloats(const std::string& n, const std::vector<float>& dflt = {}) const;
  std::vector<std::string> getStrings(const std::string& n) const;
  const HostTensor* getTensor(const std::string& n) const;
  const std::map<std::string, AttrValue>& all() const { return map_; }

 private:
  std::map<std::string, AttrValue> map_;
};

class Layer;

//! A tensor of the network. `dims` may hold -1 for dynamic dims. `value` is set for constants
//! (weights, folded shape values).
class Tensor {
 public:
  std::string name;
  DataType type = DataType::kFLOAT;
  Dims dims;
  bool dimsKnown = false;  //!< false when even the rank is unknown (before shape inference)
  HostTensor value;        //!< valid() for constants
  Layer* producer = nullptr;
  bool isInput = false;
  bool isOutput = false;
  bool isConstant() const { return value.valid(); }
};

//! One operation. `inputs` may hold nullptr for an omitted optional input.
class Layer {
 public:
  std::string name;
  std::string op;      //!< op name (ONNX op_type for built-ins)
  std::string domain;  //!< "" for built-in ops; a plugin namespace otherwise
  Attributes attrs;
  std::vector<Tensor*> inputs;
  std::vector<Tensor*> outputs;
  //! Names of the original layers/ops fused into this one (for --dumpLayerInfo).
  std::vector<std::string> fusedOps;
  //! Optional precision constraint (honoured when the builder config obeys constraints).
  std::optional<DataType> precision;
  //! Optional type constraint on output 0 (--layerOutputTypes; honoured like `precision`).
  std::optional<DataType> outputType;
};

//! The network: owns its tensors and layers.
class Network {
 public:
  Network();
  ~Network();
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  Tensor* addInput(const std::string& name, DataType type, const Dims& dims);
  void markOutput(Tensor* t);
  void unmarkOutput(Tensor* t);
  Tensor* addConstant(const std::string& name, const HostTensor& value);
  //! Adds a layer of op `op` with the given inputs, creating `nbOutputs` output tensors.
  Layer* addLayer(const std::string& op, const std::vector<Tensor*>& inputs, int nbOutputs,
                  Attributes attrs = {}, const std::string& name = "");
  //! Typed helpers over addLayer for hand-built networks.
  Layer* addActivation(Tensor* in, const std::string& op, float alpha = 0.f, float beta = 0.f);
  Layer* addElementWise(Tensor* a, Tensor* b, const std::string& op);  // Add, Sub, Mul, Div, ...
  Layer* addMatMul(Tensor* a, Tensor* b);
  Layer* addConvolution(Tensor* in, const HostTensor& weights, const HostTensor& bias,
                        const std::vector<int64_t>& strides, const std::vector<int64_t>& pads,
                        int64_t group = 1);
  Layer* addSoftmax(Tensor* in, int64_t axis);

  const std::vector<Tensor*>& inputs() const { return inputs_; }
  const std::vector<Tensor*>& outputs() const { return outputs_; }
  Tensor* findTensor(const std::string& name) const;
  int nbLayers() const { return static_cast<int>(layers_.size()); }
  Layer* layer(int i) const { return layers_[i].get(); }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  const std::vector<std::unique_ptr<Tensor>>& tensors() const { return tensors_; }

  //! Runs shape/type inference over all layers (in order), folding host-computable values.
  //! Throws kiln::Error naming the layer on failure.
  void inferShapes();
  //! Sorts layers topologically; throws kiln::Error if the graph has a cycle.
  void topoSort();
  //! Removes layers whose outputs are not needed to compute the network outputs, and unused tensors.
  void removeDeadLayers();
  //! Removes `l` (its outputs must be unused or rewired first).
  void removeLayer(Layer* l);
  //! Replaces every use of `from` (layer inputs and network outputs) by `to`.
  void replaceUses(Tensor* from, Tensor* to);
  //! Layers consuming tensor t.
  std::vector<Layer*> consumers(const Tensor* t) const;
  std::string uniqueName(const std::string& base);
  //! Renames a tensor; throws if the name is taken.
  void renameTensor(Tensor* t, const std::string& name);
  Tensor* newTensor(const std::string& name);

 private:
  std::vector<std::unique_ptr<Tensor>> tensors_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Tensor*> inputs_;
  std::vector<Tensor*> outputs_;
  std::map<std::string, Tensor*> byName_;
  int64_t counter_ = 0;
};

}  // namespace kiln

// Symbolic dims of a dynamic network, for the passes: which unknown (-1) dims are the same dim,
// and which shape values are the same expression of the input dims.
//
// Every dim of a dynamic network is a function of the input dims the optimization profiles
// allow. Instead of an expression type with a rule per op, a symbolic dim is identified by its
// values at a fixed set of sample input shapes (each profile's opt, max and min, and points
// between min and max drawn per input dim, so that two input dims never move together): every
// tensor's dims, and the values of small shape tensors (Shape -> Gather -> Concat ...), are
// inferred at each sample with the ops' own shape inference and host evaluation, the same code
// the context runs when shapes change. Two dims are the same symbolic dim when they agree at
// every sample; a dim is a constant when it has one value at all of them. Shape expressions are
// small polynomials and clamps of the input dims, and the samples include each range's ends, so
// a coincidence at every sample is not expected; the layers a pass rewrites on this ground are
// re-inferred by the context at every shape it runs.
#pragma once
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/layer_desc.h"
#include "kiln/network.h"

namespace kiln {

//! Concrete dims for every dynamic network input, one map per sample. Empty: a static network.
using InputSamples = std::vector<std::map<std::string, Dims>>;

//! The samples at which every layer of `net` infers (its input dims agree): a sample that moves
//! one of two dims the network needs equal is a shape it cannot run at, and says nothing.
InputSamples keepRunnableSamples(const Network& net, InputSamples samples);

class SymbolicDims {
 public:
  //! Nothing is computed until asked; memoized per tensor, so the object is valid while the
  //! network's tensors keep their meaning (a pass's rewrites; not across removeDeadLayers).
  explicit SymbolicDims(const InputSamples& samples);
  size_t nbSamples() const { return samples_.size(); }
  //! t at sample s: type, dims (-1 where not inferable there), value when computable on the host.
  const TensorDesc& at(const Tensor* t, size_t s);
  //! Dim ka of a and dim kb of b are the same symbolic dim (known at every sample, equal at each).
  bool sameDim(const Tensor* a, size_t ka, const Tensor* b, size_t kb);
  //! a and b have the same rank and the same symbolic dims.
  bool sameDims(const Tensor* a, const Tensor* b);
  //! The value of dim k of t when it is the same at every sample, else -1.
  int64_t constantDim(const Tensor* t, size_t k);
  //! Whether t's value is known at every sample.
  bool valueKnown(const Tensor* t);
  //! Whether every layer inferred at sample s so far (all of them after `at` on every output).
  bool inferredAt(size_t s) const { return !failed_[s]; }
  //! t's value when it is known and the same at every sample (a constant of the profiles), else null.
  const HostTensor* constantValue(const Tensor* t);

 private:
  void compute(const Tensor* t);
  InputSamples samples_;
  std::vector<bool> failed_;  // per sample: some layer's inference failed there
  std::unordered_map<const Tensor*, std::vector<TensorDesc>> memo_;  // per tensor, per sample
};

}  // namespace kiln

// Recurrent ops (RNN, GRU, LSTM): shape inference and errors; reference kernels vs a NumPy model
// of the ONNX spec (tests/unit/gen_recurrent_attention_ref.py writes recurrent_ref.inc; the cases
// with layout 0 are also checked against ONNX Runtime there).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "kiln/network.h"
#include "ops/op_registry.h"
#include "poison.h"
#include "ref_case.h"

using namespace kiln;
using namespace kiln::test;

namespace {
#include "recurrent_ref.inc"

}  // namespace

// ---------------------------------------------------------------------------------------------
// Reference kernels vs NumPy

TEST(RecurrentRef, MatchesNumpyModel) {
  ASSERT_EQ(kRecurrentCases.size(), 10u);
  for (const RefCase& c : kRecurrentCases) checkRefCase(c);
}

TEST(RecurrentRef, SequenceLengthsZeroThePadding) {
  // Case 0 has sequence_lens [4, 2, 0]: Y is zero past each length, Y_h/Y_c zero for length 0.
  const RefCase& c = kRecurrentCases[0];
  ASSERT_STREQ(c.name, "lstm_bidirectional_all_inputs");
  LayerCase l = fromRef(c);
  auto outs = l.run();
  const Dims& y = outs[0].dims();  // [seq, dirs, batch, hidden]
  for (int64_t t = 0; t < y[0]; ++t)
    for (int64_t d = 0; d < y[1]; ++d)
      for (int64_t h = 0; h < y[3]; ++h) {
        EXPECT_EQ(outs[0].getDouble(((t * y[1] + d) * y[2] + 2) * y[3] + h), 0.0);
        if (t >= 2) EXPECT_EQ(outs[0].getDouble(((t * y[1] + d) * y[2] + 1) * y[3] + h), 0.0);
      }
  for (int64_t d = 0; d < 2; ++d)
    for (int64_t h = 0; h < 2; ++h) {
      EXPECT_EQ(outs[1].getDouble((d * 3 + 2) * 2 + h), 0.0);
      EXPECT_EQ(outs[2].getDouble((d * 3 + 2) * 2 + h), 0.0);
    }
}

TEST(RecurrentRef, OmittedOutputsAreNotWritten) {
  // Only Y_h requested (Y passed as an empty view): the kernel must skip Y.
  const RefCase& c = kRecurrentCases[4];
  LayerCase l = fromRef(c);
  l.infer();
  auto kernel = referenceTactic("GRU").create(l.desc);
  std::unique_ptr<KernelState> state;
  kernel->reshape(l.desc, state);
  KernelIO io;
  io.pool = getBackend(DeviceType::kCPU, 1)->pool();
  for (auto& t : l.data) io.in.push_back(t.valid() ? TensorView{t.data(), t.type(), t.dims(), t.count()} : TensorView{});
  HostTensor yh = kiln::test::poisoned(l.desc.outputs[1].type, l.desc.outputs[1].dims);
  io.out = {TensorView{}, TensorView{yh.data(), yh.type(), yh.dims(), yh.count()}};
  kernel->execute(io, state.get());
  for (int64_t i = 0; i < yh.count(); ++i)
    EXPECT_NEAR(yh.getDouble(i), c.outputs[1].data[static_cast<size_t>(i)], 2e-6 + 2e-5 * std::fabs(c.outputs[1].data[static_cast<size_t>(i)]));
}

// ---------------------------------------------------------------------------------------------
// Shape inference

TEST(RecurrentInfer, LstmShapesForBothLayouts) {
  LayerCase c("LSTM", 3);
  c.shape(DataType::kFLOAT, {7, -1, 5}).shape(DataType::kFLOAT, {2, 16, 5}).shape(DataType::kFLOAT, {2, 16, 4});
  c.attr("direction", std::string("bidirectional"));
  c.infer();
  EXPECT_EQ(c.desc.outputs[0].dims, (Dims{7, 2, -1, 4}));
  EXPECT_EQ(c.desc.outputs[1].dims, (Dims{2, -1, 4}));
  EXPECT_EQ(c.desc.outputs[2].dims, (Dims{2, -1, 4}));

  LayerCase b("LSTM", 2);
  b.shape(DataType::kFLOAT, {3, 7, 5}).shape(DataType::kFLOAT, {1, 16, 5}).shape(DataType::kFLOAT, {1, 16, 4});
  b.attr("layout", int64_t(1)).attr("hidden_size", int64_t(4));
  b.infer();
  EXPECT_EQ(b.desc.outputs[0].dims, (Dims{3, 7, 1, 4}));
  EXPECT_EQ(b.desc.outputs[1].dims, (Dims{3, 1, 4}));
}

TEST(RecurrentInfer, GruAndRnnHiddenFromWeights) {
  LayerCase g("GRU", 2);
  g.shape(DataType::kDOUBLE, {2, 3, 4}).shape(DataType::kDOUBLE, {1, 9, 4}).shape(DataType::kDOUBLE, {1, 9, 3});
  g.infer();
  EXPECT_EQ(g.desc.outputs[0].type, DataType::kDOUBLE);
  EXPECT_EQ(g.desc.outputs[0].dims, (Dims{2, 1, 3, 3}));
  LayerCase r("RNN", 1);
  r.shape(DataType::kFLOAT, {2, 3, 4}).shape(DataType::kFLOAT, {1, 6, 4}).shape(DataType::kFLOAT, {1, 6, 6});
  r.attr("direction", std::string("reverse"));
  r.infer();
  EXPECT_EQ(r.desc.outputs[0].dims, (Dims{2, 1, 3, 6}));
}

// ---------------------------------------------------------------------------------------------
// Errors

LayerCase lstm(const Dims& x, const Dims& w, const Dims& r) {
  LayerCase c("LSTM", 3);
  c.shape(DataType::kFLOAT, x).shape(DataType::kFLOAT, w).shape(DataType::kFLOAT, r);
  return c;
}

TEST(RecurrentErrors, BadRanksAndShapes) {
  auto a = lstm({3, 5}, {1, 8, 5}, {1, 8, 2});
  expectInferError(a, "X must have rank 3");
  auto b = lstm({3, 2, 5}, {1, 8, 4}, {1, 8, 2});
  expectInferError(b, "W has shape");
  auto c = lstm({3, 2, 5}, {1, 8, 5}, {1, 9, 2});
  expectInferError(c, "R has shape");
  auto d = lstm({3, 2, 5}, {1, 8, 5}, {1, 8, 2});
  d.attr("hidden_size", int64_t(3));
  expectInferError(d, "has shape");
  auto e = lstm({3, 2, 5}, {1, 8, 5}, {1, 8, 2});
  e.attr("direction", std::string("bidirectional"));
  expectInferError(e, "W has shape");
  auto f = lstm({3, 2, 5}, {1, 8, 5}, {1, 8, 2});
  f.shape(DataType::kFLOAT, {1, 8});
  expectInferError(f, "B has shape");
  auto g = lstm({3, 2, 5}, {1, 8, 5}, {1, 8, 2});
  g.missing().missing().shape(DataType::kFLOAT, {1, 3, 2});
  expectInferError(g, "initial_h has shape");
}

TEST(RecurrentErrors, BadAttributes) {
  auto a = lstm({3, 2, 5}, {1, 8, 5}, {1, 8, 2});
  a.attr("direction", std::string("sideways"));
  expectInferError(a, "direction");
  auto b = lstm({3, 2, 5}, {1, 8, 5}, {1, 8, 2});
  b.attr("layout", int64_t(2));
  expectInferError(b, "layout");
  auto c = lstm({3, 2, 5}, {1, 8, 5}, {1, 8, 2});
  c.attr("clip", -1.f);
  expectInferError(c, "clip");
  auto d = lstm({3, 2, 5}, {1, 8, 5}, {1, 8, 2});
  d.attr("activations", std::vector<std::string>{"Sigmoid", "Tanh"});
  expectInferError(d, "activations must list 3");
  auto e = lstm({3, 2, 5}, {2, 8, 5}, {2, 8, 2});
  e.attr("direction", std::string("bidirectional")).attr("activations", std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"});
  expectInferError(e, "activations must list 6");
  auto f = lstm({3, 2, 5}, {1, 8, 5}, {1, 8, 2});
  f.attr("activations", std::vector<std::string>{"Sigmoid", "Swish", "Tanh"});
  EXPECT_THROW(f.infer(), UnsupportedError);
  auto g = lstm({3, 2, 5}, {1, 8, 5}, {1, 8, 2});
  g.attr("activation_alpha", std::vector<float>{0.5f});
  expectInferError(g, "more values than the activation functions use");
  LayerCase h("GRU", 3);
  h.shape(DataType::kFLOAT, {3, 2, 5}).shape(DataType::kFLOAT, {1, 6, 5}).shape(DataType::kFLOAT, {1, 6, 2});
  expectInferError(h, "at most 2 outputs");
}

TEST(RecurrentErrors, TypesAndAbsurdSizes) {
  LayerCase a("RNN", 2);
  a.shape(DataType::kINT32, {3, 2, 5}).shape(DataType::kINT32, {1, 4, 5}).shape(DataType::kINT32, {1, 4, 4});
  expectInferError(a, "floating-point");
  LayerCase b("RNN", 2);
  b.shape(DataType::kFLOAT, {3, 2, 5}).shape(DataType::kDOUBLE, {1, 4, 5}).shape(DataType::kFLOAT, {1, 4, 4});
  expectInferError(b, "type");
  LayerCase c("RNN", 2);
  c.shape(DataType::kFLOAT, {int64_t(1) << 40, int64_t(1) << 40, 5}).shape(DataType::kFLOAT, {1, 4, 5}).shape(DataType::kFLOAT, {1, 4, 4});
  EXPECT_THROW(c.infer(), Error);
  LayerCase d("RNN", 2);
  d.shape(DataType::kFLOAT, {3, 2, 5}).shape(DataType::kFLOAT, {1, -1, 5}).shape(DataType::kFLOAT, {1, -1, -1});
  d.attr("hidden_size", int64_t(1) << 62);
  EXPECT_THROW(d.infer(), Error);
  LayerCase e("RNN", 2);
  e.shape(DataType::kFLOAT, {3, 2, 5}).shape(DataType::kFLOAT, {1, 4, 5}).shape(DataType::kFLOAT, {1, 4, 4}).missing();
  e.shape(DataType::kFLOAT, {2});
  expectInferError(e, "sequence_lens must be int32 or int64");
}

TEST(RecurrentErrors, SequenceLengthOutOfRangeAtRunTime) {
  LayerCase c("RNN", 2);
  HostTensor x(DataType::kFLOAT, {3, 2, 2}), w(DataType::kFLOAT, {1, 2, 2}), r(DataType::kFLOAT, {1, 2, 2});
  HostTensor lens(DataType::kINT32, {2});
  lens.as<int32_t>()[0] = 2;
  lens.as<int32_t>()[1] = 4;  // > seq_length 3
  c.input(x).input(w).input(r).missing().input(lens);
  try {
    c.run();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sequence_lens[1] = 4"), std::string::npos) << e.what();
  }
}

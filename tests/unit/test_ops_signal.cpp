// Signal-processing ops: DFT, STFT, HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix.
// Shape inference and its errors; reference kernels vs NumPy (numpy.fft, the window formulas)
// checked against onnx.reference and ONNX Runtime (tests/unit/gen_state_image_signal_ref.py writes
// signal_ops_ref.inc; MelWeightMatrix's values are onnx.reference's, which ONNX Runtime agrees with).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ref_case.h"

using namespace kiln;
using namespace kiln::test;

namespace {
#include "signal_ops_ref.inc"

HostTensor scalar(int64_t v) {
  HostTensor t(DataType::kINT64, {});
  t.as<int64_t>()[0] = v;
  return t;
}

}  // namespace

TEST(SignalOpsRef, MatchesNumpyModel) {
  ASSERT_EQ(kSignalOpCases.size(), 12u);
  for (const RefCase& c : kSignalOpCases) checkRefCase(c);
}

TEST(Dft, InferShapesAndErrors) {
  LayerCase rfft("DFT");
  rfft.shape(DataType::kFLOAT, {2, 10, 3, 1}).input(scalar(8), true).input(scalar(1), true).attr("onesided", int64_t(1));
  rfft.infer();
  EXPECT_EQ(rfft.desc.outputs[0].dims, (Dims{2, 5, 3, 2}));

  LayerCase irfft("DFT");  // default length 2 (n - 1), a real output
  irfft.shape(DataType::kFLOAT, {4, 6, 2}).missing().input(scalar(-2), true).attr("inverse", int64_t(1)).attr("onesided", int64_t(1));
  irfft.infer();
  EXPECT_EQ(irfft.desc.outputs[0].dims, (Dims{4, 10, 1}));

  LayerCase runtimeAxis("DFT");  // the axis known only at run time: only the rank is known
  runtimeAxis.shape(DataType::kFLOAT, {1, 10, 10, 1}).missing().shape(DataType::kINT64, {});
  runtimeAxis.infer();
  EXPECT_EQ(runtimeAxis.desc.outputs[0].dims, (Dims{-1, -1, -1, 2}));

  LayerCase complexAxis("DFT");
  complexAxis.shape(DataType::kFLOAT, {3, 4, 2}).missing().input(scalar(-1), true);
  expectInferError(complexAxis, "axis -1 must be in [-rank, -2] or [0, rank - 2]");

  LayerCase lastDim("DFT");
  lastDim.shape(DataType::kFLOAT, {3, 4, 3});
  expectInferError(lastDim, "the last axis must be 1 (real) or 2 (complex)");
}

TEST(Stft, InferShapesAndErrors) {
  LayerCase c("STFT");
  c.shape(DataType::kFLOAT, {2, 100, 1}).input(scalar(10), true).shape(DataType::kFLOAT, {16});
  c.infer();
  EXPECT_EQ(c.desc.outputs[0].dims, (Dims{2, 9, 9, 2}));  // (100 - 16) / 10 + 1 frames, 16 / 2 + 1 bins

  LayerCase twoSided("STFT");
  twoSided.shape(DataType::kFLOAT, {1, 20, 2}).input(scalar(5), true).missing().input(scalar(8), true).attr("onesided", int64_t(0));
  twoSided.infer();
  EXPECT_EQ(twoSided.desc.outputs[0].dims, (Dims{1, 3, 8, 2}));

  LayerCase mismatch("STFT");
  mismatch.shape(DataType::kFLOAT, {1, 20, 1}).input(scalar(5), true).shape(DataType::kFLOAT, {6}).input(scalar(8), true);
  expectInferError(mismatch, "the window's length differs from frame_length");
}

TEST(SignalWindows, InferAndOutputType) {
  LayerCase known("HammingWindow");
  known.input(scalar(12), true).attr("output_datatype", int64_t(11));  // double
  known.infer();
  EXPECT_EQ(known.desc.outputs[0].dims, (Dims{12}));
  EXPECT_EQ(known.desc.outputs[0].type, DataType::kDOUBLE);

  LayerCase runtime("BlackmanWindow");
  runtime.shape(DataType::kINT32, {});
  runtime.infer();
  EXPECT_EQ(runtime.desc.outputs[0].dims, (Dims{-1}));

  LayerCase mel("MelWeightMatrix");
  mel.input(scalar(8), true).input(scalar(64), true).shape(DataType::kINT64, {}).shape(DataType::kFLOAT, {}).shape(DataType::kFLOAT, {});
  mel.infer();
  EXPECT_EQ(mel.desc.outputs[0].dims, (Dims{33, 8}));
}

// Image geometry ops: Col2Im, CenterCropPad, AffineGrid, DeformConv, ConvInteger, MaxUnpool. Shape inference and its errors;
// reference kernels vs NumPy models of the ONNX specs (tests/unit/gen_state_image_signal_ref.py
// writes image_ops_ref.inc; each case also agrees with onnx.reference and, where ONNX Runtime has
// the form (not per-channel ConvInteger zero points, nor the AffineGrid and MaxUnpool edge cases
// where the two differ), ONNX Runtime there).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ref_case.h"

using namespace kiln;
using namespace kiln::test;

namespace {
#include "image_ops_ref.inc"

HostTensor int64s(std::vector<int64_t> v) {
  HostTensor t(DataType::kINT64, {static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.as<int64_t>()[i] = v[i];
  return t;
}

}  // namespace

TEST(ImageOpsRef, MatchesNumpyModel) {
  ASSERT_EQ(kImageOpCases.size(), 15u);
  for (const RefCase& c : kImageOpCases) checkRefCase(c);
}

TEST(Col2Im, InferShapesAndErrors) {
  LayerCase c("Col2Im");
  c.shape(DataType::kFLOAT, {2, 12, 6}).input(int64s({3, 4}), true).input(int64s({2, 2}), true);
  c.infer();
  EXPECT_EQ(c.desc.outputs[0].dims, (Dims{2, 3, 3, 4}));  // 12 / (2 * 2) channels; (3-1) * (4-1) = 6 blocks

  LayerCase unknown("Col2Im");  // image_shape known only at run time: the rank still is
  unknown.shape(DataType::kFLOAT, {1, 4, 4}).shape(DataType::kINT64, {2}).input(int64s({2, 2}), true);
  unknown.infer();
  EXPECT_EQ(unknown.desc.outputs[0].dims, (Dims{-1, -1, -1, -1}));

  LayerCase blocks("Col2Im");
  blocks.shape(DataType::kFLOAT, {1, 4, 5}).input(int64s({3, 3}), true).input(int64s({2, 2}), true);
  expectInferError(blocks, "must be the number of blocks, 4");

  LayerCase big("Col2Im");
  big.shape(DataType::kFLOAT, {1, 4, 1}).input(int64s({2, 2}), true).input(int64s({3, 2}), true);
  expectInferError(big, "the block is larger than the padded image");
}

TEST(CenterCropPad, InferShapesAndErrors) {
  LayerCase c("CenterCropPad");
  c.shape(DataType::kHALF, {3, 10, 8}).input(int64s({4, 12}), true).attr("axes", std::vector<int64_t>{1, -1});
  c.infer();
  EXPECT_EQ(c.desc.outputs[0].dims, (Dims{3, 4, 12}));
  EXPECT_EQ(c.desc.outputs[0].type, DataType::kHALF);  // moves raw elements of any type

  LayerCase repeated("CenterCropPad");
  repeated.shape(DataType::kFLOAT, {3, 10}).input(int64s({4, 4}), true).attr("axes", std::vector<int64_t>{1, -1});
  expectInferError(repeated, "is repeated");

  LayerCase count("CenterCropPad");
  count.shape(DataType::kFLOAT, {3, 10}).input(int64s({4}), true);
  expectInferError(count, "shape has 1 values for 2 axes");
}

TEST(AffineGrid, InferShapesAndErrors) {
  LayerCase c("AffineGrid");
  c.shape(DataType::kFLOAT, {2, 3, 4}).input(int64s({2, 1, 5, 6, 7}), true);
  c.infer();
  EXPECT_EQ(c.desc.outputs[0].dims, (Dims{2, 5, 6, 7, 3}));

  LayerCase runtime("AffineGrid");  // size known at run time: rank and batch from theta
  runtime.shape(DataType::kFLOAT, {2, 2, 3}).shape(DataType::kINT64, {4});
  runtime.infer();
  EXPECT_EQ(runtime.desc.outputs[0].dims, (Dims{2, -1, -1, 2}));

  LayerCase mismatch("AffineGrid");
  mismatch.shape(DataType::kFLOAT, {2, 2, 3}).input(int64s({2, 1, 5, 6, 7}), true);
  expectInferError(mismatch, "does not match a 3-D size");
}

TEST(DeformConv, InferShapesAndErrors) {
  LayerCase c("DeformConv");
  c.shape(DataType::kFLOAT, {1, 4, 7, 6}).shape(DataType::kFLOAT, {6, 2, 3, 3}).shape(DataType::kFLOAT, {1, 36, 4, 2});
  c.attr("group", int64_t(2)).attr("offset_group", int64_t(2)).attr("strides", std::vector<int64_t>{2, 2}).attr(
      "pads", std::vector<int64_t>{1, 0, 1, 0});
  c.infer();
  EXPECT_EQ(c.desc.outputs[0].dims, (Dims{1, 6, 4, 2}));

  LayerCase offsets("DeformConv");
  offsets.shape(DataType::kFLOAT, {1, 1, 5, 5}).shape(DataType::kFLOAT, {1, 1, 2, 2}).shape(DataType::kFLOAT, {1, 4, 4, 4});
  expectInferError(offsets, "offset must be (N, offset_group * kH * kW * 2, oH, oW)");

  LayerCase volumetric("DeformConv");  // kiln supports two spatial axes
  volumetric.shape(DataType::kFLOAT, {1, 1, 4, 4, 4}).shape(DataType::kFLOAT, {1, 1, 2, 2, 2}).shape(DataType::kFLOAT, {1, 24, 3, 3, 3});
  try {
    volumetric.infer();
    ADD_FAILURE() << "a 3-D DeformConv should be unsupported";
  } catch (const UnsupportedError& e) {
    EXPECT_NE(std::string(e.what()).find("2 spatial axes"), std::string::npos) << e.what();
  }
}

TEST(ConvInteger, InferShapesAndErrors) {
  LayerCase c("ConvInteger");
  c.shape(DataType::kUINT8, {1, 4, 9, 9}).shape(DataType::kUINT8, {6, 2, 3, 3}).shape(DataType::kUINT8, {}).shape(DataType::kUINT8, {6});
  c.attr("group", int64_t(2)).attr("strides", std::vector<int64_t>{2, 2}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  c.infer();
  EXPECT_EQ(c.desc.outputs[0].dims, (Dims{1, 6, 5, 5}));
  EXPECT_EQ(c.desc.outputs[0].type, DataType::kINT32);

  LayerCase floats("ConvInteger");
  floats.shape(DataType::kFLOAT, {1, 1, 3, 3}).shape(DataType::kFLOAT, {1, 1, 2, 2});
  expectInferError(floats, "x must be int8 or uint8");

  LayerCase zeroPoints("ConvInteger");
  zeroPoints.shape(DataType::kINT8, {1, 1, 3, 3}).shape(DataType::kINT8, {2, 1, 2, 2}).missing().shape(DataType::kINT8, {3});
  expectInferError(zeroPoints, "one value per output channel");
}

TEST(MaxUnpool, InferShapesAndErrors) {
  LayerCase c("MaxUnpool");
  c.shape(DataType::kFLOAT, {1, 3, 4, 5}).shape(DataType::kINT64, {1, 3, 4, 5});
  c.attr("kernel_shape", std::vector<int64_t>{3, 2}).attr("strides", std::vector<int64_t>{2, 2});
  c.infer();
  EXPECT_EQ(c.desc.outputs[0].dims, (Dims{1, 3, 9, 10}));

  LayerCase smaller("MaxUnpool");
  smaller.shape(DataType::kFLOAT, {1, 1, 2, 2}).shape(DataType::kINT64, {1, 1, 2, 2}).input(int64s({1, 1, 3, 4}), true);
  smaller.attr("kernel_shape", std::vector<int64_t>{2, 2}).attr("strides", std::vector<int64_t>{2, 2});
  expectInferError(smaller, "is smaller than the unpooled shape");

  // An index outside the unpooled tensor is refused when the layer runs.
  HostTensor x(DataType::kFLOAT, {1, 1, 1, 1}), i(DataType::kINT64, {1, 1, 1, 1});
  i.as<int64_t>()[0] = 4;
  LayerCase outside("MaxUnpool");
  outside.input(x).input(i).attr("kernel_shape", std::vector<int64_t>{2, 2});
  EXPECT_THROW(outside.runRef(), Error);
}

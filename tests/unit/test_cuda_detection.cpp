// CUDA RoiAlign (backends/cuda/roi_align_cuda.cu) against the CPU reference kernel (ops/detection.cpp),
// whose semantics the ONNX node tests check: both coordinate modes, avg and max, fixed and adaptive
// sampling grids, rois partly off the map, float32 and float16; and the CUDA If (if_cuda.cu) that
// data-dependent detectors' post-processing needs. Runs on a GPU machine only.
#include "tactic_cases.h"

namespace kiln {
namespace {

TEST(CudaDetection, RoiAlignMatchesTheReference) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  // [x1, y1, x2, y2] in input coordinates (spatial_scale 0.5 maps them onto the 10x12 map); the
  // last one reaches past the map's right and bottom edges.
  const std::vector<double> rois = {0, 0, 8, 6, 3.5, 2.25, 15, 13, 1, 1, 1.5, 1.5, 10, 4, 22, 18, 18, 14, 30, 26};
  for (const char* mode : {"avg", "max"})
    for (const char* ct : {"half_pixel", "output_half_pixel"})
      for (int64_t sampling : {0, 2})
        for (DataType t : {DataType::kFLOAT, DataType::kHALF}) {
          Attributes a;
          a.set("mode", std::string(mode));
          a.set("coordinate_transformation_mode", std::string(ct));
          a.set("output_height", int64_t(3));
          a.set("output_width", int64_t(4));
          a.set("sampling_ratio", sampling);
          a.set("spatial_scale", 0.5f);
          test::OpCase c = test::makeOpCase(
              "RoiAlign",
              {test::uniformOfType({2, 3, 10, 12}, t, 7, -2.0, 2.0), test::floatValues(t, {5, 4}, rois),
               test::i64Values({5}, {0, 1, 1, 0, 1})},
              a, 3);
          const double tol = t == DataType::kFLOAT ? 1e-5 : 4e-3;
          test::checkAllTactics(*gpu, c, std::string("RoiAlign ") + mode + " " + ct + " sampling " + std::to_string(sampling), tol, tol);
        }
}

// A run-time If: the condition on the device (branches of equal dims: a select kernel) or read back
// (branches of different dims, as the context does for a data-dependent If: a copy of the taken one).
TEST(CudaDetection, IfPassesTheTakenBranchOn) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  for (bool flag : {true, false}) {
    HostTensor cond(DataType::kBOOL, {});
    cond.as<uint8_t>()[0] = flag;
    const HostTensor a = test::uniformOfType({3, 5}, DataType::kFLOAT, 1, -1.0, 1.0);
    const HostTensor b = test::uniformOfType({3, 5}, DataType::kFLOAT, 2, -1.0, 1.0);
    test::checkAllTactics(*gpu, test::makeOpCase("If", {cond, a, b}, {}, 3), std::string("If on the device ") + (flag ? "then" : "else"));
    const HostTensor small = test::i64Values({2}, {7, -7});
    const HostTensor big = test::i64Values({4}, {1, 2, 3, 4});
    test::OpCase c = test::makeOpCase("If", {cond, small, big}, {}, 1);  // the condition's value is known
    test::checkAllTactics(*gpu, c, std::string("If read back ") + (flag ? "then" : "else"));
  }
}

}  // namespace
}  // namespace kiln

// The CUDA backend's tactic of last resort (backends/cuda/host_fallback.h): layers no CUDA kernel
// runs execute their reference kernel on the host between copies, in stream order. The values
// must be the reference's exactly; tactics() must not offer it (the passes that ask whether a
// kernel exists would be misled), only fallbackTactics().
#include <cstring>

#include "backends/cuda/host_fallback.h"
#include "op_test_util.h"

using namespace kiln;

namespace {

HostTensor doubles(const Dims& d, uint32_t seed) { return test::uniformOfType(d, DataType::kDOUBLE, seed, -2.0, 2.0); }

HostTensor scalarInt(DataType t, int64_t v) {
  HostTensor h(t, {});
  if (t == DataType::kINT32) h.as<int32_t>()[0] = static_cast<int32_t>(v);
  else h.as<int64_t>()[0] = v;
  return h;
}

void expectFallbackMatchesReference(const test::OpCase& c, const std::string& what) {
  auto gpu = getBackend(DeviceType::kGPU, 0);
  EXPECT_TRUE(test::tacticNames(*gpu, c).empty()) << what << ": a CUDA kernel exists now; pick another op for this test";
  const LayerDesc d = test::describe(c, false);
  const auto fallback = gpu->fallbackTactics(d);
  ASSERT_EQ(fallback.size(), 1u) << what;
  EXPECT_EQ(fallback[0].name, cuda::kHostFallbackTactic);
  const auto ref = test::runReference(c);
  const auto got = test::runTactic(*gpu, cuda::kHostFallbackTactic, c, &ref);
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t k = 0; k < ref.size(); ++k) {
    ASSERT_EQ(got[k].bytes(), ref[k].bytes()) << what;
    EXPECT_EQ(std::memcmp(got[k].data(), ref[k].data(), ref[k].bytes()), 0) << what << ": output " << k << " differs";
  }
}

}  // namespace

TEST(CudaHostFallback, RunsTheReferenceKernel) {
  KILN_REQUIRE_GPU();
  {  // float64 scan with an int32 axis
    test::OpCase c;
    c.op = "CumProd";
    c.inputs = {doubles({3, 7}, 1), scalarInt(DataType::kINT32, 1)};
    c.constant = {false, true};
    expectFallbackMatchesReference(c, "CumProd float64");
  }
  {  // a loss with an int64 target and a weight
    test::OpCase c;
    c.op = "NegativeLogLikelihoodLoss";
    c.attrs.set("reduction", std::string("mean"));
    HostTensor target(DataType::kINT64, {4});
    for (int i = 0; i < 4; ++i) target.as<int64_t>()[i] = (i * 3) % 5;
    c.inputs = {test::uniformOfType({4, 5}, DataType::kFLOAT, 2, -3.0, 0.0), target, test::uniformOfType({5}, DataType::kFLOAT, 3, 0.5, 1.5)};
    expectFallbackMatchesReference(c, "NegativeLogLikelihoodLoss");
  }
  {  // an output whose size is a value input (known at the concrete shapes)
    test::OpCase c;
    c.op = "HannWindow";
    c.inputs = {scalarInt(DataType::kINT32, 10)};
    c.constant = {true};
    expectFallbackMatchesReference(c, "HannWindow");
  }
}

TEST(CudaHostFallback, LeavesOutWhatItCannotRun) {
  KILN_REQUIRE_GPU();
  auto gpu = getBackend(DeviceType::kGPU, 0);
  // Output sizes that depend on the data (the context's own host path runs those).
  test::OpCase nz = test::unaryCase("NonZero", test::uniformOfType({4}, DataType::kFLOAT, 4, -1.0, 1.0));
  EXPECT_TRUE(gpu->fallbackTactics(test::describe(nz, false)).empty());
  // Layers with layout attributes (only tactics that read them may take those).
  test::OpCase cp;
  cp.op = "CumProd";
  cp.inputs = {doubles({1, 8, 2, 2}, 5), scalarInt(DataType::kINT32, 1)};
  cp.constant = {false, true};
  cp.attrs.set("kiln_layout_in", std::string("nhwc"));
  cp.attrs.set("kiln_layout_out", std::string("nhwc"));
  EXPECT_TRUE(gpu->fallbackTactics(test::describe(cp, false)).empty());
}

// An out-of-tree C++ program against an installed kiln: builds y = Relu(x) by hand, runs it on
// the CPU and checks the result. Exit 0 on success.
#include <kiln/kiln.h>

#include <cstdio>
#include <cstring>

int main() {
  kiln::Network net;
  kiln::Tensor* x = net.addInput("x", kiln::DataType::kFLOAT, {1, 4});
  kiln::Tensor* y = net.addActivation(x, "Relu")->outputs[0];
  y->name = "y";
  net.markOutput(y);
  kiln::BuilderConfig cfg;
  cfg.setDevice(kiln::DeviceType::kCPU);
  cfg.setThreads(1);
  auto engine = kiln::Builder().build(net, cfg);
  auto ctx = engine->createExecutionContext();
  float in[4] = {-1.f, 2.f, -3.f, 4.f}, out[4] = {};
  ctx->setTensorAddress("x", in);
  ctx->setTensorAddress("y", out);
  ctx->enqueue();
  const float want[4] = {0.f, 2.f, 0.f, 4.f};
  if (std::memcmp(out, want, sizeof out) != 0) {
    std::printf("wrong result: %g %g %g %g\n", out[0], out[1], out[2], out[3]);
    return 1;
  }
  std::printf("kiln %s: Relu ok\n", KILN_VERSION_STRING);
  return 0;
}

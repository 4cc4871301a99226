// Probe of cuDNN 9's int8 convolution graphs on this GPU (session 33, H100: bench/results/int8-h100.md):
// for ResNet-50's layer shapes at batch 256, builds and times every engine config of
//   fp16 conv + bias + ReLU -> fp16 (what kiln's FP16 engines run), int8 conv -> int32, and int8 conv
//   * scale + bias (+ ReLU) -> int8 / fp16 / fp32 (q_linear_conv_int_cudnn's graphs),
// and checks the int8 plans against a host reference on two small cases.
//   FE=$(pip show nvidia-cudnn-frontend | sed -n "s/Location: //p")/include
//   nvcc -std=c++17 -O2 -x cu -arch=sm_90 -I$FE bench/micro/cudnn_int8_probe.cpp -o /tmp/probe -lcudnn -lnvrtc -lcuda
#include <cudnn_frontend.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cmath>
#include <vector>
#include <random>
#include <string>
#include <algorithm>
namespace fe = cudnn_frontend;
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1);} } while (0)
struct L { const char* name; int64_t n, c, h, w, k, r, pad, stride; };
enum Uid { X = 1, W, S, B, Y, R };
std::vector<int64_t> nhwc(int64_t n, int64_t c, int64_t h, int64_t w) { return {c * h * w, 1, w * c, c}; }
// kind: 0 fp16 conv+bias+relu -> half; 1 int8 conv -> int32; 2 int8 conv*scale+bias relu -> int8; 3 same -> half; 4 int8 -> float out no relu
std::shared_ptr<fe::graph::Graph> make(const L& l, int kind, int64_t oh, int64_t ow) {
  auto g = std::make_shared<fe::graph::Graph>();
  bool i8 = kind != 0;
  g->set_io_data_type(i8 ? fe::DataType_t::INT8 : fe::DataType_t::HALF)
      .set_intermediate_data_type(i8 ? fe::DataType_t::INT32 : fe::DataType_t::FLOAT)
      .set_compute_data_type(i8 ? fe::DataType_t::INT32 : fe::DataType_t::FLOAT);
  auto t = [&](const char* nm, int64_t uid, std::vector<int64_t> d, std::vector<int64_t> s, fe::DataType_t dt) {
    return g->tensor(fe::graph::Tensor_attributes().set_name(nm).set_uid(uid).set_dim(d).set_stride(s).set_data_type(dt));
  };
  auto dt = i8 ? fe::DataType_t::INT8 : fe::DataType_t::HALF;
  auto x = t("X", X, {l.n, l.c, l.h, l.w}, nhwc(l.n, l.c, l.h, l.w), dt);
  auto w = t("W", W, {l.k, l.c, l.r, l.r}, nhwc(l.k, l.c, l.r, l.r), dt);
  auto y = g->conv_fprop(x, w, fe::graph::Conv_fprop_attributes().set_name("conv").set_padding({l.pad, l.pad}).set_stride({l.stride, l.stride}).set_dilation({1, 1}));
  if (kind == 1) { y->set_output(true).set_uid(Y).set_data_type(fe::DataType_t::INT32); return g; }
  if (i8) {
    y->set_data_type(fe::DataType_t::INT32);
    auto s = t("S", S, {1, l.k, 1, 1}, {l.k, 1, 1, 1}, fe::DataType_t::FLOAT);
    y = g->pointwise(y, s, fe::graph::Pointwise_attributes().set_name("scale").set_mode(fe::PointwiseMode_t::MUL).set_compute_data_type(fe::DataType_t::FLOAT));
    y->set_data_type(fe::DataType_t::FLOAT);
  }
  auto b = t("B", B, {1, l.k, 1, 1}, {l.k, 1, 1, 1}, i8 ? fe::DataType_t::FLOAT : fe::DataType_t::HALF);
  y = g->pointwise(y, b, fe::graph::Pointwise_attributes().set_name("bias").set_mode(fe::PointwiseMode_t::ADD).set_compute_data_type(fe::DataType_t::FLOAT));
  if (i8) y->set_data_type(fe::DataType_t::FLOAT);
  if (kind != 4) {
    y = g->pointwise(y, fe::graph::Pointwise_attributes().set_name("relu").set_mode(fe::PointwiseMode_t::RELU_FWD).set_compute_data_type(fe::DataType_t::FLOAT));
  }
  y->set_output(true).set_uid(Y).set_dim({l.n, l.k, oh, ow}).set_stride(nhwc(l.n, l.k, oh, ow));
  y->set_data_type(kind == 2 ? fe::DataType_t::INT8 : kind == 3 ? fe::DataType_t::HALF : kind == 4 ? fe::DataType_t::FLOAT : fe::DataType_t::HALF);
  return g;
}
const char* kName[] = {"fp16 conv+bias+relu->f16", "i8 conv->i32", "i8 conv*s+b relu->i8", "i8 conv*s+b relu->f16", "i8 conv*s+b ->f32"};
int main(int argc, char** argv) {
  cudnnHandle_t h; cudnnCreate(&h);
  cudaStream_t st; CK(cudaStreamCreate(&st)); cudnnSetStream(h, st);
  printf("cudnn %zu\n", cudnnGetVersion());
  std::vector<L> layers = {{"chk3x3", 2, 64, 12, 12, 32, 3, 1, 1}, {"chk1x1s2", 2, 64, 12, 12, 32, 1, 0, 2},
                           {"r50 56x56 64->64 3x3", 256, 64, 56, 56, 64, 3, 1, 1}, {"r50 56x56 256->64 1x1", 256, 256, 56, 56, 64, 1, 0, 1},
                           {"r50 56x56 64->256 1x1", 256, 64, 56, 56, 256, 1, 0, 1}, {"r50 28x28 128->128 3x3", 256, 128, 28, 28, 128, 3, 1, 1},
                           {"r50 14x14 256->256 3x3", 256, 256, 14, 14, 256, 3, 1, 1}, {"r50 7x7 512->512 3x3", 256, 512, 7, 7, 512, 3, 1, 1},
                           {"r50 56x56 256->512 1x1 s2", 256, 256, 56, 56, 512, 1, 0, 2}};
  std::mt19937 rng(7);
  void* ws = nullptr; size_t wsSize = size_t(1) << 30; CK(cudaMalloc(&ws, wsSize));
  for (auto& l : layers) {
    const int64_t oh = (l.h + 2 * l.pad - l.r) / l.stride + 1, ow = (l.w + 2 * l.pad - l.r) / l.stride + 1;
    const int64_t nx = l.n * l.h * l.w * l.c, nw = l.k * l.r * l.r * l.c, ny = l.n * oh * ow * l.k;
    std::vector<int8_t> hx(nx), hw(nw); std::vector<float> hs(l.k), hb(l.k);
    for (auto& v : hx) v = int8_t(int(rng() % 41) - 20);
    for (auto& v : hw) v = int8_t(int(rng() % 41) - 20);
    for (int64_t k = 0; k < l.k; ++k) { hs[k] = 0.0005f + 0.0001f * (k % 7); hb[k] = (float(k % 11) - 5.f) * 0.7f; }
    std::vector<uint16_t> hx16(nx), hw16(nw), hb16(l.k);
    auto toHalf = [](float f) { __half_raw r; r = __half(f); return r.x; };
    for (int64_t i = 0; i < nx; ++i) hx16[i] = toHalf(hx[i] * 0.05f);
    for (int64_t i = 0; i < nw; ++i) hw16[i] = toHalf(hw[i] * 0.01f);
    for (int64_t k = 0; k < l.k; ++k) hb16[k] = toHalf(hb[k]);
    void *dx, *dw, *ds, *db, *dy, *dx16, *dw16, *db16;
    CK(cudaMalloc(&dx, nx)); CK(cudaMalloc(&dw, nw)); CK(cudaMalloc(&ds, 4 * l.k)); CK(cudaMalloc(&db, 4 * l.k));
    CK(cudaMalloc(&dy, 4 * ny)); CK(cudaMalloc(&dx16, 2 * nx)); CK(cudaMalloc(&dw16, 2 * nw)); CK(cudaMalloc(&db16, 2 * l.k));
    CK(cudaMemcpy(dx, hx.data(), nx, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dw, hw.data(), nw, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(ds, hs.data(), 4 * l.k, cudaMemcpyHostToDevice)); CK(cudaMemcpy(db, hb.data(), 4 * l.k, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dx16, hx16.data(), 2 * nx, cudaMemcpyHostToDevice)); CK(cudaMemcpy(dw16, hw16.data(), 2 * nw, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db16, hb16.data(), 2 * l.k, cudaMemcpyHostToDevice));
    // host reference accumulators (small cases only)
    std::vector<int32_t> acc;
    if (l.n <= 2) {
      acc.assign(ny, 0);
      for (int64_t n = 0; n < l.n; ++n) for (int64_t p = 0; p < oh; ++p) for (int64_t q = 0; q < ow; ++q) for (int64_t k = 0; k < l.k; ++k) {
        int32_t a = 0;
        for (int64_t r = 0; r < l.r; ++r) for (int64_t s = 0; s < l.r; ++s) {
          int64_t ih = p * l.stride - l.pad + r, iw = q * l.stride - l.pad + s;
          if (ih < 0 || iw < 0 || ih >= l.h || iw >= l.w) continue;
          for (int64_t c = 0; c < l.c; ++c) a += int32_t(hx[((n * l.h + ih) * l.w + iw) * l.c + c]) * hw[((k * l.r + r) * l.r + s) * l.c + c];
        }
        acc[((n * oh + p) * ow + q) * l.k + k] = a;
      }
    }
    for (int kind = 0; kind < 5; ++kind) {
      auto g = make(l, kind, oh, ow);
      auto e = g->validate();
      if (e.is_good()) e = g->build_operation_graph(h);
      if (e.is_good()) e = g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
      if (e.is_good()) e = g->check_support(h);
      if (e.is_bad()) { printf("%-28s %-26s REFUSED: %s\n", l.name, kName[kind], e.get_message().c_str()); continue; }
      g->build_plans(h, fe::BuildPlanPolicy_t::ALL);
      int64_t plans = g->get_execution_plan_count();
      float best = 1e9; int64_t bestI = -1; int built = 0;
      std::unordered_map<int64_t, void*> pack;
      pack[X] = kind ? dx : dx16; pack[W] = kind ? dw : dw16; pack[Y] = dy;
      if (kind >= 2) pack[S] = ds;
      if (kind != 1) pack[B] = kind ? db : db16;
      for (int64_t i = 0; i < plans; ++i) {
        int64_t need = 0;
        if (g->get_workspace_size_plan_at_index(i, need).is_bad() || need > int64_t(wsSize)) continue;
        if (g->execute_plan_at_index(h, pack, ws, i).is_bad()) continue;
        if (cudaStreamSynchronize(st) != cudaSuccess) { printf("  plan %ld faulted\n", (long)i); cudaGetLastError(); continue; }
        ++built;
        cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
        for (int it = 0; it < 3; ++it) g->execute_plan_at_index(h, pack, ws, i);
        cudaEventRecord(a, st);
        const int iters = l.n > 2 ? 20 : 2;
        for (int it = 0; it < iters; ++it) g->execute_plan_at_index(h, pack, ws, i);
        cudaEventRecord(b, st); cudaEventSynchronize(b);
        float ms; cudaEventElapsedTime(&ms, a, b); ms /= iters;
        if (ms < best) best = ms, bestI = i;
        // correctness of this plan on the small cases
        if (!acc.empty() && kind >= 1) {
          double maxd = 0; int64_t bad = 0;
          std::vector<char> out(4 * ny); CK(cudaMemcpy(out.data(), dy, 4 * ny, cudaMemcpyDeviceToHost));
          for (int64_t j = 0; j < ny; ++j) {
            int64_t k = j % l.k; double ref, got;
            double f = acc[j] * double(hs[k]) + hb[k];
            if (kind != 4) f = std::max(f, 0.0);
            if (kind == 1) { ref = acc[j]; got = reinterpret_cast<int32_t*>(out.data())[j]; }
            else if (kind == 2) { ref = std::min(127.0, std::max(-128.0, std::nearbyint(f))); got = reinterpret_cast<int8_t*>(out.data())[j]; }
            else if (kind == 3) { ref = f; got = float(reinterpret_cast<__half*>(out.data())[j]); }
            else { ref = f; got = reinterpret_cast<float*>(out.data())[j]; }
            double d = std::fabs(ref - got); maxd = std::max(maxd, d); if (d > (kind == 3 ? 0.01 * std::fabs(ref) + 0.01 : kind == 4 ? 1e-3 : 0.0)) ++bad;
          }
          std::string pn; g->get_plan_name_at_index(i, pn); printf("  plan %ld (%s): max diff %.4g, %ld of %ld off\n", (long)i, pn.c_str(), maxd, (long)bad, (long)ny);
        }
      }
      std::string nm; if (bestI >= 0) g->get_plan_name_at_index(bestI, nm);
      double tops = 2.0 * ny * l.c * l.r * l.r / (best * 1e-3) / 1e12;
      printf("%-28s %-26s plans %ld built+ran %d best %.4f ms (%.0f TOPS) %s\n", l.name, kName[kind], (long)plans, built, best, tops, nm.c_str());
      fflush(stdout);
    }
    cudaFree(dx); cudaFree(dw); cudaFree(ds); cudaFree(db); cudaFree(dy); cudaFree(dx16); cudaFree(dw16); cudaFree(db16);
  }
  return 0;
}

// The CUDA backend: device memory, streams and events, asynchronous copies, and the CUDA kernel
// inventory. One backend per CUDA device (getBackend's device index); the calls that create
// device resources make that device current first (cudaSetDevice is per host thread).
#include <cudnn.h>
#include <cublasLt.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <string>

#include "backends/cuda/cuda_tactics.h"
#include "backends/cuda/host_fallback.h"
#include "backends/cuda/cuda_util.h"
#include "backends/cuda/pinned_memory.h"
#include "backends/cuda/device_peak_cuda.h"
#include "plugin/plugin_layer.h"

namespace kiln {

namespace cuda {
void throwCudaError(cudaError_t e, const char* what, const char* file, int line) {
  const char* base = std::strrchr(file, '/');
  throw Error(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") in " + what + " at " +
              (base ? base + 1 : file) + ":" + std::to_string(line));
}
}  // namespace cuda

namespace {

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    makeCurrent();
    cudaDeviceProp p;
    KILN_CUDA_CHECK(cudaGetDeviceProperties(&p, device_));
    // Library versions are part of the fingerprint: tactics (cuDNN engine configs, cuBLASLt
    // algorithms) are only valid for the versions they were timed with.
    fingerprint_ = "cuda:sm_" + std::to_string(p.major) + std::to_string(p.minor) + ":" + p.name + ":" +
                   std::to_string(p.multiProcessorCount) + "sm:cudnn" + std::to_string(cudnnGetVersion()) + ":cublasLt" +
                   std::to_string(cublasLtGetVersion());
  }
  DeviceType device() const override { return DeviceType::kGPU; }
  std::string fingerprint() const override { return fingerprint_; }
  std::vector<Tactic> tactics(const LayerDesc& layer) const override {
    if (layer.op == kPluginOp) return pluginTactics(layer, DeviceType::kGPU);
    return tacticsFromTable(cudaTacticTable(), layer);
  }
  std::vector<Tactic> fallbackTactics(const LayerDesc& layer) const override { return cuda::hostFallbackTactics(layer); }
  void makeCurrent() override { KILN_CUDA_CHECK(cudaSetDevice(device_)); }
  int deviceIndex() const override { return device_; }
  void fill(void* p, int value, size_t bytes, void* stream) override {
    KILN_CUDA_CHECK(cudaMemsetAsync(p, value, bytes, static_cast<cudaStream_t>(stream)));
  }
  DevicePeak peak() const override { return cuda::devicePeak(device_); }
  void* allocate(size_t bytes) override {
    makeCurrent();
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 256));
    if (e != cudaSuccess) {
      cudaGetLastError();
      throw Error("out of GPU memory allocating " + std::to_string(bytes) + " bytes (" + cudaGetErrorString(e) + ")");
    }
    return p;
  }
  void release(void* p) override { cudaFree(p); }
  void copyToDevice(void* dst, const void* src, size_t bytes, void* stream) override { copy(dst, src, bytes, stream); }
  void copyToHost(void* dst, const void* src, size_t bytes, void* stream) override { copy(dst, src, bytes, stream); }
  void synchronize(void* stream) override {
    if (stream) {
      KILN_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
    } else {
      makeCurrent();
      KILN_CUDA_CHECK(cudaDeviceSynchronize());
    }
  }
  void* createStream() override {
    makeCurrent();
    cudaStream_t s;
    KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return s;
  }
  void destroyStream(void* s) override {
    if (s) cudaStreamDestroy(static_cast<cudaStream_t>(s));
  }
  void* createEvent(bool timing) override {
    makeCurrent();
    cudaEvent_t e;
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    return e;
  }
  void destroyEvent(void* e) override {
    if (e) cudaEventDestroy(static_cast<cudaEvent_t>(e));
  }
  void recordEvent(void* e, void* s) override { KILN_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(e), static_cast<cudaStream_t>(s))); }
  void streamWaitEvent(void* s, void* e) override {
    KILN_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s), static_cast<cudaEvent_t>(e), 0));
  }
  float timeBetween(void* a, void* b) override {
    float ms = 0;
    KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(a), static_cast<cudaEvent_t>(b)));
    return ms;
  }
  float timeMs(const std::function<void(void*)>& launch, int iterations) override {
    // Events on a private stream: per-run device time without host overhead.
    cudaStream_t s = static_cast<cudaStream_t>(createStream());
    cudaEvent_t a = static_cast<cudaEvent_t>(createEvent(true)), b = static_cast<cudaEvent_t>(createEvent(true));
    std::vector<float> t;
    try {
      launch(s);
      KILN_CUDA_CHECK(cudaStreamSynchronize(s));
      for (int i = 0; i < std::max(1, iterations); ++i) {
        KILN_CUDA_CHECK(cudaEventRecord(a, s));
        launch(s);
        KILN_CUDA_CHECK(cudaEventRecord(b, s));
        KILN_CUDA_CHECK(cudaEventSynchronize(b));
        float ms = 0;
        KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
      }
    } catch (...) {
      cudaStreamSynchronize(s);
      destroyEvent(a), destroyEvent(b), destroyStream(s);
      throw;
    }
    destroyEvent(a), destroyEvent(b), destroyStream(s);
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
  void* captureGraph(void* stream, const std::function<void()>& body, std::string* why) override {
    if (!stream) {
      if (why) *why = "graph capture needs a non-default stream";
      return nullptr;
    }
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    KILN_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    std::string failure;
    try {
      body();
    } catch (const Error& e) {
      failure = e.what();
    }
    cudaGraph_t graph = nullptr;
    cudaError_t end = cudaStreamEndCapture(s, &graph);
    if (!failure.empty() || end != cudaSuccess || !graph) {
      cudaGetLastError();
      if (graph) cudaGraphDestroy(graph);
      if (why) *why = failure.empty() ? std::string("capture failed: ") + cudaGetErrorString(end) : failure;
      return nullptr;
    }
    cudaGraphExec_t exec = nullptr;
    cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (inst != cudaSuccess) {
      cudaGetLastError();
      if (why) *why = std::string("graph instantiation failed: ") + cudaGetErrorString(inst);
      return nullptr;
    }
    return exec;
  }
  void launchGraph(void* graph, void* stream) override {
    KILN_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), static_cast<cudaStream_t>(stream)));
  }
  void destroyGraph(void* graph) override {
    if (graph) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
  }
  void* allocateHost(size_t bytes) override {
    makeCurrent();
    return cuda::allocatePinned(bytes);
  }
  void releaseHost(void* p) override { cuda::releasePinned(p); }

 private:
  static void copy(void* dst, const void* src, size_t bytes, void* stream) {
    if (!bytes) return;
    if (stream) KILN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
    else KILN_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault));
  }
  int device_;
  std::string fingerprint_;
};

}  // namespace

int cudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

int cudaCurrentDevice() {
  int device = 0;
  KILN_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

std::shared_ptr<Backend> makeCudaBackend(int deviceIndex) { return std::make_shared<CudaBackend>(deviceIndex); }

namespace cuda {
int smCount() {
  static std::array<std::atomic<int>, 64> cache{};  // per device; 0 = not read yet
  const int device = cudaCurrentDevice();
  std::atomic<int>* slot = device < static_cast<int>(cache.size()) ? &cache[device] : nullptr;
  if (slot)
    if (int n = slot->load(std::memory_order_relaxed)) return n;
  int n = 0;
  KILN_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
  if (slot) slot->store(n, std::memory_order_relaxed);
  return n;
}
}  // namespace cuda

}  // namespace kiln

#include "builder/tactic_timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <unistd.h>

#include <string>
#include <variant>

namespace kiln {

namespace {

// Device buffers for timing one layer at one set of shapes, shared by every tactic timed there
// (allocated when the first tactic is timed, the workspace grown to the largest tactic's). Inputs
// hold the known values or zeros, filled on the device (zeros are valid for every op, e.g. as
// gather indices, and do not change the speed of float kernels); kernels never write their
// inputs, so each tactic sees the same values. (Per-tactic buffers zeroed on the host and copied
// made EfficientNet-B0's build at batch 128 take 101 s on the H100: 300 MB tensors, ~8 tactics.)
// Attention's bool masks are all true instead: the usual mask keeps most keys, and a kernel
// whose fast path depends on the flags (cuDNN SDPA's key padding) is timed on that path.
struct TimingBuffers {
  Backend& backend;
  std::vector<void*> owned;
  KernelIO io;
  void* workspace = nullptr;
  size_t workspaceBytes = 0;
  TimingBuffers(Backend& b, const LayerDesc& concrete) : backend(b) {
    try {
      for (size_t i = 0; i < concrete.inputs.size(); ++i) {
        const bool keptMask = concrete.op == "Attention" && concrete.inputs[i].type == DataType::kBOOL;
        io.in.push_back(make(concrete.inputs[i], concrete.present(i), keptMask ? 1 : 0));
      }
      for (auto& o : concrete.outputs) io.out.push_back(make(o, true, 0));
      io.pool = backend.pool();
      backend.synchronize(nullptr);
    } catch (...) {
      releaseAll();
      throw;
    }
  }
  ~TimingBuffers() { releaseAll(); }
  TimingBuffers(const TimingBuffers&) = delete;
  TimingBuffers& operator=(const TimingBuffers&) = delete;
  //! The io for a kernel that needs `ws` bytes of workspace.
  KernelIO& forWorkspace(size_t ws) {
    if (ws > workspaceBytes) {
      if (workspace) backend.release(workspace);
      workspace = nullptr;
      workspaceBytes = 0;
      workspace = backend.allocate(ws);
      workspaceBytes = ws;
    }
    io.workspace = ws ? workspace : nullptr;
    io.workspaceSize = ws ? workspaceBytes : 0;
    return io;
  }

 private:
  void releaseAll() {
    for (void* p : owned) backend.release(p);
    owned.clear();
    if (workspace) backend.release(workspace);
    workspace = nullptr;
  }
  TensorView make(const TensorDesc& d, bool present, uint8_t fill) {
    TensorView v;
    if (!present) return v;
    v.type = d.type;
    v.dims = d.dims;
    v.count = volume(d.dims);
    size_t bytes = static_cast<size_t>(v.count) * elementSize(d.type);
    void* p = backend.allocate(std::max<size_t>(bytes, 64));
    owned.push_back(p);
    if (d.value.valid()) backend.copyToDevice(p, d.value.data(), bytes, nullptr);
    else backend.fill(p, fill, bytes, nullptr);
    v.data = p;
    return v;
  }
};

// Timing runs a layer for real: refuse opt shapes whose tensors cannot fit in this machine.
void checkTimingFootprint(const LayerDesc& d) {
  static const uint64_t kPhys = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t bytes = 0;
  auto add = [&](const TensorDesc& t) {
    uint64_t b = static_cast<uint64_t>(volume(t.dims)) * elementSize(t.type);
    bytes = bytes + b < bytes ? UINT64_MAX : bytes + b;
  };
  for (size_t k = 0; k < d.inputs.size(); ++k)
    if (d.present(k)) add(d.inputs[k]);
  for (auto& o : d.outputs) add(o);
  if (bytes > kPhys / 2)
    throw Error("layer '" + d.name + "' needs " + std::to_string(bytes >> 20) + " MiB at the opt shapes, which exceeds what this machine's memory can time; " +
                "use smaller --optShapes");
}

//! `bufs`: the layer's buffers at `concrete`'s shapes (made on first use).
float timeKernel(Backend& backend, const Kernel& k, const LayerDesc& concrete, int runs, std::unique_ptr<TimingBuffers>& bufs) {
  std::unique_ptr<KernelState> state;
  size_t ws = k.reshape(concrete, state);
  if (!bufs) bufs = std::make_unique<TimingBuffers>(backend, concrete);
  KernelIO& io = bufs->forWorkspace(ws);
  k.execute(io, state.get());  // warm-up
  backend.synchronize(nullptr);
  // The fastest run: other work on the machine only ever adds time to a run, so the minimum is
  // the estimate least disturbed by it. (Built with the median of 3 on this 2-core machine under
  // other helpers' compile jobs, MobileNetV3's depthwise layers got im2col, ~20x slower there.)
  float best = -1.f;
  for (int r = 0; r < std::max(1, runs); ++r) {
    auto t0 = std::chrono::steady_clock::now();
    k.execute(io, state.get());
    backend.synchronize(nullptr);
    const float ms = std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - t0).count();
    best = best < 0.f ? ms : std::min(best, ms);
  }
  return best;
}

// What determines a layer's kernel speeds: op, attributes (tensors by type and dims), and the
// types, concrete dims and constness of its tensors. Weights' values are left out.
std::string layerSignature(const LayerDesc& build, const LayerDesc& concrete) {
  std::string s = concrete.op + "|";
  auto dims = [](const Dims& d) {
    std::string o;
    for (int64_t x : d) o += std::to_string(x) + "x";
    return o;
  };
  for (const auto& [name, v] : build.attrs->all()) {
    s += name + "=";
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, float>) s += std::to_string(x);
          else if constexpr (std::is_same_v<T, std::string>) s += x;
          else if constexpr (std::is_same_v<T, HostTensor>) s += std::string("tensor:") + toString(x.type()) + ":" + dims(x.dims());
          else for (const auto& e : x) {
            if constexpr (std::is_same_v<std::decay_t<decltype(e)>, std::string>) s += e + ",";
            else s += std::to_string(e) + ",";
          }
        },
        v);
    s += ";";
  }
  s += "|in:";
  for (size_t k = 0; k < concrete.inputs.size(); ++k) {
    if (!concrete.present(k)) {
      s += "-;";
      continue;
    }
    s += std::string(toString(concrete.inputs[k].type)) + ":" + dims(concrete.inputs[k].dims) +
         (build.inputs[k].value.valid() ? "c" : "") + ";";
  }
  s += "|out:";
  for (const auto& o : concrete.outputs) s += std::string(toString(o.type)) + ":" + dims(o.dims) + ";";
  return s;
}

}  // namespace

std::vector<TacticBucket> tacticBucketsFromPoints(std::vector<TacticPoint> points) {
  // Stable: of two points of one size the first (the opt shapes') stays.
  std::stable_sort(points.begin(), points.end(), [](const TacticPoint& a, const TacticPoint& b) { return a.size < b.size; });
  std::vector<TacticPoint> distinct;
  for (const TacticPoint& p : points)
    if (distinct.empty() || distinct.back().size != p.size) distinct.push_back(p);
  std::vector<TacticBucket> buckets;
  for (size_t k = 0; k < distinct.size(); ++k) {
    // A point's range ends halfway (geometrically) to the next one: sizes grow multiplicatively.
    const int64_t end = k + 1 < distinct.size()
                            ? static_cast<int64_t>(std::sqrt(static_cast<double>(std::max<int64_t>(distinct[k].size, 1)) *
                                                             static_cast<double>(distinct[k + 1].size)))
                            : INT64_MAX;
    if (!buckets.empty() && buckets.back().tactic == distinct[k].tactic) {
      buckets.back().maxSize = end;
      continue;
    }
    buckets.push_back(TacticBucket{end, distinct[k].tactic, distinct[k].timeMs});
  }
  if (buckets.size() <= 1) buckets.clear();  // one tactic serves every size
  return buckets;
}

namespace {

// The shapes of profile `profile` besides its opt shapes that tactics are timed at (BuilderConfig::
// setTacticShapePoints): min and max, and halfway (geometrically) to the opt shapes with 5 points.
std::vector<ResolvedShapes> otherShapePoints(const EngineGraph& g, size_t profile, int points, ILogger& logger) {
  const ProfileRanges& pr = g.profiles[profile];
  std::vector<ResolvedShapes> out;
  if (points <= 1 || pr.empty()) return out;
  const std::vector<double> where = points >= 5 ? std::vector<double>{0.0, 0.5, 1.5, 2.0} : std::vector<double>{0.0, 2.0};
  const std::map<int, Dims> opt = optDims(g, profile);
  std::vector<std::map<int, Dims>> seen{opt};
  for (double f : where) {
    std::map<int, Dims> dims;
    for (const auto& [t, range] : pr) {
      Dims d = range.opt;
      for (size_t k = 0; k < d.size() && k < range.min.size() && k < range.max.size(); ++k) {
        const double lo = static_cast<double>(f <= 1.0 ? range.min[k] : range.opt[k]);
        const double hi = static_cast<double>(f <= 1.0 ? range.opt[k] : range.max[k]);
        const double w = f <= 1.0 ? f : f - 1.0;
        d[k] = lo > 0 ? std::llround(std::exp(std::log(lo) * (1.0 - w) + std::log(hi) * w)) : std::llround(lo + (hi - lo) * w);
      }
      dims[t] = d;
    }
    if (std::find(seen.begin(), seen.end(), dims) != seen.end()) continue;
    seen.push_back(dims);
    try {
      out.push_back(resolveShapes(g, dims, &pr, nullptr, /*lenient=*/true));
    } catch (const Error& e) {
      logger.log(ILogger::Severity::kVERBOSE, std::string("tactic shape point skipped: ") + e.what());
    }
  }
  return out;
}

}  // namespace

void selectTactics(EngineGraph& g, Backend& backend, size_t profile, const BuilderConfig& cfg, ILogger& logger) {
  ResolvedShapes r = resolveShapes(g, optDims(g, profile), &g.profiles[profile], nullptr, /*lenient=*/true);
  const std::vector<ResolvedShapes> others = otherShapePoints(g, profile, cfg.tacticShapePoints(), logger);
  const std::string where = g.profiles.size() > 1 ? " (profile " + std::to_string(profile) + ")" : std::string();
  const auto& progress = cfg.progressCallback();
  const int total = static_cast<int>(g.layers.size());
  // Without a user's cache, one for this profile's layers: identical layers (a stage's repeated
  // blocks) are timed once, as TensorRT's builder does with its local timing cache.
  TimingCache buildCache;
  for (size_t i = 0; i < g.layers.size(); ++i) {
    EngineLayer& l = g.layers[i];
    TacticChoice& choice = l.choices.at(profile);
    choice.buckets.clear();
    if (progress) progress("Selecting tactics", static_cast<int>(i), total);
    LayerDesc desc = buildTimeDesc(g, i);
    std::vector<Tactic> tactics = backend.tactics(desc);
    if (tactics.empty()) {
      // A last resort (CUDA: the reference kernel on the host between copies), said loudly.
      tactics = backend.fallbackTactics(desc);
      if (!tactics.empty() && profile == 0)
        logger.log(ILogger::Severity::kWARNING, "layer '" + l.name + "' (" + l.op + "): no " + toString(g.device) + " kernel supports it; it runs as " +
                                      tactics.front().name + " (its inputs copied to the host, the reference kernel, the outputs copied back): slow");
    }
    if (tactics.empty()) {
      std::string types;
      for (size_t k = 0; k < desc.inputs.size(); ++k)
        if (desc.present(k)) types += std::string(types.empty() ? "" : ", ") + toString(desc.inputs[k].type);
      bool narrow = false;  // float8/float4/int4/int2: the GPU has conversion kernels only
      for (const auto& t : desc.inputs) narrow = narrow || isNarrowFloat(t.type) || packedBits(t.type) < 8;
      for (const auto& t : desc.outputs) narrow = narrow || isNarrowFloat(t.type) || packedBits(t.type) < 8;
      throw UnsupportedError("layer '" + l.name + "' (" + l.op + ", inputs " + types + "): no " + toString(g.device) +
                             " kernel supports it" +
                             (narrow && g.device == DeviceType::kGPU
                                  ? " (the GPU converts the float8, float4, int4 and int2 types with Cast, CastLike, "
                                    "QuantizeLinear and DequantizeLinear; other ops on them run on the CPU only)"
                                  : ""));
    }
    choice.considered = static_cast<int>(tactics.size());
    const bool concrete = layerResolved(r, i);  // shapes that depend on run-time input values cannot be timed now
    const size_t wsLimit = cfg.getMemoryPoolLimit(MemoryPoolType::kWORKSPACE);
    // Whether a tactic's kernel (`made`, or one created here) needs at most the workspace limit at
    // shapes `at` (shapes not all known: 0 assumed).
    auto fits = [&](const Tactic& t, const LayerDesc& at, const Kernel* made = nullptr) {
      if (wsLimit == 0 || !concrete || r.skipped(i)) return true;
      std::unique_ptr<Kernel> own;
      if (!made) made = (own = t.create(desc)).get();
      std::unique_ptr<KernelState> state;
      const size_t ws = made->reshape(at, state);
      if (ws <= wsLimit) return true;
      logger.log(ILogger::Severity::kVERBOSE, "layer '" + l.name + "' tactic " + t.name + " needs " + std::to_string(ws) +
                                                  " bytes of workspace, over the limit of " + std::to_string(wsLimit));
      return false;
    };
    auto noTacticFits = [&] {
      return Error("layer '" + l.name + "': every tactic needs more workspace than the limit of " + std::to_string(wsLimit) +
                   " bytes (--memPoolSize=workspace:N)");
    };
    if (tactics.size() == 1 || cfg.builderOptimizationLevel() <= 0 || r.skipped(i) || !concrete) {
      size_t pick = 0;
      while (pick < tactics.size() && !fits(tactics[pick], r.layers[i])) ++pick;
      if (pick == tactics.size()) throw noTacticFits();
      choice.tactic = tactics[pick].name;
      continue;
    }
    // Search breadth: backends list tactics best guess first; level L times the first 2^L
    // (level 1: two, 3 (default): eight, 5: every candidate).
    const int level = cfg.builderOptimizationLevel();
    if (level < 5 && tactics.size() > (size_t(1) << level)) tactics.resize(size_t(1) << level);
    choice.considered = static_cast<int>(tactics.size());
    TimingCache* cache = cfg.timingCache() ? cfg.timingCache() : &buildCache;
    // One tactic's time at shapes `at` (timing cache first); -1 when it cannot run them. `made`
    // receives the kernel when one was created (its workspace is checked with it).
    // `bufs`: device buffers for these shapes, shared by the tactics timed at them.
    auto timeTactic = [&](const Tactic& t, const LayerDesc& at, std::unique_ptr<Kernel>* made, std::unique_ptr<TimingBuffers>& bufs) {
      try {
        const std::string signature = layerSignature(desc, at);
        float ms = cache->find(g.fingerprint, signature, t.name);
        if (ms >= 0.f) {
          logger.log(ILogger::Severity::kVERBOSE, "layer '" + l.name + "'" + where + " tactic " + t.name + ": " + std::to_string(ms) + " ms (timing cache)");
          return ms;
        }
        *made = t.create(desc);
        ms = timeKernel(backend, **made, at, cfg.avgTiming(), bufs);
        cache->insert(g.fingerprint, signature, t.name, ms);
        logger.log(ILogger::Severity::kVERBOSE, "layer '" + l.name + "'" + where + " tactic " + t.name + ": " + std::to_string(ms) + " ms");
        return ms;
      } catch (const Error& e) {
        logger.log(ILogger::Severity::kVERBOSE, "layer '" + l.name + "' tactic " + t.name + " skipped: " + e.what());
        return -1.f;
      }
    };
    checkTimingFootprint(r.layers[i]);
    float best = -1.f, bestAny = -1.f;
    std::string bestName, bestAnyName;
    std::unique_ptr<TimingBuffers> optBufs;
    for (const Tactic& t : tactics) {
      std::unique_ptr<Kernel> k;  // the timed kernel, reused for its workspace
      const float ms = timeTactic(t, r.layers[i], &k, optBufs);
      if (ms < 0.f) continue;
      if (bestAny < 0 || ms < bestAny) {
        bestAny = ms;
        bestAnyName = t.name;
      }
      if ((best < 0 || ms < best) && fits(t, r.layers[i], k.get())) {
        best = ms;
        bestName = t.name;
      }
    }
    optBufs.reset();
    if (bestName.empty() && !bestAnyName.empty()) throw noTacticFits();
    if (bestName.empty()) throw Error("layer '" + l.name + "': every tactic failed");
    if (bestName != bestAnyName)
      logger.log(ILogger::Severity::kWARNING, "layer '" + l.name + "'" + where + ": the workspace limit costs time: " + bestAnyName +
                                                  " (" + std::to_string(bestAny) + " ms) needs more than " + std::to_string(wsLimit) +
                                                  " bytes; " + bestName + " (" + std::to_string(best) + " ms) chosen");
    choice.tactic = bestName;
    choice.timeMs = best;
    // The profile's other shapes: a tactic that beats the opt shapes' one there by more than 5%
    // (timing noise must not split a layer) gets the sizes around them.
    std::vector<TacticPoint> points{{tacticBucketSize(r.layers[i]), bestName, best}};
    for (const ResolvedShapes& o : others) {
      if (o.skipped(i) || !layerResolved(o, i)) continue;
      const int64_t size = tacticBucketSize(o.layers[i]);
      if (size == points[0].size) continue;
      try {
        checkTimingFootprint(o.layers[i]);
      } catch (const Error&) {
        continue;  // a max shape too large to time here: the opt tactic serves it
      }
      float optMs = -1.f, fastMs = -1.f;
      std::string fastName;
      std::unique_ptr<TimingBuffers> pointBufs;
      for (const Tactic& t : tactics) {
        std::unique_ptr<Kernel> k;
        const float ms = timeTactic(t, o.layers[i], &k, pointBufs);
        if (ms < 0.f) continue;
        if (t.name == bestName) optMs = ms;
        if ((fastMs < 0 || ms < fastMs) && fits(t, o.layers[i], k.get())) {
          fastMs = ms;
          fastName = t.name;
        }
      }
      if (fastName.empty()) continue;  // nothing runs these shapes: the opt tactic stays
      const bool other = optMs < 0.f || fastMs < 0.95f * optMs;
      points.push_back({size, other ? fastName : bestName, other ? fastMs : optMs});
    }
    choice.buckets = tacticBucketsFromPoints(points);
    if (!choice.buckets.empty()) {
      std::string what;
      for (const TacticBucket& b : choice.buckets)
        what += (what.empty() ? "" : ", ") + b.tactic + (b.maxSize == INT64_MAX ? std::string(" above") : " up to size " + std::to_string(b.maxSize));
      logger.log(ILogger::Severity::kVERBOSE, "layer '" + l.name + "'" + where + ": tactics by size: " + what);
    }
  }
  if (progress) progress("Selecting tactics", total, total);
}

}  // namespace kiln

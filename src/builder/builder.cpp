// Builder: network -> optimized, tactic-tuned engine.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "builder/passes/inline_constant_if.h"
#include "builder/calibrate.h"
#include "builder/passes/lower_qdq.h"
#include "builder/passes/passes.h"
#include "builder/passes/quantize_calibrated.h"
#include "ops/qlinear.h"
#include "builder/precision_constraints.h"
#include "builder/tactic_filter.h"
#include "builder/tactic_timing.h"
#include "ops/op_registry.h"
#include "ops/shape_propagation.h"
#include "runtime/engine_impl.h"
#include "runtime/layer_order.h"

namespace kiln {

// ---- config ----
BuilderConfig::BuilderConfig() { setFlag(BuilderFlag::kTF32, true); }
void BuilderConfig::setFlag(BuilderFlag f, bool on) {
  uint32_t bit = 1u << static_cast<int>(f);
  flags_ = on ? (flags_ | bit) : (flags_ & ~bit);
}
bool BuilderConfig::getFlag(BuilderFlag f) const { return flags_ & (1u << static_cast<int>(f)); }

void OptimizationProfile::setDimensions(const std::string& input, OptProfileSelector s, const Dims& dims) {
  for (int64_t d : dims)
    if (d < 0) throw Error("optimization profile for '" + input + "': dimensions must be >= 0, got " + toString(dims));
  dims_[input][static_cast<int>(s)] = dims;
}
const Dims& OptimizationProfile::getDimensions(const std::string& input, OptProfileSelector s) const {
  auto it = dims_.find(input);
  if (it == dims_.end()) throw Error("optimization profile has no dimensions for '" + input + "'");
  return it->second[static_cast<int>(s)];
}


Builder::Builder(ILogger& logger) : logger_(logger) {}

namespace {

using Sev = ILogger::Severity;

// Profile ranges for every dynamic input, per optimization profile; checks they fit the
// network's static dims and that every profile covers every dynamic input.
std::vector<std::map<std::string, ProfileRange>> collectProfiles(const Network& net, const BuilderConfig& cfg) {
  const auto& profiles = cfg.profiles();
  if (profiles.size() > kMaxOptimizationProfiles)
    throw Error(std::to_string(profiles.size()) + " optimization profiles: kiln accepts at most " +
                std::to_string(kMaxOptimizationProfiles));
  bool anyDynamic = false;
  for (Tensor* in : net.inputs()) anyDynamic = anyDynamic || !isStatic(in->dims);
  // A static network has one (empty) profile, however many were given: they could only repeat it.
  std::vector<std::map<std::string, ProfileRange>> out(anyDynamic ? std::max<size_t>(1, profiles.size()) : 1);
  for (size_t pi = 0; pi < profiles.size(); ++pi)
    for (auto& [name, _] : profiles[pi].all()) {
      Tensor* t = net.findTensor(name);
      if (!t || !t->isInput) throw Error("optimization profile " + std::to_string(pi) + " names '" + name + "', which is not a network input");
    }
  for (Tensor* in : net.inputs()) {
    bool dynamic = !isStatic(in->dims);
    for (size_t pi = 0; pi < out.size(); ++pi) {
      const std::string which = profiles.size() > 1 ? "optimization profile " + std::to_string(pi) : "optimization profile";
      const OptimizationProfile* p = profiles.empty() ? nullptr : &profiles[pi];
      if (!p || !p->hasInput(in->name)) {
        if (dynamic)
          throw Error("input '" + in->name + "' has dynamic dims " + toString(in->dims) + ": give " +
                      (profiles.size() > 1 ? which + " its range" : std::string("an optimization profile")) +
                      " (--minShapes/--optShapes/--maxShapes)");
        continue;
      }
      ProfileRange r{p->getDimensions(in->name, OptProfileSelector::kMIN), p->getDimensions(in->name, OptProfileSelector::kOPT),
                     p->getDimensions(in->name, OptProfileSelector::kMAX)};
      for (const Dims* d : {&r.min, &r.opt, &r.max}) {
        if (d->size() != in->dims.size())
          throw Error(which + " for '" + in->name + "': rank of " + toString(*d) + " differs from the input's " + toString(in->dims));
        volume(*d);
      }
      for (size_t k = 0; k < in->dims.size(); ++k) {
        if (r.min[k] > r.opt[k] || r.opt[k] > r.max[k])
          throw Error(which + " for '" + in->name + "': need min <= opt <= max, got " + toString(r.min) + " / " +
                      toString(r.opt) + " / " + toString(r.max));
        if (in->dims[k] >= 0 && (r.min[k] != in->dims[k] || r.max[k] != in->dims[k]))
          throw Error(which + " for '" + in->name + "' changes static dimension " + std::to_string(k));
      }
      out[pi][in->name] = r;
    }
  }
  return out;
}

// The sample input shapes of symbolic_dims.h, for every profile: its opt, max and min shapes; for
// each group of input dims with the same range (BERT's input_ids and attention_mask batch, their
// sequence lengths), the group moved off opt, and two shapes drawn per group; then the same per
// dim alone and drawn per dim, which keepRunnableSamples drops where the network cannot run
// (dims that must be equal), and which keep apart dims that only share a range.
InputSamples drawInputSamples(const std::vector<std::map<std::string, ProfileRange>>& profiles) {
  InputSamples out;
  uint64_t state = 0x9E3779B97F4A7C15ull;  // xorshift: the same samples on every build
  auto draw = [&](int64_t lo, int64_t hi) {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return lo + static_cast<int64_t>(state % static_cast<uint64_t>(hi - lo + 1));
  };
  constexpr size_t kMaxMoved = 32;  // per profile; the drawn shapes cover the dims past it
  for (const auto& p : profiles) {
    if (p.empty()) continue;
    std::map<std::string, Dims> opt, mx, mn;
    // Dynamic dims (input, axis) grouped by their (min, opt, max).
    std::map<std::array<int64_t, 3>, std::vector<std::pair<std::string, size_t>>> groups;
    for (const auto& [name, r] : p) {
      opt[name] = r.opt, mx[name] = r.max, mn[name] = r.min;
      for (size_t k = 0; k < r.opt.size(); ++k)
        if (r.min[k] != r.max[k]) groups[{r.min[k], r.opt[k], r.max[k]}].emplace_back(name, k);
    }
    out.push_back(opt), out.push_back(mx), out.push_back(mn);
    std::vector<std::vector<std::pair<std::string, size_t>>> units;  // groups first, then single dims
    for (const auto& [_, dims] : groups) units.push_back(dims);
    for (const auto& [_, dims] : groups)
      for (size_t i = 0; dims.size() > 1 && i < dims.size(); ++i) units.push_back({dims[i]});
    for (size_t u = 0; u < units.size() && u < kMaxMoved; ++u) {
      const ProfileRange& r = p.at(units[u][0].first);
      const size_t k0 = units[u][0].second;
      const int64_t moved = r.max[k0] != r.opt[k0] ? r.max[k0] : r.min[k0];
      std::map<std::string, Dims> one = opt;
      for (const auto& [name, k] : units[u]) one[name][k] = moved;
      out.push_back(std::move(one));
    }
    for (int i = 0; i < 4; ++i) {  // two draws per group, then two per dim
      std::map<std::string, Dims> drawn = opt;
      for (const auto& [range, dims] : groups) {
        const int64_t v = draw(range[0], range[2]);
        for (const auto& [name, k] : dims) drawn[name][k] = i < 2 ? v : draw(range[0], range[2]);
      }
      out.push_back(std::move(drawn));
    }
  }
  return out;
}

InputSamples sampleInputShapes(const Network& net, const std::vector<std::map<std::string, ProfileRange>>& profiles) {
  return keepRunnableSamples(net, drawInputSamples(profiles));
}

void runPasses(Network& net, const BuilderConfig& cfg, ILogger& log, Backend& backend, const InputSamples& samples,
               const CalibrationTable* calibration, ImplicitQuantization* quantization) {
  auto hasKernel = [&backend](const Layer& l) { return !backend.tactics(describeLayer(l)).empty(); };
  // The attention fusion pays only with a fused kernel; the CUDA backend's attention_fp_general (one
  // block per query row, there for the ONNX op's rarer features) is slower than the unfused
  // cuBLASLt matmuls and softmax it would replace (e.g. head sizes above the flash kernels' 128).
  // Under --fp16/--bf16 the layer will compute in that type (assignPrecision below), so the
  // reduced-precision kernels count too (cuDNN SDPA takes head sizes up to 256, the flash kernels 128).
  const bool reducedGpu = cfg.device() == DeviceType::kGPU && !cfg.getFlag(BuilderFlag::kSTRONGLY_TYPED) &&
                          (cfg.getFlag(BuilderFlag::kFP16) || cfg.getFlag(BuilderFlag::kBF16));
  const DataType reduced = cfg.getFlag(BuilderFlag::kFP16) ? DataType::kHALF : DataType::kBF16;
  auto hasFusedAttention = [&backend, reducedGpu, reduced](const Layer& l) {
    auto fused = [&](const LayerDesc& d) {
      for (const Tactic& t : backend.tactics(d))
        if (t.name != "attention_fp_general") return true;
      return false;
    };
    const LayerDesc d = describeLayer(l);
    if (fused(d)) return true;
    if (!reducedGpu || (l.precision && *l.precision == DataType::kFLOAT)) return false;
    LayerDesc r = d;
    for (TensorDesc& t : r.inputs)
      if (t.type == DataType::kFLOAT) t.type = reduced;
    for (TensorDesc& t : r.outputs)
      if (t.type == DataType::kFLOAT) t.type = reduced;
    return fused(r);
  };
  auto repropagate = [&] { propagateShapes(net, nullptr, true); };
  const std::vector<std::string>& skip = cfg.skippedPasses();
  auto skipped = [&skip](const char* name) {
    for (const std::string& w : skip)
      if (std::string(name).find(w) != std::string::npos) return true;
    return false;
  };
  // Explicit quantization first: it reads the int8 weights behind DequantizeLinear layers whose
  // outputs were folded to float constants, before removeFoldedLayers drops them.
  const char* kLowerQdq = "lower Q/DQ to integer layers";
  // Whether the backend runs an integer layer lowerQdq would make; its residual form (QLinearConv
  // inputs 9..11) only on a kernel of its own: the reference would replace a fast conv + Add.
  // The residual form is also built once at its static shape (a library may have no engine for it).
  auto lowerable = [&backend](const LayerDesc& d) {
    const std::vector<Tactic> t = backend.tactics(d);
    if (d.op != "QLinearConv" || !d.present(kQR)) return !t.empty();
    if (!isStatic(d.inputs[kQX].dims) || !isStatic(d.outputs[0].dims)) return false;
    return std::any_of(t.begin(), t.end(), [&d](const Tactic& x) { return x.name != "ref" && tacticBuilds(x, d, d); });
  };
  if (skipped(kLowerQdq)) {
    log.log(Sev::kINFO, std::string("pass skipped (--skipPasses): ") + kLowerQdq);
  } else if (lowerQdq(net, lowerable)) {
    log.log(Sev::kVERBOSE, std::string("pass: ") + kLowerQdq);
    net.topoSort();
    repropagate();
  }
  removeFoldedLayers(net);
  // setGpuFusions (testing aid): the GPU-only fusions also run in CPU builds, where the fused
  // layers run on the reference kernels, so whole models check them against ONNX Runtime without
  // a GPU (make models does).
  const bool gpuFusions = cfg.device() == DeviceType::kGPU || cfg.gpuFusions();
  struct Pass { const char* name; std::function<bool(Network&)> fn; };
  const Pass passes[] = {
      {"fold shape arithmetic (dynamic shapes)", [&](Network& n) { return foldShapeArithmetic(n, samples); }},
      {"lower matrix-product Einsum to MatMul", lowerEinsumToMatMul},
      {"elide Identity and same-type Cast", elideNoOps},
      {"merge duplicate layers", mergeDuplicateLayers},
      {"fold stacked constant operands of Add / Mul", foldConstantOperands},
      {"lower Compress with a constant condition to Gather", lowerConstantCompress},
      {"lower Compress with a computed condition to NonZero + Gather", lowerComputedCompress},
      {"lower Concat of Slices (torch.roll) to Gather", lowerSliceConcat},
      {"lower Concat of strided Slices (space to depth) to one Transpose", lowerStridedSliceConcat},
      {"fold channel shuffles and their splits into Gathers (CPU)",
       [&](Network& n) { return cfg.device() == DeviceType::kCPU && foldChannelShuffle(n); }},
      {"fold BatchNormalization into Conv", foldBatchNormIntoConv},
      {"lower BatchNormalization to scale and shift", lowerBatchNormToScaleShift},
      {"fuse GELU pattern", fuseGeluPattern},
      {"fuse GELU by value (any spelling)", fuseGeluByValue},
      {"fuse LayerNorm pattern", fuseLayerNormPattern},
      {"fuse RMSNorm pattern", fuseRmsNormPattern},
      {"fuse rotary embedding pattern", [&](Network& n) { return fuseRotaryPattern(n, samples); }},
      // Before the attention fusion, whose 3-D form then takes LLaMA / Qwen2's rotated Q and K.
      {"regroup head-interleaved fused Q / K / V projections (GPU)", [&](Network& n) { return gpuFusions && regroupQkvHeads(n, samples); }},
      {"split fused Q / K / V before the head reshape (GPU)", [&](Network& n) { return gpuFusions && splitBeforeHeadReshape(n, samples); }},
      {"apply rotary embeddings before the head split (GPU)", [&](Network& n) { return gpuFusions && rotaryBeforeHeadSplit(n, samples); }},
      {"fuse GroupNorm pattern", [&](Network& n) { return fuseGroupNormPattern(n, samples); }},
      {"lift batched MatMuls over merged batch and heads to 4-D", liftMergedHeads},
      {"move row permutations after a linear onto its input (GPU)", [&](Network& n) { return gpuFusions && permuteRowsBeforeLinear(n); }},
      {"lift attention forms (A P^T, rank-3 scores) to the 4-D form (GPU)", [&](Network& n) { return gpuFusions && liftAttentionForms(n); }},
      {"fuse attention (GPU)", [&](Network& n) { return gpuFusions && fuseAttention(n, hasFusedAttention, samples); }},
      // Again: the attention fusion makes one mask sum per layer from masks every layer shares (T5).
      {"merge duplicate layers made by the attention fusion", mergeDuplicateLayers},
      // After the attention fusion, which reads V from the packed projection itself.
      {"rotary embeddings read their part of a packed projection in place (GPU)",
       [&](Network& n) { return gpuFusions && rotaryPackedColumns(n, hasKernel); }},
      {"compose row moves (Transpose / Gather / Slice chains) into one row Gather", composeRowMoves},
      {"compose Reshape / Transpose chains into one Transpose", composeTransposes},
      {"read shapes upstream of layers only Shape reads (dynamic shapes)", [&](Network& n) { return readShapesUpstream(n, samples); }},
      {"fuse MatMul + bias", fuseMatMulBias},
      // After the bias fusion, so that a linear's bias is its input 2 when its layer scale folds.
      {"fold per-channel scale and shift into Conv / MatMul", foldChannelScale},
      // After the bias and scale folds (the packed weights are the final ones).
      {"pack Q / K / V projections into one MatMul (GPU)",
       [&](Network& n) { return gpuFusions && packQkvProjections(n, hasFusedAttention, samples); }},
      // Implicit INT8 after BatchNorm folding (the weights it quantizes are the folded ones) and
      // before the residual / activation fusions, which lowerQdq's patterns do not take.
      {"quantize calibrated layers (implicit INT8 / FP8)",
       [&](Network& n) {
         const bool gpu = backend.device() == DeviceType::kGPU;
         const ImplicitTargets targets{cfg.getFlag(BuilderFlag::kINT8), cfg.getFlag(BuilderFlag::kFP8), gpu, gpu};
         return calibration && quantizeCalibrated(n, *calibration, lowerable,
                                                  backend.int8WeightLimit(), targets, quantization);
       }},
      {"fuse residual Add + LayerNorm (GPU)",
       [&](Network& n) { return gpuFusions && fuseSkipLayerNorm(n, hasKernel, samples); }},
      {"fuse Conv + residual Add", [&](Network& n) { return fuseConvResidual(n, samples); }},
      {"fuse activation into producer", [&](Network& n) { return fuseActivation(n, gpuFusions, samples); }},
      {"fuse pointwise chains", [&](Network& n) { return fusePointwiseChains(n, samples); }},
      {"blocked layouts between conv/pool layers (CPU)", cfg.device() == DeviceType::kCPU ? assignCpuLayouts : +[](Network&) { return false; }},
  };
  // setSkippedPasses (debugging aid): passes whose name contains one of the words are skipped.
  for (const Pass& p : passes) {
    if (skipped(p.name)) {
      log.log(Sev::kINFO, std::string("pass skipped (--skipPasses): ") + p.name);
      continue;
    }
    if (p.fn(net)) {
      log.log(Sev::kVERBOSE, std::string("pass: ") + p.name);
      net.topoSort();
      repropagate();
      removeFoldedLayers(net);
    }
  }
  if (reducedGpu) {
    if (assignPrecision(net, reduced, cfg.getFlag(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS) || cfg.getFlag(BuilderFlag::kPREFER_PRECISION_CONSTRAINTS))) {
      log.log(Sev::kVERBOSE, std::string("pass: reduced precision (") + toString(reduced) + ")");
      repropagate();
      removeFoldedLayers(net);
    }
  }
  if (cfg.device() == DeviceType::kGPU && !cfg.getFlag(BuilderFlag::kTF32))
    for (auto& l : net.layers())
      if (l->op == "MatMul" || l->op == "Gemm" || l->op == "Conv" || l->op == "ConvTranspose") disallowTf32(l->attrs);
  // Layers the backend cannot run in float16/bfloat16 compute in float32.
  std::function<bool(const Layer&)> runsAsIs;
  if (cfg.device() == DeviceType::kCPU)
    runsAsIs = [](const Layer& l) {
      const OpDef* def = OpRegistry::instance().find(l.op);
      return def && def->anyType;
    };
  else
    runsAsIs = [&backend](const Layer& l) { return !backend.tactics(describeLayer(l)).empty(); };
  if (insertFloatCasts(net, runsAsIs)) {
    log.log(Sev::kVERBOSE, "pass: float32 compute for float16/bfloat16 layers the backend cannot run as they are");
    repropagate();
  }
  if (gpuFusions && !skipped("fuse FP8 quantization") && fuseFp8Quantize(net, [&backend](const LayerDesc& d) { return !backend.tactics(d).empty(); })) {
    log.log(Sev::kVERBOSE, "pass: fuse FP8 quantization (shared Fp8Quantize layers, quantized Fp8MatMul outputs)");
    repropagate();
  }
  if (cfg.device() == DeviceType::kGPU && cfg.channelsLast() && assignGpuLayouts(net, backend, samples, cfg.channelsLastMinBatch())) {
    log.log(Sev::kVERBOSE, "pass: channels-last (nhwc) tensors between conv/pool layers (GPU)");
    net.topoSort();
    repropagate();
  }
  removeFoldedLayers(net);  // casts of constants folded above: no layer may produce a constant
}

bool isQdq(const Layer& l) { return l.op == "QuantizeLinear" || l.op == "DequantizeLinear"; }

// INT8 comes from the network's own Q/DQ layers (explicit quantization, lower_qdq.cpp) or from
// calibration (implicit, a calibrator in the config); the flag alone changes nothing, and saying
// so is the point.
void warnQuantizationFlags(const Network& net, const BuilderConfig& cfg, ILogger& log) {
  bool qdq = false;
  for (const auto& l : net.layers()) qdq = qdq || isQdq(*l);
  const bool calibrated = cfg.getInt8Calibrator() != nullptr;
  if (calibrated && !cfg.getFlag(BuilderFlag::kINT8) && !cfg.getFlag(BuilderFlag::kFP8))
    log.log(Sev::kWARNING, "a calibrator is set but neither INT8 (kINT8, --int8) nor FP8 (kFP8, --fp8) is: no calibration, no quantized layer");
  for (auto [flag, name] : {std::pair{BuilderFlag::kINT8, "INT8 (kINT8, --int8)"}, std::pair{BuilderFlag::kFP8, "FP8 (kFP8, --fp8)"}}) {
    if (!cfg.getFlag(flag)) continue;
    if (calibrated) continue;  // runPasses reports what it quantized
    if (!qdq)
      log.log(Sev::kWARNING, std::string(name) + " has no effect: no layer runs " + (flag == BuilderFlag::kINT8 ? "INT8" : "FP8") +
                             ", because the network has no "
                             "QuantizeLinear/DequantizeLinear layers and no calibration data was given "
                             "(--calibData=DIR or --calib=FILE; BuilderConfig::setInt8Calibrator); layers compute in float types");
    else if (flag == BuilderFlag::kINT8)
      log.log(Sev::kINFO, "INT8 layers come from the network's QuantizeLinear/DequantizeLinear layers (explicit quantization); "
                          "the flag itself changes nothing");
    else
      log.log(Sev::kINFO, "FP8 layers come from the network's float8e4m3fn QuantizeLinear/DequantizeLinear around MatMul / Gemm "
                          "(explicit quantization); the flag itself changes nothing");
  }
}

//! What implicit quantization did, in one INFO line (and a warning when it quantized nothing).
void reportQuantization(const ImplicitQuantization& q, ILogger& log) {
  std::string kept;
  int n = 0;
  for (const auto& [name, why] : q.keptFloat)
    if (++n <= 8) kept += (n > 1 ? "; " : "") + name + ": " + why;
  if (n > 8) kept += "; ... (" + std::to_string(n - 8) + " more)";
  if (q.quantized.empty()) {
    log.log(Sev::kWARNING, "INT8 (implicit): no layer runs INT8" + (kept.empty() ? std::string(": the network has no Conv, MatMul or Gemm with constant weights")
                                                                            : "; kept float: " + kept));
    return;
  }
  const bool allFp8 = q.fp8 == static_cast<int>(q.quantized.size());
  log.log(Sev::kINFO, std::string(allFp8 ? "FP8 (implicit): " : "INT8 (implicit): ") + std::to_string(q.quantized.size()) +
                          " layer(s) quantized" + (q.fp8 && !allFp8 ? " (" + std::to_string(q.fp8) + " of them FP8 E4M3)" : std::string()) +
                          (kept.empty() ? std::string() : "; " + std::to_string(n) + " kept float: " + kept));
}

//! After the passes: Q/DQ layers that still compute as float arithmetic, when no integer layer was
//! made (the backend has no integer kernel for them, e.g. QLinearConv on the GPU), are worth a warning.
void warnFloatQdq(const Network& net, ILogger& log) {
  int qdq = 0, integer = 0;
  for (const auto& l : net.layers()) {
    qdq += isQdq(*l);
    integer += l->op == "QLinearConv" || l->op == "QLinearMatMul" || l->op == "Fp8MatMul";
  }
  if (qdq > 0 && integer == 0)
    log.log(Sev::kWARNING, std::to_string(qdq) + " QuantizeLinear/DequantizeLinear layers run as float arithmetic: this backend "
                           "has no integer kernel for the quantized layers around them (the results follow ONNX, the speed does not)");
}

EngineGraph lowerToGraph(const Network& net, const std::vector<std::map<std::string, ProfileRange>>& profiles) {
  EngineGraph g;
  std::map<const Tensor*, int> index;
  auto idx = [&](const Tensor* t) -> int {
    auto it = index.find(t);
    if (it != index.end()) return it->second;
    EngineTensor et;
    et.name = t->name;
    et.type = t->type;
    et.dims = t->dims;
    et.value = t->value;
    et.isInput = t->isInput;
    et.isOutput = t->isOutput;
    g.tensors.push_back(std::move(et));
    int i = static_cast<int>(g.tensors.size() - 1);
    index[t] = i;
    return i;
  };
  for (Tensor* in : net.inputs()) g.inputs.push_back(idx(in));
  for (auto& l : net.layers()) {
    EngineLayer el;
    el.name = l->name;
    el.op = l->op;
    el.domain = l->domain;
    el.attrs = l->attrs;
    el.fusedOps = l->fusedOps;
    el.choices.resize(profiles.size());
    for (Tensor* t : l->inputs) el.inputs.push_back(t ? idx(t) : -1);
    for (Tensor* t : l->outputs) el.outputs.push_back(idx(t));
    el.precision = DataType::kFLOAT;
    bool found = false;
    for (Tensor* t : l->outputs)
      if (isFloat(t->type)) { el.precision = t->type, found = true; break; }
    for (Tensor* t : l->inputs)  // a layer writing only FP8 codes (a LayerNorm of an FP8 engine) computes in its input's type
      if (!found && t && isFloat(t->type)) { el.precision = t->type; break; }
    if (l->op == "QLinearConv" || l->op == "QLinearMatMul") el.precision = DataType::kINT8;
    if (l->op == "Fp8MatMul" || l->op == "Fp8Quantize") el.precision = DataType::kFP8E4M3FN;
    g.layers.push_back(std::move(el));
  }
  for (Tensor* out : net.outputs()) g.outputs.push_back(idx(out));
  g.profiles.assign(profiles.size(), {});
  for (size_t p = 0; p < profiles.size(); ++p)
    for (auto& [name, r] : profiles[p]) g.profiles[p][idx(net.findTensor(name))] = r;
  return g;
}

}  // namespace

std::unique_ptr<Engine> Builder::build(Network& net, const BuilderConfig& cfg) {
  auto t0 = std::chrono::steady_clock::now();
  if (net.outputs().empty()) throw Error("the network has no outputs");
  for (Tensor* o : net.outputs())
    if (!o->producer && !o->isConstant() && !o->isInput) throw Error("network output '" + o->name + "' is not produced by any layer");
  if (cfg.device() == DeviceType::kGPU && !gpuAvailable()) throw Error("no GPU backend is available in this build (use the CPU)");
  if (cfg.device() == DeviceType::kCPU) {
    for (BuilderFlag f : {BuilderFlag::kFP16, BuilderFlag::kBF16})
      if (cfg.getFlag(f))
        logger_.log(Sev::kWARNING, "the CPU backend computes in float32; the reduced-precision flag is ignored");
  }
  warnQuantizationFlags(net, cfg, logger_);
  auto profiles = collectProfiles(net, cfg);
  net.topoSort();
  // Drawn samples, not only the runnable ones: the If's dead branch may not infer at any shape.
  if (inlineConstantIfs(net, [&profiles] { return drawInputSamples(profiles); })) logger_.log(Sev::kVERBOSE, "pass: If layers with a build-time condition replaced by their taken branch");
  propagateShapes(net, nullptr, true);
  const auto constraints = collectConstraints(net);
  const bool constrained = cfg.getFlag(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS) || cfg.getFlag(BuilderFlag::kPREFER_PRECISION_CONSTRAINTS);
  if (constrained && applyOutputTypes(net)) propagateShapes(net, nullptr, true);
  // Implicit INT8: calibrate the network as given (tensor names as in the model) before any pass.
  std::unique_ptr<CalibrationTable> calibration;
  ImplicitQuantization quantization;
  if ((cfg.getFlag(BuilderFlag::kINT8) || cfg.getFlag(BuilderFlag::kFP8)) && cfg.getInt8Calibrator())
    calibration = std::make_unique<CalibrationTable>(calibrate(net, cfg, *cfg.getInt8Calibrator(), logger_));
  auto backend = withoutTactics(getBackend(cfg.device(), cfg.threads(), cfg.deviceIndex()), cfg.disabledTactics());
  backend->makeCurrent();  // instantiateEngine below takes the calling thread's current device
  // Phase times go to the build's INFO line: they show where a rebuild with a warm timing cache
  // still spends its time (a cache skips timing, not kernel creation or the passes).
  auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  auto tPasses = std::chrono::steady_clock::now();
  runPasses(net, cfg, logger_, *backend, sampleInputShapes(net, profiles), calibration.get(), &quantization);
  if (calibration) reportQuantization(quantization, logger_);
  warnFloatQdq(net, logger_);
  if (constrained)
    checkConstraints(constraints, net, cfg.device(), cfg.getFlag(BuilderFlag::kOBEY_PRECISION_CONSTRAINTS), quantization.keptFloat, logger_);
  const double passSecs = since(tPasses);
  for (Tensor* o : net.outputs())
    if (!o->dimsKnown) throw Error("output '" + o->name + "' has no shape");
  // A pass that rewired a reader but removed its producer would leave it reading memory nobody
  // writes: an internal error, never an engine.
  for (const auto& l : net.layers())
    for (const Tensor* in : l->inputs)
      if (in && !in->producer && !in->isInput && !in->isConstant())
        throw Error("internal error after the optimization passes: layer '" + l->name + "' reads tensor '" + in->name +
                    "', which no layer produces");

  EngineGraph g = lowerToGraph(net, profiles);
  g.device = cfg.device();
  g.threads = cfg.threads();
  g.auxStreams = 0;
  g.fingerprint = backend->fingerprint();

  // Every profile gets its own tactics, timed at its opt shapes (e.g. decode vs prefill lengths).
  auto tSelect = std::chrono::steady_clock::now();
  // A profile with another's opt shapes takes its choices (timing noise must not give one shape
  // two sets of kernels).
  for (size_t p = 0; p < g.profiles.size(); ++p) {
    size_t same = 0;
    while (same < p && optDims(g, same) != optDims(g, p)) ++same;
    if (same < p)
      for (EngineLayer& l : g.layers) l.choices[p] = l.choices[same];
    else
      selectTactics(g, *backend, p, cfg, logger_);
  }
  const double selectSecs = since(tSelect);
  // Aux streams (GPU only; the CPU runs one stream): -1 means "let kiln choose" (up to 2). The
  // execution order is the network's or a memory-aware one, whichever needs the smaller arena.
  const LayerOrderChoice order = chooseLayerOrder(g, cfg.maxAuxStreams() < 0 ? 2 : cfg.maxAuxStreams());
  if (order.reordered)
    logger_.log(Sev::kINFO, "memory-aware layer order: arena " + std::to_string(order.networkArena) + " -> " +
                                std::to_string(order.memoryAwareArena) + " bytes");
  g.arenaBytes = 0;
  for (size_t p = 0; p < g.profiles.size(); ++p) {
    // Tensors whose shapes depend on run-time data are planned by the context when it runs.
    ResolvedShapes shapes = resolveShapes(g, optDims(g, p), &g.profiles[p], nullptr, /*lenient=*/true);
    g.arenaBytes = std::max(g.arenaBytes, planMemory(g, shapes, p).arenaBytes);
  }

  auto tCreate = std::chrono::steady_clock::now();
  auto engine = std::make_unique<Engine>(instantiateEngine(std::move(g), logger_, -1));
  const double createSecs = since(tCreate);
  auto fixed = [](double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.3f", v);
    return std::string(b);
  };
  logger_.log(Sev::kINFO, "engine built in " + fixed(since(t0)) + " s: " + std::to_string(engine->getNbLayers()) + " layers (passes " +
                              fixed(passSecs) + " s, tactic selection " + fixed(selectSecs) + " s, kernel creation " +
                              fixed(createSecs) + " s)");
  return engine;
}

}  // namespace kiln

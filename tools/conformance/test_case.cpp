#include "test_case.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "io_memory.h"
#include "json_lite.h"
#include "kiln/kiln.h"

namespace fs = std::filesystem;

namespace kiln::conformance {
namespace {

std::string readFile(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw Error("cannot open " + p.string());
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<ValueSpec> parseValueSpecs(const JsonValue* list) {
  std::vector<ValueSpec> out;
  if (!list || list->kind != JsonValue::Kind::kArray) return out;
  for (const JsonValue& v : list->array) out.push_back({v.stringOr("name", ""), v.stringOr("kind", "tensor")});
  return out;
}

//! Keeps errors for the verbose log; kiln's warnings would only clutter the per-test lines.
class QuietLogger : public ILogger {
 public:
  explicit QuietLogger(bool verbose) : verbose_(verbose) {}
  void log(Severity s, const std::string& msg) noexcept override {
    if (verbose_ || s == Severity::kERROR) std::cerr << "[kiln] " << msg << "\n";
  }

 private:
  bool verbose_;
};

//! One test_data_set_N directory: named input and expected output tensors, in graph order. A
//! sequence value is lowered as kiln's importer lowers it: one tensor per element, named
//! sequenceElementName(name, i); `sequences` gives each sequence's element count.
struct DataSet {
  std::string dirName;
  std::vector<std::pair<std::string, HostTensor>> inputs, outputs;
  std::map<std::string, size_t> sequences;
};

// test_data_set_N directories in numeric order.
std::vector<fs::path> dataSetDirs(const fs::path& testDir) {
  std::vector<std::pair<long, fs::path>> found;
  const std::string prefix = "test_data_set_";
  for (const auto& e : fs::directory_iterator(testDir)) {
    std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind(prefix, 0) == 0) found.emplace_back(std::atol(n.c_str() + prefix.size()), e.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& f : found) out.push_back(f.second);
  return out;
}

// Reads <kind>_0.pb, <kind>_1.pb, ... naming each tensor from meta (else from the file itself).
std::vector<std::pair<std::string, HostTensor>> readTensors(const fs::path& dir, const std::string& kind,
                                                            const std::vector<ValueSpec>& specs, std::map<std::string, size_t>& sequences) {
  std::vector<std::pair<std::string, HostTensor>> out;
  for (size_t k = 0;; ++k) {
    fs::path p = dir / (kind + "_" + std::to_string(k) + ".pb");
    if (!fs::exists(p)) break;
    std::string nameInFile;
    if (k < specs.size() && specs[k].kind == "sequence") {
      std::vector<HostTensor> elements = readSequenceProtoFile(p.string(), &nameInFile);
      const std::string name = specs[k].name.empty() ? nameInFile : specs[k].name;
      sequences[name] = elements.size();
      for (size_t i = 0; i < elements.size(); ++i) out.emplace_back(sequenceElementName(name, i), elements[i]);
      continue;
    }
    HostTensor t = readTensorProtoFile(p.string(), &nameInFile);
    std::string name = k < specs.size() && !specs[k].name.empty() ? specs[k].name : nameInFile;
    out.emplace_back(name, t);
  }
  return out;
}

// A value other than a tensor or a sequence of tensors (optional, map) cannot be fed to or read
// from a kiln engine.
std::string nonTensorValue(const TestMeta& meta) {
  for (const ValueSpec& v : meta.inputs)
    if (v.kind != "tensor" && v.kind != "sequence") return v.kind + " input '" + v.name + "'";
  for (const ValueSpec& v : meta.outputs)
    if (v.kind != "tensor" && v.kind != "sequence") return v.kind + " output '" + v.name + "'";
  return "";
}

// The elements' dims of each sequence input for the importer (OnnxParserOptions::sequenceInputs):
// those of the first data set, a dim that differs in another set dynamic. "" or why not.
std::string sequenceInputDims(const TestMeta& meta, const std::vector<DataSet>& sets, OnnxParserOptions& options) {
  for (const ValueSpec& v : meta.inputs) {
    if (v.kind != "sequence") continue;
    std::vector<Dims>& dims = options.sequenceInputs[v.name];
    for (const DataSet& ds : sets) {
      auto n = ds.sequences.find(v.name);
      if (n == ds.sequences.end()) return "sequence input '" + v.name + "' has no data in " + ds.dirName;
      if (&ds != &sets.front() && n->second != dims.size()) return "the data sets give sequence input '" + v.name + "' different lengths";
      for (size_t i = 0; i < n->second; ++i) {
        Dims d;
        for (const auto& [name, t] : ds.inputs)
          if (name == sequenceElementName(v.name, i)) d = t.dims();
        if (&ds == &sets.front()) { dims.push_back(d); continue; }
        if (d.size() != dims[i].size()) return "the data sets give sequence input '" + v.name + "' elements of different ranks";
        for (size_t k = 0; k < d.size(); ++k)
          if (d[k] != dims[i][k]) dims[i][k] = -1;
      }
    }
  }
  return "";
}

// Dynamic inputs get one profile spanning the shapes of all data sets.
void addProfileForDynamicInputs(const Network& net, const std::vector<DataSet>& sets, BuilderConfig& config) {
  OptimizationProfile profile;
  bool any = false;
  for (const Tensor* in : net.inputs()) {
    if (isStatic(in->dims)) continue;
    Dims lo, hi;
    for (const DataSet& ds : sets)
      for (const auto& [name, t] : ds.inputs) {
        if (name != in->name) continue;
        if (lo.empty()) { lo = hi = t.dims(); continue; }
        if (t.dims().size() != lo.size()) continue;  // rank mismatch: let the engine report it
        for (size_t d = 0; d < lo.size(); ++d) { lo[d] = std::min(lo[d], t.dims()[d]); hi[d] = std::max(hi[d], t.dims()[d]); }
      }
    if (lo.empty()) continue;
    profile.setDimensions(in->name, OptProfileSelector::kMIN, lo);
    profile.setDimensions(in->name, OptProfileSelector::kOPT, hi);
    profile.setDimensions(in->name, OptProfileSelector::kMAX, hi);
    any = true;
  }
  if (any) config.addOptimizationProfile(profile);
}

// Memory for outputs whose shape is known only during the run (IOutputAllocator): a fresh
// buffer from IoMemory whenever a larger one is asked for; remembers each output's dims.
class GrowingOutputs : public IOutputAllocator {
 public:
  explicit GrowingOutputs(IoMemory& memory) : memory_(memory) {}
  void* reallocateOutput(const std::string& name, void* current, uint64_t size, uint64_t) override {
    size_t& cap = capacity_[name];
    if (current && size <= cap) return current;
    cap = std::max<size_t>(static_cast<size_t>(size), 1);
    return buffers_[name] = memory_.allocate(cap);
  }
  void notifyShape(const std::string& name, const Dims& dims) override { dims_[name] = dims; }
  std::map<std::string, Dims> dims_;
  std::map<std::string, void*> buffers_;

 private:
  IoMemory& memory_;
  std::map<std::string, size_t> capacity_;
};

// Binds inputs and outputs, runs, and compares. Returns "" on success, else the failure reason.
std::string runDataSet(const Engine& engine, ExecutionContext& ctx, const DataSet& ds, const Tolerance& tol,
                       DeviceType device) {
  std::map<std::string, const HostTensor*> given;
  for (const auto& [name, t] : ds.inputs) given[name] = &t;
  std::unique_ptr<IoMemory> memory = IoMemory::create(device);

  // Inputs the engine does not have (pruned as unused) are ignored; missing ones are an error.
  std::vector<std::string> outputNames;
  for (int i = 0; i < engine.getNbIOTensors(); ++i) {
    std::string name = engine.getIOTensorName(i);
    if (engine.getTensorIOMode(name) == TensorIOMode::kOUTPUT) { outputNames.push_back(name); continue; }
    auto it = given.find(name);
    if (it == given.end()) return "engine input '" + name + "' has no data in " + ds.dirName;
    const HostTensor& t = *it->second;
    if (engine.getTensorDataType(name) != t.type())
      return "input '" + name + "' is " + toString(engine.getTensorDataType(name)) + " in the engine but the data is " +
             toString(t.type());
    ctx.setInputShape(name, t.dims());
    ctx.setTensorAddress(name, memory->upload(t));
  }

  std::map<std::string, std::pair<HostTensor, void*>> actual;  // host copy, device buffer
  GrowingOutputs dynamic(*memory);
  for (const std::string& name : outputNames) {
    Dims dims = ctx.getTensorShape(name);
    if (!isStatic(dims)) {  // data-dependent: memory and shape come during the run
      ctx.setOutputAllocator(name, &dynamic);
      continue;
    }
    ctx.setOutputAllocator(name, nullptr);
    // Poisoned, so that an output (or part of one) the engine never writes fails the comparison.
    const HostTensor* want = nullptr;
    for (const auto& [n, t] : ds.outputs)
      if (n == name) want = &t;
    HostTensor host = poisonedOutput(engine.getTensorDataType(name), dims, want);
    void* deviceBuffer = memory->upload(host);
    actual[name] = {host, deviceBuffer};
    ctx.setTensorAddress(name, deviceBuffer);
  }
  ctx.enqueue();
  memory->synchronize();
  for (const std::string& name : outputNames) {
    if (ctx.getOutputAllocator(name) != &dynamic) continue;
    auto d = dynamic.dims_.find(name);
    if (d == dynamic.dims_.end()) return "output '" + name + "': the engine never reported its shape (notifyShape)";
    if (!isStatic(d->second)) return "output '" + name + "': the engine reported the unresolved shape " + toString(d->second);
    actual[name] = {HostTensor(engine.getTensorDataType(name), d->second), dynamic.buffers_[name]};
  }

  // A sequence output longer than expected shows as an extra element output.
  for (const auto& [name, count] : ds.sequences)
    if (actual.count(sequenceElementName(name, count)))
      return ds.dirName + ": sequence '" + name + "' has more elements than the expected " + std::to_string(count);
  for (const auto& [name, expected] : ds.outputs) {
    auto it = actual.find(name);
    if (it == actual.end()) return "the engine has no output '" + name + "'";
    auto& [host, deviceBuffer] = it->second;
    memory->download(deviceBuffer, host);
    std::string diff = compareTensors(host, expected, tol);
    if (!diff.empty()) return ds.dirName + ": output '" + name + "': " + diff;
  }
  return "";
}

Outcome skip(const std::string& why) { return {Verdict::kSkip, "unsupported: " + why}; }
Outcome fail(const std::string& why) { return {Verdict::kFail, why}; }

}  // namespace

TestMeta loadTestMeta(const std::string& testDir) {
  TestMeta meta;
  fs::path p = fs::path(testDir) / "meta.json";
  if (!fs::exists(p)) return meta;
  JsonValue j = parseJson(readFile(p));
  meta.tol.rtol = j.numberOr("rtol", meta.tol.rtol);
  meta.tol.atol = j.numberOr("atol", meta.tol.atol);
  meta.opType = j.stringOr("op_type", "");
  meta.domain = j.stringOr("domain", "");
  meta.expanded = j.boolOr("expanded", false);
  meta.inputs = parseValueSpecs(j.find("inputs"));
  meta.outputs = parseValueSpecs(j.find("outputs"));
  return meta;
}

Outcome runTestCase(const std::string& testDir, const TestMeta& meta, const RunOptions& options) {
  std::string nonTensor = nonTensorValue(meta);
  if (!nonTensor.empty()) return skip(nonTensor);

  // Test data first: an element type kiln cannot hold (string, complex, float8) is unsupported.
  std::vector<DataSet> sets;
  try {
    for (const fs::path& dir : dataSetDirs(testDir)) {
      DataSet ds;
      ds.dirName = dir.filename().string();
      ds.inputs = readTensors(dir, "input", meta.inputs, ds.sequences);
      ds.outputs = readTensors(dir, "output", meta.outputs, ds.sequences);
      sets.push_back(std::move(ds));
    }
  } catch (const UnsupportedError& e) {
    return skip(std::string("test data: ") + e.what());
  } catch (const std::exception& e) {
    return fail(std::string("reading test data: ") + e.what());
  }
  if (sets.empty()) return fail("no test_data_set_* directory");

  QuietLogger logger(options.verbose);
  std::unique_ptr<Engine> engine;
  try {
    OnnxParserOptions parserOptions;
    std::string problem = sequenceInputDims(meta, sets, parserOptions);
    if (!problem.empty()) return skip(problem);
    Network net;
    parseOnnxFile((fs::path(testDir) / "model.onnx").string(), net, logger, parserOptions);
    // Random ops draw from kiln's own generator: their values cannot equal the test's (NumPy's).
    for (const auto& l : net.layers())
      if (l->op == "Bernoulli" || l->op.rfind("RandomUniform", 0) == 0 || l->op.rfind("RandomNormal", 0) == 0)
        return skip("random outputs (layer '" + l->name + "', " + l->op + "): no reference values to compare with");
    BuilderConfig config;
    config.setDevice(options.device);
    config.setThreads(options.threads);
    config.setBuilderOptimizationLevel(options.optLevel);
    // The node tests check FP32 at rtol 1e-3: TF32 matmul/conv (10-bit mantissa) is a precision
    // the user opts into, not what FP32 conformance measures.
    config.setFlag(BuilderFlag::kTF32, false);
    addProfileForDynamicInputs(net, sets, config);
    engine = Builder(logger).build(net, config);
  } catch (const UnsupportedError& e) {
    return skip(e.what());
  } catch (const std::exception& e) {
    return fail(std::string("import/build: ") + e.what());
  }

  try {
    std::unique_ptr<ExecutionContext> ctx = engine->createExecutionContext();
    for (const DataSet& ds : sets) {
      std::string problem = runDataSet(*engine, *ctx, ds, meta.tol, options.device);
      if (!problem.empty()) return fail(problem);
    }
  } catch (const std::exception& e) {
    return fail(std::string("run: ") + e.what());
  }
  return {Verdict::kPass, ""};
}

}  // namespace kiln::conformance

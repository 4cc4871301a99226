#include "engine_io.h"

#include <algorithm>
#include <set>

#include "inputs.h"

namespace kiln::cli {

namespace {

using Severity = ILogger::Severity;

std::string joinNames(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "'" : ", '") + n + "'";
  return s.empty() ? "none" : s;
}

//! Every name a shape/input flag mentions must be an input.
template <typename Map>
void checkNames(const char* flag, const Map& given, const std::vector<std::string>& inputs) {
  std::set<std::string> known(inputs.begin(), inputs.end());
  for (const auto& entry : given)
    if (!known.count(entry.first))
      throw UsageError(std::string(flag) + ": '" + entry.first + "' is not an input (inputs: " + joinNames(inputs) +
                       ")");
}

//! `dims` must have the input's rank and agree with its static dims.
void checkCompatible(const std::string& what, const std::string& input, const Dims& declared, const Dims& dims) {
  bool ok = declared.size() == dims.size();
  for (size_t i = 0; ok && i < dims.size(); ++i) ok = declared[i] < 0 || declared[i] == dims[i];
  if (!ok)
    throw UsageError(what + ": shape " + toString(dims) + " does not fit input '" + input + "' of shape " +
                     toString(declared));
}

const Dims* lookup(const ShapeMap& m, const std::string& name) {
  auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}

}  // namespace

std::vector<OptimizationProfile> makeProfiles(const Network& network, const Options& opts, ILogger& logger) {
  std::vector<std::string> names;
  for (const Tensor* t : network.inputs()) names.push_back(t->name);
  checkNames("--shapes", opts.shapes, names);
  const std::pair<const char*, const std::vector<ShapeMap>*> flags[] = {
      {"--minShapes", &opts.minShapes}, {"--optShapes", &opts.optShapes}, {"--maxShapes", &opts.maxShapes}};
  for (auto& [flag, maps] : flags)
    for (const ShapeMap& m : *maps) checkNames(flag, m, names);
  const size_t count = std::max({size_t(1), opts.minShapes.size(), opts.optShapes.size(), opts.maxShapes.size()});
  auto at = [](const std::vector<ShapeMap>& maps, size_t p, const std::string& name) {
    return maps.empty() ? nullptr : lookup(maps[p], name);
  };

  std::vector<OptimizationProfile> profiles(count);
  bool anyDynamic = false;
  for (const Tensor* t : network.inputs()) {
    const Dims* rt = lookup(opts.shapes, t->name);
    if (rt) checkCompatible("--shapes", t->name, t->dims, *rt);
    for (size_t p = 0; p < count; ++p) {
      const Dims* mn = at(opts.minShapes, p, t->name);
      const Dims* op = at(opts.optShapes, p, t->name);
      const Dims* mx = at(opts.maxShapes, p, t->name);
      if (mn) checkCompatible("--minShapes", t->name, t->dims, *mn);
      if (op) checkCompatible("--optShapes", t->name, t->dims, *op);
      if (mx) checkCompatible("--maxShapes", t->name, t->dims, *mx);
      if (isStatic(t->dims)) continue;
      anyDynamic = true;
      Dims opt, mnDims, mxDims;
      if (mn || op || mx) {
        opt = op ? *op : rt && count == 1 ? *rt : mn ? *mn : *mx;
        mnDims = mn ? *mn : opt;
        mxDims = mx ? *mx : opt;
      } else if (rt && count == 1) {
        opt = mnDims = mxDims = *rt;
      } else if (count > 1) {
        throw UsageError("dynamic input '" + t->name + "' has no shapes in optimization profile " + std::to_string(p) +
                         " (give it in every repetition of --minShapes/--optShapes/--maxShapes)");
      } else {
        opt = t->dims;
        for (auto& d : opt) d = d < 0 ? 1 : d;
        mnDims = mxDims = opt;
        logger.log(Severity::kWARNING, "dynamic input '" + t->name + "' " + toString(t->dims) +
                                           " has no shapes given; building for " + toString(opt) +
                                           " (set --minShapes/--optShapes/--maxShapes or --shapes)");
      }
      profiles[p].setDimensions(t->name, OptProfileSelector::kMIN, mnDims);
      profiles[p].setDimensions(t->name, OptProfileSelector::kOPT, opt);
      profiles[p].setDimensions(t->name, OptProfileSelector::kMAX, mxDims);
    }
  }
  if (!anyDynamic) {
    if (count > 1) logger.log(Severity::kWARNING, "every input is static: the optimization profiles are ignored");
    return {};
  }
  return profiles;
}

std::map<std::string, HostTensor> prepareInputs(const Engine& engine, const Options& opts, ILogger& logger) {
  std::vector<std::string> names;
  for (int i = 0; i < engine.getNbIOTensors(); ++i) {
    std::string n = engine.getIOTensorName(i);
    if (engine.getTensorIOMode(n) == TensorIOMode::kINPUT) names.push_back(n);
  }
  checkNames("--shapes", opts.shapes, names);
  checkNames("--shapes", opts.shapeValues, names);
  checkNames("--loadInputs", opts.loadInputs, names);

  std::map<std::string, HostTensor> data;
  uint64_t seed = 42;
  for (const std::string& name : names) {
    DataType type = engine.getTensorDataType(name);
    Dims declared = engine.getTensorShape(name);
    const Dims* requested = lookup(opts.shapes, name);
    if (requested) checkCompatible("--shapes", name, declared, *requested);
    HostTensor t;
    auto file = opts.loadInputs.find(name);
    auto values = opts.shapeValues.find(name);
    if (values != opts.shapeValues.end()) {
      if (file != opts.loadInputs.end())
        throw UsageError("input '" + name + "' has values from both --shapes and --loadInputs");
      if (type != DataType::kINT64 && type != DataType::kINT32)
        throw UsageError("--shapes: '" + name + "' is " + toString(type) + ", not an int32/int64 shape tensor");
      const int64_t n = static_cast<int64_t>(values->second.size());
      t = HostTensor(type, declared.empty() && n == 1 ? Dims{} : Dims{n});
      for (int64_t k = 0; k < n; ++k) {
        if (type == DataType::kINT64) t.as<int64_t>()[k] = values->second[k];
        else t.as<int32_t>()[k] = static_cast<int32_t>(values->second[k]);
      }
      checkCompatible("--shapes", name, declared, t.dims());
      logger.log(Severity::kINFO, "Input '" + name + "': shape tensor values from --shapes");
    } else if (file != opts.loadInputs.end()) {
      t = loadInputFile(file->second, type, requested ? *requested : declared);
      if (t.type() != type)
        throw Error("--loadInputs: '" + file->second + "' holds " + toString(t.type()) + " data but input '" + name +
                    "' is " + toString(type));
      if (requested && t.dims() != *requested)
        throw Error("--loadInputs: '" + file->second + "' has shape " + toString(t.dims()) + " but --shapes gives " +
                    toString(*requested) + " for '" + name + "'");
      checkCompatible("--loadInputs '" + file->second + "'", name, declared, t.dims());
      logger.log(Severity::kINFO, "Input '" + name + "': " + toString(t.dims()) + " from '" + file->second + "'");
    } else {
      Dims dims = requested            ? *requested
                  : isStatic(declared) ? declared
                                       : engine.getProfileShape(name, opts.useProfile, OptProfileSelector::kOPT);
      if (!isStatic(dims) || dims.size() != declared.size())
        throw UsageError("input '" + name + "' is dynamic " + toString(declared) + ": give its shape with --shapes");
      t = randomInput(name, type, dims, seed);
      logger.log(Severity::kVERBOSE,
                 "Input '" + name + "': " + toString(dims) + " random (seed " + std::to_string(seed) + ")");
    }
    ++seed;
    data.emplace(name, t);
  }
  return data;
}

void printEngineIO(std::ostream& os, const Engine& engine) {
  os << "[I] Engine I/O:\n";
  for (int i = 0; i < engine.getNbIOTensors(); ++i) {
    std::string name = engine.getIOTensorName(i);
    bool input = engine.getTensorIOMode(name) == TensorIOMode::kINPUT;
    Dims dims = engine.getTensorShape(name);
    os << "[I]   " << (input ? "input  '" : "output '") << name << "': " << toString(engine.getTensorDataType(name))
       << ' ' << toString(dims);
    for (int p = 0; input && !isStatic(dims) && p < engine.getNbOptimizationProfiles(); ++p)
      os << (p ? "\n[I]     " : "  ") << "profile" << (engine.getNbOptimizationProfiles() > 1 ? " " + std::to_string(p) : "")
         << " min " << toString(engine.getProfileShape(name, p, OptProfileSelector::kMIN)) << " opt "
         << toString(engine.getProfileShape(name, p, OptProfileSelector::kOPT)) << " max "
         << toString(engine.getProfileShape(name, p, OptProfileSelector::kMAX));
    os << '\n';
  }
}

}  // namespace kiln::cli

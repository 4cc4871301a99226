// The CLI's calibrator (calib_data.h). Names are checked before the build starts, so that a typo
// costs no calibration run; types and dims when a batch is read (loading every file twice would).
#include "calib_data.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "inputs.h"

namespace kiln::cli {

namespace fs = std::filesystem;

CalibrationAlgoType parseCalibAlgo(const std::string& name) {
  if (name == "entropy") return CalibrationAlgoType::kENTROPY_CALIBRATION_2;
  if (name == "minmax") return CalibrationAlgoType::kMINMAX_CALIBRATION;
  if (name == "percentile") return CalibrationAlgoType::kPERCENTILE;
  throw Error("--calibAlgo: '" + name + "' is not entropy, minmax or percentile");
}

DirectoryCalibrator::DirectoryCalibrator(const Network& net, const std::string& dir, const std::string& cacheFile,
                                         CalibrationAlgoType algo, double percentile)
    : cacheFile_(cacheFile), algo_(algo), percentile_(percentile) {
  std::string names;
  for (const Tensor* in : net.inputs()) {
    inputs_[in->name] = {in->type, in->dims};
    names += (names.empty() ? "'" : ", '") + in->name + "'";
  }
  if (dir.empty()) return;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error("--calibData: '" + dir + "' is not a directory");
  std::map<size_t, std::map<std::string, std::string>> batches;
  const std::string form = "; name files <input>.npy or <input>.<k>.npy (.pb alike) for inputs " + names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (file.empty() || file[0] == '.' || !entry.is_regular_file()) continue;
    const std::string ext = entry.path().extension().string();
    if (ext != ".npy" && ext != ".pb") throw Error("--calibData: '" + entry.path().string() + "' is not a .npy or .pb file" + form);
    const std::string stem = file.substr(0, file.size() - ext.size());
    // "<input>" is batch 0, "<input>.<k>" batch k; the longest input name that fits wins ("input.1.3").
    std::string input;
    size_t k = 0;
    for (const auto& [name, _] : inputs_) {
      if (stem == name) {
        input = name, k = 0;
        break;
      }
      const std::string rest = stem.size() > name.size() + 1 && stem.compare(0, name.size(), name) == 0 && stem[name.size()] == '.'
                                   ? stem.substr(name.size() + 1) : std::string();
      if (!rest.empty() && rest.size() <= 9 && std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
          name.size() > input.size())
        input = name, k = std::stoul(rest);
    }
    if (input.empty()) throw Error("--calibData: '" + entry.path().string() + "' names no network input" + form);
    if (!batches[k].emplace(input, entry.path().string()).second)
      throw Error("--calibData: batch " + std::to_string(k) + " of input '" + input + "' is given by two files (" + batches[k][input] + ", " +
                  entry.path().string() + ")");
  }
  if (batches.empty()) throw Error("--calibData: '" + dir + "' holds no calibration batch" + form);
  for (auto& [k, files] : batches) {
    for (const auto& [name, _] : inputs_)
      if (!files.count(name))
        throw Error("--calibData: batch " + std::to_string(k) + " has no file for input '" + name + "' (expected " + name +
                    (k ? "." + std::to_string(k) : std::string()) + ".npy in '" + dir + "')");
    files_.push_back(std::move(files));
  }
}

bool DirectoryCalibrator::getBatch(std::map<std::string, HostTensor>& batch) {
  if (next_ >= files_.size()) return false;
  for (const auto& [name, path] : files_[next_]) {
    const Input& in = inputs_.at(name);
    HostTensor t = loadInputFile(path, in.type, in.dims);
    if (t.type() != in.type)
      throw Error("--calibData: '" + path + "' holds " + toString(t.type()) + " data; input '" + name + "' is " + toString(in.type));
    bool fits = t.dims().size() == in.dims.size();
    for (size_t k = 0; fits && k < in.dims.size(); ++k) fits = in.dims[k] < 0 || in.dims[k] == t.dims()[k];
    if (!fits)
      throw Error("--calibData: '" + path + "' has dims " + toString(t.dims()) + "; input '" + name + "' has " + toString(in.dims));
    batch[name] = std::move(t);
  }
  ++next_;
  return true;
}

std::vector<uint8_t> DirectoryCalibrator::readCalibrationCache() {
  if (cacheFile_.empty()) return {};
  std::ifstream f(cacheFile_, std::ios::binary);
  if (!f) return {};
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void DirectoryCalibrator::writeCalibrationCache(const void* data, size_t size) {
  if (cacheFile_.empty()) return;
  std::ofstream f(cacheFile_, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  f.close();
  if (!f) throw Error("--calib: cannot write '" + cacheFile_ + "': " + std::strerror(errno));
}

}  // namespace kiln::cli

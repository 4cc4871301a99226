// PyCalibrator (py_calibrator.h).
#include "py_calibrator.h"

#include <cstring>

#include "py_tensor.h"

namespace kiln::python {

CalibrationAlgoType calibrationAlgorithm(const std::string& name) {
  if (name == "entropy") return CalibrationAlgoType::kENTROPY_CALIBRATION_2;
  if (name == "minmax") return CalibrationAlgoType::kMINMAX_CALIBRATION;
  if (name == "percentile") return CalibrationAlgoType::kPERCENTILE;
  throw Error("calibration_algorithm must be 'entropy', 'minmax' or 'percentile', not '" + name + "'");
}

bool PyCalibrator::getBatch(std::map<std::string, HostTensor>& batch) {
  py::gil_scoped_acquire gil;
  py::object r = obj_->fn().attr("get_batch")();
  if (r.is_none()) return false;
  if (!py::isinstance<py::dict>(r)) throw Error("calibrator.get_batch() must return a dict {input name: array} or None");
  for (auto [key, value] : r.cast<py::dict>()) {
    const std::string name = py::str(key);
    TensorArg t = importTensor(value, "calibration input '" + name + "'", kNoCudaConsumer);
    if (t.memory != Memory::kHost) throw Error("calibration input '" + name + "' must be in host memory (" + t.describe() + ")");
    if (!t.contiguous()) t = contiguousHostCopy(t);
    HostTensor h(t.type, t.shape);
    if (t.bytes()) std::memcpy(h.data(), t.data, t.bytes());
    batch[name] = std::move(h);
  }
  return true;
}

std::vector<uint8_t> PyCalibrator::readCalibrationCache() {
  py::gil_scoped_acquire gil;
  if (!py::hasattr(obj_->fn(), "read_calibration_cache")) return {};
  py::object r = obj_->fn().attr("read_calibration_cache")();
  if (r.is_none()) return {};
  const std::string bytes = py::bytes(r);
  return {bytes.begin(), bytes.end()};
}

void PyCalibrator::writeCalibrationCache(const void* data, size_t size) {
  py::gil_scoped_acquire gil;
  if (py::hasattr(obj_->fn(), "write_calibration_cache"))
    obj_->fn().attr("write_calibration_cache")(py::bytes(static_cast<const char*>(data), size));
}

}  // namespace kiln::python

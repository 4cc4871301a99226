// A read-only memory map of a file (the CLI's --loadEngine): the plan's bytes are read from the
// page cache where they lie, not copied into a buffer first, so loading holds one copy of the
// weights in private memory (the engine's), not two.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::cli {

class MappedFile {
 public:
  //! Maps `path` read-only; throws kiln::Error naming the file (and `what` it is) on failure.
  MappedFile(const std::string& path, const std::string& what);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }  //!< nullptr for an empty file
  size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln::cli

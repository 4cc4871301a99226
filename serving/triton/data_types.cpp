#include "data_types.h"

#include <array>
#include <utility>

#include "triton_util.h"

namespace kiln::triton {
namespace {

struct TypeName {
  DataType kiln;
  TRITONSERVER_DataType triton;
  const char* config;
};
// Every kiln type has a Triton type; Triton's BYTES (strings) has no kiln type.
constexpr std::array<TypeName, 13> kTypes{{
    {DataType::kFLOAT, TRITONSERVER_TYPE_FP32, "TYPE_FP32"},
    {DataType::kHALF, TRITONSERVER_TYPE_FP16, "TYPE_FP16"},
    {DataType::kBF16, TRITONSERVER_TYPE_BF16, "TYPE_BF16"},
    {DataType::kDOUBLE, TRITONSERVER_TYPE_FP64, "TYPE_FP64"},
    {DataType::kINT64, TRITONSERVER_TYPE_INT64, "TYPE_INT64"},
    {DataType::kINT32, TRITONSERVER_TYPE_INT32, "TYPE_INT32"},
    {DataType::kINT16, TRITONSERVER_TYPE_INT16, "TYPE_INT16"},
    {DataType::kINT8, TRITONSERVER_TYPE_INT8, "TYPE_INT8"},
    {DataType::kUINT64, TRITONSERVER_TYPE_UINT64, "TYPE_UINT64"},
    {DataType::kUINT32, TRITONSERVER_TYPE_UINT32, "TYPE_UINT32"},
    {DataType::kUINT16, TRITONSERVER_TYPE_UINT16, "TYPE_UINT16"},
    {DataType::kUINT8, TRITONSERVER_TYPE_UINT8, "TYPE_UINT8"},
    {DataType::kBOOL, TRITONSERVER_TYPE_BOOL, "TYPE_BOOL"},
}};

}  // namespace

TRITONSERVER_DataType toTritonType(DataType t) {
  for (const TypeName& n : kTypes)
    if (n.kiln == t) return n.triton;
  throw TritonError(TRITONSERVER_ERROR_UNSUPPORTED, std::string("kiln type ") + toString(t) + " has no Triton type");
}

DataType fromTritonType(TRITONSERVER_DataType t) {
  for (const TypeName& n : kTypes)
    if (n.triton == t) return n.kiln;
  throw TritonError(TRITONSERVER_ERROR_UNSUPPORTED,
                    std::string("Triton type ") + TRITONSERVER_DataTypeString(t) + " is not supported by kiln");
}

std::string toConfigType(DataType t) {
  for (const TypeName& n : kTypes)
    if (n.kiln == t) return n.config;
  throw TritonError(TRITONSERVER_ERROR_UNSUPPORTED, std::string("kiln type ") + toString(t) + " has no Triton type");
}

DataType fromConfigType(const std::string& s) {
  for (const TypeName& n : kTypes)
    if (s == n.config) return n.kiln;
  throw TritonError(TRITONSERVER_ERROR_INVALID_ARG, "data_type '" + s + "' is not a type kiln runs");
}

}  // namespace kiln::triton

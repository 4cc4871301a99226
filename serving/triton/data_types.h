// kiln's element types as Triton names them: TRITONSERVER_DataType for requests and responses,
// and the model configuration's "TYPE_*" strings.
#pragma once
#include <string>

#include "kiln/types.h"
#include "triton/core/tritonserver.h"

namespace kiln::triton {

//! Throws TritonError(UNSUPPORTED) for a kiln type Triton has no name for.
TRITONSERVER_DataType toTritonType(DataType t);
//! Throws TritonError(UNSUPPORTED) for BYTES and types kiln does not have.
DataType fromTritonType(TRITONSERVER_DataType t);
//! "TYPE_FP32" etc.
std::string toConfigType(DataType t);
//! Throws TritonError(INVALID_ARG) naming the string when it is not a type kiln runs.
DataType fromConfigType(const std::string& s);

}  // namespace kiln::triton

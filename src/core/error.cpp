#include "dfuse/core/error.h"

namespace dfuse {

Error::Error(const std::string& what) : std::runtime_error(what) {}
// Out of line so that the type information lives in libdfuse only: exceptions thrown in the
// CUDA backend library are caught by type in programs that link libdfuse.
Error::~Error() = default;

Unsupported::Unsupported(std::string op, std::string guard, const std::string& message)
    : Error(message), op_(std::move(op)), guard_(std::move(guard)) {}

CudaError::CudaError(int code, const std::string& call, const std::string& text)
    : Error(call + " failed: " + text + " (cuda error " + std::to_string(code) + ")"), code_(code) {}

}  // namespace dfuse

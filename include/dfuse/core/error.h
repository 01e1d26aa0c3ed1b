// dfuse core: error types. Every failure the library reports is one of these.
#pragma once

#include <stdexcept>
#include <string>

namespace dfuse {

// Base of every dfuse error.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what);
  ~Error() override;
};

// An input a kernel does not accept. `guard()` names the failed check ("x.last_dim_stride"),
// what() is the full message: "modulate_scale_shift: x must be contiguous in its last dim,
// got stride 2".
class Unsupported : public Error {
 public:
  Unsupported(std::string op, std::string guard, const std::string& message);
  const std::string& op() const { return op_; }
  const std::string& guard() const { return guard_; }

 private:
  std::string op_, guard_;
};

// A bad argument to a library call that is not an op input (unknown dtype name, unknown
// quality tier, a malformed registry query).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// An op or backend that is not registered, or several candidates where one was required.
class SelectionError : public Error {
 public:
  using Error::Error;
};

// A backend that cannot be loaded here (no CUDA driver, no device, library not found).
class BackendUnavailable : public Error {
 public:
  using Error::Error;
};

// A CUDA runtime error, with the runtime's own text.
class CudaError : public Error {
 public:
  CudaError(int code, const std::string& call, const std::string& text);
  int code() const { return code_; }

 private:
  int code_;
};

}  // namespace dfuse

// The one project error type. Every reader and every command reports a problem as an orion::Error
// carrying what went wrong and where (file, field or node, byte offset) plus a hint of how to fix
// it; the CLI turns it into one line and an exit code chosen by its kind.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace orion {

enum class ErrorKind {
  Usage,    // bad flags or arguments               → exit 2
  Input,    // a malformed or missing input file    → exit 3
  Runtime,  // a failure while working (I/O, limits) → exit 4
  Internal  // a broken invariant (ORION_CHECK)      → exit 5
};

int exit_code(ErrorKind kind);

struct ErrorContext {
  std::string file;     // path of the file being read, if any
  std::string field;    // the field, tensor, node or flag concerned
  int64_t offset = -1;  // byte offset in the file, -1 when not meaningful
  std::string hint;     // what the user can do about it
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message, ErrorContext ctx = {});
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  const ErrorContext& context() const { return ctx_; }

 private:
  ErrorKind kind_;
  std::string message_;
  ErrorContext ctx_;
};

// "file: field 'x' at offset N: message (hint: ...)" — the line the CLI prints.
std::string format_error_line(ErrorKind kind, const std::string& message, const ErrorContext& ctx);

// Shorthands used by readers: input_error(path, "expected ...", {.field = "dim", .offset = 4}).
[[noreturn]] void throw_input_error(const std::string& file, const std::string& message, const std::string& field = {},
                                    int64_t offset = -1, const std::string& hint = {});
[[noreturn]] void throw_usage_error(const std::string& message, const std::string& field = {}, const std::string& hint = {});
[[noreturn]] void throw_runtime_error(const std::string& message, const std::string& file = {},
                                      const std::string& hint = {});
// A large allocation that failed: a Runtime error naming what it was for and its size, e.g.
// "cannot allocate 212.0 GB for the model's parameters: out of memory (hint: ...)".
[[noreturn]] void throw_out_of_memory(const std::string& what, size_t bytes);
// aligned_alloc(64, bytes) zeroed (2 MB aligned, on huge pages where possible, from 2 MB up), or
// throw_out_of_memory(what, bytes). Free with std::free.
void* allocate_zeroed(size_t bytes, const std::string& what);
// Asks for transparent huge pages for the whole 2 MB pages inside [p, p + bytes) (advice: no effect
// on failure). Only pages not touched yet get them.
void advise_huge_pages(void* p, size_t bytes);
// v = n copies of `value`, its memory (when ≥ 2 MB) on huge pages like allocate_zeroed's: the
// storage is reserved and advised before the first write touches it. For large buffers streamed
// every step (optimiser state, logits), where 4 KB pages cost a TLB miss per 4 KB.
template <typename T>
void assign_on_huge_pages(std::vector<T>& v, size_t n, const T& value = T()) {
  if (v.capacity() < n) {
    std::vector<T>().swap(v);
    v.reserve(n);
    advise_huge_pages(v.data(), n * sizeof(T));
  }
  v.assign(n, value);
}
[[noreturn]] void check_failed(const char* cond, const char* file, int line, const std::string& msg);

}  // namespace orion

// Invariants that must never fail; a failure is a bug in Orion, reported as an Internal error.
#define ORION_CHECK(cond, ...)                                                                  \
  do {                                                                                          \
    if (!(cond)) ::orion::check_failed(#cond, __FILE__, __LINE__, fmt::format("" __VA_ARGS__)); \
  } while (0)

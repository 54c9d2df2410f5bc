#include "base/error.h"

#include <cstdlib>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

namespace orion {

int exit_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Usage: return 2;
    case ErrorKind::Input: return 3;
    case ErrorKind::Runtime: return 4;
    case ErrorKind::Internal: return 5;
  }
  return 1;
}

std::string format_error_line(ErrorKind kind, const std::string& message, const ErrorContext& ctx) {
  std::string line;
  if (!ctx.file.empty()) line += ctx.file + ": ";
  if (!ctx.field.empty()) line += fmt::format("{} '{}'", kind == ErrorKind::Usage ? "option" : "field", ctx.field);
  if (ctx.offset >= 0) line += fmt::format("{}at byte {}", ctx.field.empty() ? "" : " ", ctx.offset);
  if (!ctx.field.empty() || ctx.offset >= 0) line += ": ";
  line += message;
  if (!ctx.hint.empty()) line += " (hint: " + ctx.hint + ")";
  return line;
}

Error::Error(ErrorKind kind, const std::string& message, ErrorContext ctx)
    : std::runtime_error(format_error_line(kind, message, ctx)), kind_(kind), message_(message), ctx_(std::move(ctx)) {}

void throw_input_error(const std::string& file, const std::string& message, const std::string& field, int64_t offset,
                       const std::string& hint) {
  throw Error(ErrorKind::Input, message, {file, field, offset, hint});
}

void throw_usage_error(const std::string& message, const std::string& field, const std::string& hint) {
  throw Error(ErrorKind::Usage, message, {{}, field, -1, hint});
}

void throw_runtime_error(const std::string& message, const std::string& file, const std::string& hint) {
  throw Error(ErrorKind::Runtime, message, {file, {}, -1, hint});
}

void throw_out_of_memory(const std::string& what, size_t bytes) {
  const double gb = double(bytes) / 1e9;
  throw Error(ErrorKind::Runtime,
              gb >= 0.1 ? fmt::format("cannot allocate {:.1f} GB for {}: out of memory", gb, what)
                        : fmt::format("cannot allocate {} bytes for {}: out of memory", bytes, what),
              {{}, {}, -1, "use a smaller model, a smaller batch or sequence, or a machine with more memory"});
}

void* allocate_zeroed(size_t bytes, const std::string& what) {
  // Buffers of 2 MB and more (weights, activations, optimiser state) start on a 2 MB boundary and
  // ask for transparent huge pages: a decode step streams every weight once, and with 4 KB pages
  // that is one TLB miss per 4 KB read; with 2 MB pages almost none. (Linux's THP "madvise" mode,
  // Debian's default, gives huge pages only to memory that asks; elsewhere this is a no-op.)
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  const size_t rounded = (bytes + align - 1) / align * align;
  // More than the machine's physical memory would only end in the kernel's OOM killer while the
  // zeroing touches the pages (Linux overcommits): refuse it up front, with the size.
  static const double physical = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  if (rounded < bytes || (physical > 0 && double(rounded) > physical)) throw_out_of_memory(what, bytes);
  void* p = std::aligned_alloc(align, rounded ? rounded : 64);
  if (!p) throw_out_of_memory(what, bytes);
#ifdef MADV_HUGEPAGE
  if (align == kHuge) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure changes nothing
#endif
  std::memset(p, 0, rounded);
  return p;
}

void advise_huge_pages(void* p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) / kHuge * kHuge;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / kHuge * kHuge;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)p, (void)bytes;
#endif
}

void check_failed(const char* cond, const char* file, int line, const std::string& msg) {
  throw Error(ErrorKind::Internal,
              fmt::format("internal check failed: {} at {}:{}{}{}", cond, file, line, msg.empty() ? "" : ": ", msg),
              {{}, {}, -1, "this is a bug in Orion; please report it with the command you ran"});
}

}  // namespace orion

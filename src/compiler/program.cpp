// Binding tables (rules C5, C6, C7, C13) and writing a compiled program to disk.
#include "compiler/program.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "base/error.h"
#include "base/file.h"

namespace orion::compiler {

const Binding* BindingTable::find(const std::string& name) const {
  for (const Binding& b : bindings)
    if (b.name == name) return &b;
  return nullptr;
}

std::vector<std::string> BindingTable::names() const {
  std::vector<std::string> n;
  for (const Binding& b : bindings) n.push_back(b.name);
  return n;
}

namespace {
std::string layout_note(const ir::Type& t) {
  bool ane = t.shape.size() == 4 && t.shape[0] == 1 && t.shape[2] == 1;
  return fmt::format("{} {}, packed from byte 0 (C14)", ane ? "[1, C, 1, S] channel-major" : "row-major",
                     ir::elem_name(t.elem));
}
}  // namespace

BindingTable make_binding_table(const std::vector<std::pair<std::string, ir::Type>>& declared, const ChipProfile& chip) {
  BindingTable t;
  int64_t largest = 0;
  for (size_t i = 0; i < declared.size(); i++) {
    const auto& [name, type] = declared[i];
    int64_t bytes = int64_t(type.bytes());
    largest = std::max(largest, bytes);
    t.bindings.push_back({name, type, bytes, 0, int(i), layout_note(type)});
  }
  // C6: the hardware binds by name, in byte-wise sorted order.
  std::sort(t.bindings.begin(), t.bindings.end(), [](const Binding& a, const Binding& b) { return a.name < b.name; });
  if (t.bindings.empty()) return t;
  // C5/C13: one allocation size for the whole side; C7: at least the minimum buffer.
  int64_t a = std::max<int64_t>(chip.buffer_alignment, 1);
  t.alloc_bytes = (std::max(largest, chip.min_buffer_bytes) + a - 1) / a * a;
  for (Binding& b : t.bindings) b.alloc_bytes = t.alloc_bytes;
  return t;
}

void save_program(const CompiledProgram& p, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "weights", ec);
  if (ec) throw_runtime_error(fmt::format("cannot create folder: {}", ec.message()), dir);
  write_file_atomic((fs::path(dir) / "model.mil").string(), [&](FileWriter& w) { w.write_str(p.mil_text); });
  for (const auto& [key, image] : p.weights) {
    ORION_CHECK(key.rfind(kWeightKeyPrefix, 0) == 0, "weight key {} lacks {}", key, kWeightKeyPrefix);
    std::string file = key.substr(std::string(kWeightKeyPrefix).size());
    write_file_atomic((fs::path(dir) / "weights" / file).string(),
                      [&image = image](FileWriter& w) { w.write(image.data(), image.size()); });
  }
}

}  // namespace orion::compiler

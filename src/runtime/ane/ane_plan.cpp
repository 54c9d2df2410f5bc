// The Apple driver's plain-C++ half: see ane_plan.h.
#include "runtime/ane/ane_plan.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <numeric>
#include <random>
#include <string_view>

#include <unistd.h>

#include <fmt/format.h>

#include "base/file.h"
#include "compiler/mil/parse_mil.h"
#include "runtime/anesim/milblob_storage.h"  // the blob segments a delta reload patches

namespace orion::runtime::ane {

namespace fs = std::filesystem;

namespace {

// One component of a path under the model folder: not empty, not "." or "..", no separators.
bool safe_component(std::string_view c) {
  if (c.empty() || c == "." || c == "..") return false;
  return c.find_first_of(std::string_view("/\\\0", 3)) == std::string_view::npos;
}

}  // namespace

// ---- weight dictionary --------------------------------------------------------------------------

std::vector<WeightEntry> plan_weight_entries(const WeightDict& weights, const std::string& program) {
  const std::string prefix = compiler::kWeightKeyPrefix;  // "@model_path/weights/"
  std::vector<WeightEntry> entries;
  for (const auto& [key, image] : weights) {
    auto bad = [&, &key = key](const std::string& why) {
      return DriverError(DriverStatus::CompileFailed, fmt::format("program '{}': weight key '{}' {}", program, key, why),
                         fmt::format("weight keys are '{}<file>.bin', as the MIL BLOBFILE paths name them", prefix));
    };
    if (key.rfind(prefix, 0) != 0) throw bad(fmt::format("does not start with '{}'", prefix));
    // The rest may have sub-folders, but every component must stay inside weights/.
    std::string_view rest = std::string_view(key).substr(prefix.size());
    size_t start = 0;
    while (true) {
      size_t slash = rest.find('/', start);
      std::string_view comp = rest.substr(start, slash == std::string_view::npos ? rest.npos : slash - start);
      if (!safe_component(comp)) throw bad("names a path outside the model's weights folder");
      if (slash == std::string_view::npos) break;
      start = slash + 1;
    }
    entries.push_back({key, key.substr(std::string(kModelPathPrefix).size()), 0, &image});
  }
  return entries;  // std::map iterates in key order
}

// ---- MIL text -------------------------------------------------------------------------------------

std::optional<size_t> first_invalid_utf8(const std::string& text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    int len;
    uint32_t cp, min;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
      min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
      min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
      min = 0x10000;
    } else return i;  // a continuation byte or 0xF8…0xFF where a sequence must start
    if (n - i < size_t(len)) return i;
    for (int k = 1; k < len; k++) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += size_t(len);
  }
  return std::nullopt;
}

void check_mil_utf8(const std::string& mil_text, const std::string& program) {
  if (auto at = first_invalid_utf8(mil_text))
    throw DriverError(DriverStatus::CompileFailed,
                      fmt::format("program '{}': the MIL text is not UTF-8 (byte {} = 0x{:02x})", program, *at,
                                  unsigned(static_cast<unsigned char>(mil_text[*at]))),
                      "the framework takes the MIL text as UTF-8 bytes (C19); emit it with the compiler");
}

// ---- the model folder ---------------------------------------------------------------------------

ModelDir model_dir_layout(const std::string& tmp_dir, const std::string& hex_identifier) {
  if (!safe_component(hex_identifier))
    throw DriverError(DriverStatus::CompileFailed,
                      fmt::format("the framework gave the model the identifier '{}', which is not a folder name",
                                  hex_identifier));
  std::string root = tmp_dir;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  root += "/" + hex_identifier;
  return {root, root + "/" + kMilFileName, root + "/" + kWeightsDirName};
}

void write_weight_files(const ModelDir& dir, const std::vector<WeightEntry>& weights) {
  for (const WeightEntry& e : weights) {
    std::string path = dir.path_of(e);
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    if (ec) throw_runtime_error(fmt::format("cannot create folder: {}", ec.message()), fs::path(path).parent_path());
    write_file_atomic(path, [&](FileWriter& w) { w.write(e.data->data(), e.data->size()); });
  }
}

void write_model_dir(const ModelDir& dir, const std::string& mil_text, const std::vector<WeightEntry>& weights) {
  std::error_code ec;
  fs::create_directories(dir.weights_dir, ec);
  if (ec) throw_runtime_error(fmt::format("cannot create folder: {}", ec.message()), dir.weights_dir);
  write_file_atomic(dir.mil_path, [&](FileWriter& w) { w.write_str(mil_text); });
  write_weight_files(dir, weights);
}

std::string with_build_info_entry(const std::string& mil_text, const std::string& key, const std::string& value) {
  const std::string entry = fmt::format("{{\"{}\", \"{}\"}}", key, value);
  static constexpr std::string_view kDictOpen = "[buildInfo = dict<string, string>({";
  if (size_t at = mil_text.find(kDictOpen); at != std::string::npos) {
    at += kDictOpen.size();
    const bool empty = at < mil_text.size() && mil_text[at] == '}';
    return mil_text.substr(0, at) + entry + (empty ? "" : ", ") + mil_text.substr(at);
  }
  // No buildInfo: one after the first line, `program(1.3)`.
  const size_t eol = mil_text.find('\n');
  if (mil_text.rfind("program(", 0) != 0 || eol == std::string::npos) return mil_text;
  return mil_text.substr(0, eol + 1) + "[buildInfo = dict<string, string>({" + entry + "})]\n" + mil_text.substr(eol + 1);
}

const std::string& process_salt() {
  static const std::string salt = [] {
    std::random_device random;
    const uint64_t bits = (uint64_t(random()) << 32) ^ uint64_t(random());
    return fmt::format("{}-{:016x}", static_cast<long>(getpid()), bits);
  }();
  return salt;
}

void remove_model_dir(const ModelDir& dir) noexcept {
  std::error_code ec;
  fs::remove_all(dir.root, ec);  // best effort: a stale temp folder is harmless
}

// ---- the folder across an unload ---------------------------------------------------------------

KeptModelDir::KeptModelDir(const ModelDir& dir) : root_(dir.root), kept_root_(dir.root + ".orion-kept") {
  std::error_code ec;
  fs::remove_all(kept_root_, ec);  // a previous process's, left by a crash
  for (auto it = fs::recursive_directory_iterator(root_, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const fs::path rel = fs::relative(it->path(), root_, ec);
    if (ec) continue;
    const fs::path kept = fs::path(kept_root_) / rel;
    std::error_code link_ec;
    fs::create_directories(kept.parent_path(), link_ec);
    if (!link_ec) fs::create_hard_link(it->path(), kept, link_ec);
    if (!link_ec) files_.push_back(rel.string());
  }
}

KeptModelDir::~KeptModelDir() {
  std::error_code ec;
  fs::remove_all(kept_root_, ec);  // the folder's own names keep the bytes
}

int KeptModelDir::restore() {
  int restored = 0;
  for (const std::string& rel : files_) {
    const fs::path path = fs::path(root_) / rel;
    std::error_code ec;
    if (fs::exists(path, ec)) continue;
    fs::create_directories(path.parent_path(), ec);
    if (!ec) fs::create_hard_link(fs::path(kept_root_) / rel, path, ec);
    if (ec)
      throw_runtime_error(fmt::format("cannot put back a file the framework removed at unload: {}", ec.message()),
                          path.string());
    restored++;
  }
  return restored;
}

bool ModelDirUsers::release(const std::string& root) {
  auto it = users_.find(root);
  if (it == users_.end()) return false;
  if (--it->second > 0) return false;
  users_.erase(it);
  return true;
}

int ModelDirUsers::users(const std::string& root) const {
  auto it = users_.find(root);
  return it == users_.end() ? 0 : it->second;
}

// ---- bindings -----------------------------------------------------------------------------------

IoPlan plan_io(const std::string& mil_text, const WeightDict& weights, const compiler::ChipProfile& chip,
               const std::string& program) {
  ir::Graph g;
  try {
    g = compiler::parse_mil(mil_text, weights, program);
  } catch (const DriverError&) {
    throw;
  } catch (const Error& e) {
    throw DriverError(DriverStatus::CompileFailed, e.what(), "check the program with `orion mil check`");
  }
  std::vector<std::pair<std::string, ir::Type>> ins, outs;
  for (int i : g.input_nodes()) ins.emplace_back(g.node(i).name, g.node(i).results.at(0));
  for (const ir::GraphOutput& o : g.outputs()) outs.emplace_back(o.name, g.type(o.value));
  return {compiler::make_binding_table(ins, chip), compiler::make_binding_table(outs, chip)};
}

std::vector<int> request_indices(const compiler::BindingTable& table) {
  std::vector<int> idx(table.bindings.size());
  std::iota(idx.begin(), idx.end(), 0);
  return idx;
}

std::vector<int> declared_to_binding(const compiler::BindingTable& table) {
  std::vector<int> map(table.bindings.size(), -1);
  for (size_t i = 0; i < table.bindings.size(); i++) map.at(size_t(table.bindings[i].declared_index)) = int(i);
  return map;
}

// ---- surfaces -----------------------------------------------------------------------------------

SurfaceSpec surface_spec(size_t alloc_bytes) {
  SurfaceSpec s;
  s.width = s.bytes_per_row = s.alloc_size = int64_t(alloc_bytes);
  return s;
}

void check_surfaces(const IoPlan& io, const std::vector<size_t>& input_bytes, const std::vector<size_t>& output_bytes,
                    const compiler::ChipProfile& chip, const std::string& program) {
  auto side = [&](const compiler::BindingTable& t, const std::vector<size_t>& bytes, const char* what, const char* rule) {
    auto fail = [&](const std::string& msg, const std::string& hint) {
      throw DriverError(DriverStatus::BadSurfaces, fmt::format("program '{}': {}", program, msg), hint);
    };
    if (bytes.size() != t.bindings.size())
      fail(fmt::format("{} {} surfaces for {} {}s ({})", bytes.size(), what, t.bindings.size(), what,
                       fmt::join(t.names(), ", ")),
           "pass one surface per MIL name, in alphabetical order (C6)");
    for (size_t i = 0; i < bytes.size(); i++) {
      const compiler::Binding& b = t.bindings[i];
      if (bytes[i] != bytes[0])
        fail(fmt::format("{} '{}' has {} bytes but '{}' has {}: every {} surface needs the same allocation ({})", what,
                         b.name, bytes[i], t.bindings[0].name, bytes[0], what, rule),
             fmt::format("allocate every {} surface with {} bytes", what, t.alloc_bytes));
      if (int64_t(bytes[i]) < chip.min_buffer_bytes)
        fail(fmt::format("{} '{}' has {} bytes, below the {} minimum of {} (C7)", what, b.name, bytes[i], chip.name,
                         chip.min_buffer_bytes),
             fmt::format("allocate {} bytes (pad the sequence to a bucket of at least 16)", t.alloc_bytes));
      if (int64_t(bytes[i]) < b.bytes)
        fail(fmt::format("{} '{}' has {} bytes but its packed data {} needs {} (C14)", what, b.name, bytes[i], b.type.str(),
                         b.bytes),
             fmt::format("allocate {} bytes", t.alloc_bytes));
    }
  };
  side(io.inputs, input_bytes, "input", "C13");
  side(io.outputs, output_bytes, "output", "C5");
}

// ---- statuses -----------------------------------------------------------------------------------

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::Compile: return "compile";
    case Phase::Load: return "load";
    case Phase::Evaluate: return "evaluate";
    case Phase::Unload: return "unload";
  }
  return "call";
}

std::optional<uint32_t> parse_status(const std::string& error_text) {
  // The framework's evaluation errors read "... Failed with status=0x1d : statusType=0x9: ...".
  static constexpr std::string_view kKey = "status=0x";
  for (size_t at = error_text.find(kKey); at != std::string::npos; at = error_text.find(kKey, at + 1)) {
    if (at > 0 && (std::isalnum(static_cast<unsigned char>(error_text[at - 1])) || error_text[at - 1] == '_'))
      continue;  // "statusType=0x9" is not a status; neither is "xstatus=…"
    uint64_t v = 0;
    size_t i = at + kKey.size(), digits = 0;
    for (; i < error_text.size() && std::isxdigit(static_cast<unsigned char>(error_text[i])) && digits < 8; i++, digits++) {
      char c = char(std::tolower(static_cast<unsigned char>(error_text[i])));
      v = v * 16 + uint64_t(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (digits > 0) return uint32_t(v);
  }
  return std::nullopt;
}

DriverStatus status_for(Phase phase, std::optional<uint32_t> hardware_status) {
  if (hardware_status && *hardware_status == uint32_t(DriverStatus::BadSurfaces)) return DriverStatus::BadSurfaces;
  switch (phase) {
    case Phase::Compile: return DriverStatus::CompileFailed;
    case Phase::Load: return DriverStatus::LoadFailed;
    case Phase::Unload: return DriverStatus::LoadFailed;
    case Phase::Evaluate: return DriverStatus::EvalFailed;
  }
  return DriverStatus::EvalFailed;
}

DriverError framework_error(Phase phase, const std::string& program, const std::string& error_text,
                            const compiler::ChipProfile& chip, int compiles) {
  std::optional<uint32_t> hw = parse_status(error_text);
  DriverStatus status = status_for(phase, hw);
  std::string msg = fmt::format("program '{}': the ANE framework's {} returned failure", program, phase_name(phase));
  if (hw) msg += fmt::format(" (hardware status 0x{:x})", *hw);
  msg += error_text.empty() ? " without an error description" : ": " + error_text;
  std::string hint;
  if (status == DriverStatus::BadSurfaces) {
    hint = fmt::format(
        "every input surface needs one allocation size and every output surface too (C13, C5), "
        "each at least {} bytes (C7)",
        chip.min_buffer_bytes);
  } else if (phase == Phase::Compile && compiles >= chip.compile_budget) {
    msg += fmt::format(" — this process has compiled {} programs, at or past the {} budget of ~{} (C9)", compiles, chip.name,
                       chip.compile_budget);
    hint = "reuse compiled programs (program cache), pass weights as inputs, or continue in a fresh process";
  } else if (phase == Phase::Compile) {
    hint = "check the program with `orion mil check` and the rules of DESIGN.md §2 for this chip";
  } else if (phase == Phase::Load) {
    hint = "the ANE may be out of program slots: unload programs that are not in use";
  }
  return DriverError(status, msg, hint);
}

std::string patch_compiled_data(std::string data, const std::vector<WeightEntry>& old_images,
                                const std::vector<WeightEntry>& new_images, const std::string& program) {
  ORION_CHECK(old_images.size() == new_images.size(), "patch_compiled_data: one new image per old one");
  auto refuse = [&](const WeightEntry& e, const std::string& why) {
    return DriverError(DriverStatus::LoadFailed,
                       fmt::format("program '{}': cannot patch weight '{}' into the compiled model's data file: {}",
                                   program, e.key, why),
                       "update the weights by recompiling or with weights as inputs");
  };
  size_t from = 0;  // segments appear in key order
  for (size_t i = 0; i < old_images.size(); i++) {
    const WeightEntry &o = old_images[i], &n = new_images[i];
    anesim::MilBlobStorage before(*o.data, o.key), after(*n.data, n.key);
    if (before.records().size() != after.records().size()) throw refuse(o, "the new file has other blobs");
    for (size_t r = 0; r < before.records().size(); r++) {
      auto old_bytes = before.data(before.records()[r]), new_bytes = after.data(after.records()[r]);
      if (old_bytes.size() != new_bytes.size()) throw refuse(o, "a blob changed size");
      auto at = std::search(data.begin() + std::ptrdiff_t(from), data.end(), old_bytes.begin(), old_bytes.end(),
                            [](char d, uint8_t b) { return uint8_t(d) == b; });
      if (at == data.end()) throw refuse(o, "its current values are not in the data file");
      std::copy(new_bytes.begin(), new_bytes.end(), at);
      from = size_t(at - data.begin()) + old_bytes.size();
    }
  }
  return data;
}

DriverError not_available_off_macos() {
  return DriverError(DriverStatus::NotAvailable,
                     "the 'ane' driver is not available on this platform: the Apple Neural Engine is reached "
                     "through macOS's private AppleNeuralEngine.framework",
                     "use --backend anesim (the software ANE, same programs and rules) or --backend cpu");
}

}  // namespace orion::runtime::ane

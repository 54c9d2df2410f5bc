#include "serve/runs.h"

#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace orion::serve {
namespace fs = std::filesystem;

namespace {
constexpr const char* kMetrics = "metrics.jsonl";

size_t count_lines(const fs::path& file) {
  std::ifstream in(file);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n++;
  return n;
}
}  // namespace

nlohmann::json list_runs(const std::string& dir) {
  nlohmann::json runs = nlohmann::json::array();
  if (dir.empty() || !fs::is_directory(dir)) return runs;
  auto add = [&](const fs::path& folder) {
    const fs::path m = folder / kMetrics;
    if (!fs::is_regular_file(m)) return;
    std::string name = fs::relative(folder, dir).generic_string();
    runs.push_back({{"name", name == "." ? "." : name}, {"lines", count_lines(m)}});
  };
  add(dir);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() >= 2) it.disable_recursion_pending();
    if (it->is_directory()) add(it->path());
  }
  return runs;
}

nlohmann::json read_run_metrics(const std::string& dir, const std::string& run, size_t from) {
  // Only names list_runs gives: a relative path inside dir, never leaving it.
  const fs::path rel(run);
  bool inside = !dir.empty() && !rel.is_absolute();
  for (const auto& part : rel)
    if (part == "..") inside = false;
  const fs::path file = fs::path(dir) / rel / kMetrics;
  if (!inside || !fs::is_regular_file(file))
    throw_usage_error(fmt::format("no training run named '{}'", run), "run", "GET /v1/runs lists them");
  std::ifstream in(file);
  nlohmann::json points = nlohmann::json::array();
  size_t line_no = 0;
  for (std::string line; std::getline(in, line); line_no++) {
    if (line_no < from) continue;
    if (in.eof()) break;  // no newline yet: the trainer is still writing this line
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) points.push_back(std::move(j));
  }
  return {{"next", line_no}, {"points", points}};
}

}  // namespace orion::serve

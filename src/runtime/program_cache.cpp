// Program cache: get-or-compile by key, one weights version per slot.
#include "runtime/program_cache.h"

#include <fmt/format.h>

#include "base/timer.h"

namespace orion::runtime {

std::string ProgramKey::str() const {
  return fmt::format("{}/{}/{}S{}/v{}", model, kernel, layer >= 0 ? fmt::format("layer{}/", layer) : "", bucket,
                     weights_version);
}

std::string CacheStats::str() const {
  const int64_t lookups = hits + misses;
  return fmt::format("program cache: {} hits, {} misses ({:.0f}% hits), {} evictions, {} resident, {:.2f} s compiling", hits,
                     misses, lookups ? 100.0 * double(hits) / double(lookups) : 0.0, evictions, resident, compile_s);
}

std::shared_ptr<AneKernel> ProgramCache::get(const ProgramKey& key, const std::function<ir::Graph()>& build) {
  auto it = entries_.find(slot_of(key));
  if (it != entries_.end() && it->second.weights_version == key.weights_version) {
    stats_.hits++;
    return it->second.kernel;
  }
  stats_.misses++;
  // Compile first: should it fail, the resident program stays as it was.
  Timer t;
  std::shared_ptr<AneKernel> fresh = AneKernel::compile(driver_, budget_, build());
  stats_.compile_s += t.seconds();
  if (it != entries_.end()) {
    it->second.kernel->unload();  // holders of the old program see "not loaded" from the driver
    it->second = {key.weights_version, fresh};
    stats_.evictions++;
  } else {
    entries_[slot_of(key)] = {key.weights_version, fresh};
  }
  return fresh;
}

std::shared_ptr<AneKernel> ProgramCache::find(const ProgramKey& key) const {
  auto it = entries_.find(slot_of(key));
  if (it == entries_.end() || it->second.weights_version != key.weights_version) return nullptr;
  return it->second.kernel;
}

void ProgramCache::clear() {
  for (auto& [slot, e] : entries_) e.kernel->unload();
  entries_.clear();
}

CacheStats ProgramCache::stats() const {
  CacheStats s = stats_;
  s.resident = 0;
  for (const auto& [slot, e] : entries_) s.resident += e.kernel->loaded() ? 1 : 0;
  return s;
}

std::vector<ProgramKey> ProgramCache::keys() const {
  std::vector<ProgramKey> out;
  for (const auto& [slot, e] : entries_)
    out.push_back({std::get<0>(slot), std::get<1>(slot), std::get<2>(slot), std::get<3>(slot), e.weights_version});
  return out;
}

}  // namespace orion::runtime

// Training runs for the web page's runs view: the runs under a folder (every folder holding a
// metrics.jsonl, as `orion train` and `orion lora train` write) and their metrics, read from a line
// onwards so that the page can poll a run while it trains.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace orion::serve {

// [{"name", "lines"}] for DIR itself and every folder below it (two levels deep) with a metrics.jsonl.
nlohmann::json list_runs(const std::string& dir);
// {"next": line count, "points": [the metrics.jsonl lines as objects: step, loss, val_loss?, lr,
// grad_norm, ms, skipped]} from line `from` on (a last line still being written is left for the
// next read). Usage error (field "run") for a name that is not a run under dir.
nlohmann::json read_run_metrics(const std::string& dir, const std::string& run, size_t from);

}  // namespace orion::serve

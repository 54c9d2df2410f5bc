// orion._core.compile / mil_check: the ANE compiler from Python — `orion compile` and
// `orion mil check` (tools/cmd_compile.cpp) with their results returned instead of printed.
#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "compiler/chip.h"
#include "compiler/compile.h"
#include "compiler/mil/parse_mil.h"
#include "bindings.h"
#include "tools/command.h"

namespace orion::python {
namespace {
namespace fs = std::filesystem;

// JSON → Python through its text (manifests are small).
py::object to_python(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

// Every program of a compile: its manifest, MIL text and the size of each weight blob, read back
// from the folder `orion compile` wrote.
py::dict compile(const tools::CompileRequest& request) {
  nlohmann::json summary;
  {
    py::gil_scoped_release nogil;
    summary = tools::compile_programs(request);
  }
  py::list programs;
  for (const nlohmann::json& manifest : summary["programs"]) {
    const fs::path dir = fs::path(request.out) / manifest["name"].get<std::string>();
    py::dict blobs;
    if (fs::is_directory(dir / "weights"))
      for (const auto& e : fs::directory_iterator(dir / "weights"))
        blobs[py::str(e.path().filename().string())] = e.file_size();
    py::dict p;
    p["name"] = manifest["name"].get<std::string>();
    p["mil"] = read_text_file((dir / "model.mil").string());
    p["blobs"] = blobs;
    p["manifest"] = to_python(manifest);
    p["dir"] = dir.string();
    programs.append(p);
  }
  summary.erase("programs");
  py::dict out = to_python(summary);
  out["programs"] = programs;
  out["out"] = request.out;
  return out;
}

// The rules a MIL text breaks for chip: {"ok", "nodes", "diagnostics": [{level, rule, node,
// message, text}]}. weights: blob file name → bytes, as in a weights/ folder beside a .mil file.
py::dict mil_check(const std::string& text, const std::string& chip_name, const std::map<std::string, py::bytes>& weights) {
  const compiler::ChipProfile& chip = compiler::chip_profile(chip_name);
  compiler::WeightDict dict;
  for (const auto& [name, bytes] : weights) {
    const std::string b = bytes;
    dict[compiler::weight_key(name)] = std::vector<uint8_t>(b.begin(), b.end());
  }
  ir::Graph g = compiler::parse_mil(text, dict, "<mil>");
  const std::vector<compiler::Diagnostic> diags = tools::check_as_written(g, chip);
  py::list found;
  bool ok = true;
  for (const compiler::Diagnostic& d : diags) {
    const bool error = d.level == compiler::Diagnostic::Level::Error;
    ok = ok && !error;
    py::dict e;
    e["level"] = error ? "error" : "warning";
    e["rule"] = d.rule, e["node"] = d.node, e["message"] = d.message;
    e["text"] = compiler::format_diagnostic(d);
    found.append(e);
  }
  py::dict out;
  out["ok"] = ok, out["chip"] = chip.name, out["nodes"] = g.nodes().size(), out["diagnostics"] = found;
  return out;
}

}  // namespace

void bind_compiler(py::module_& m) {
  m.def(
      "compile",
      [](const std::string& model, const std::string& config, const std::string& ir_file, const std::string& out,
         const std::string& chip, int seq, const std::string& use, uint64_t seed) {
        return compile(tools::CompileRequest{model, config, ir_file, out, chip, seq, use, seed});
      },
      py::arg("model") = "", py::arg("config") = "", py::arg("ir_file") = "", py::arg("out"), py::arg("chip") = "m4",
      py::arg("seq") = 64, py::arg("use") = "generate", py::arg("seed") = 1);
  m.def("mil_check", &mil_check, py::arg("text"), py::arg("chip") = "m4",
        py::arg("weights") = std::map<std::string, py::bytes>{});
  m.def("chip_names", &compiler::chip_names);
}

}  // namespace orion::python

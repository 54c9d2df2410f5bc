// orion compile: a model's (or one IR file's) ANE programs → per program model.mil, weights/*.bin
// and manifest.json. orion mil check: parse a MIL file and list every ANE rule it breaks.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "base/timer.h"
#include "compiler/compile.h"
#include "compiler/mil/parse_mil.h"
#include "compiler/pipeline.h"
#include "compiler/sequence_bucket.h"
#include "ir/text.h"
#include "model/frontends/program_set.h"
#include "model/io/model_io.h"
#include "runtime/anesim/mil_scan.h"
#include "runtime/anesim/mil_signatures.h"
#include "tools/command.h"

namespace orion::tools {
namespace {
namespace fs = std::filesystem;
using compiler::Binding;

nlohmann::json bindings_json(const compiler::BindingTable& t) {
  nlohmann::json a = nlohmann::json::array();
  for (const Binding& b : t.bindings)
    a.push_back({{"name", b.name},
                 {"dtype", ir::elem_name(b.type.elem)},
                 {"shape", b.type.shape},
                 {"bytes", b.bytes},
                 {"alloc_bytes", b.alloc_bytes},
                 {"declared_index", b.declared_index}});
  return a;
}

nlohmann::json type_json(const ir::Type& t) { return {{"dtype", ir::elem_name(t.elem)}, {"shape", t.shape}}; }

// What legalize-ane changed at the boundary, which the runtime must carry out: padded or demoted
// buffers (C7, C18) and outputs split out of a concat (C1).
nlohmann::json boundary_json(const compiler::AneBoundary& b) {
  nlohmann::json changes = nlohmann::json::array(), splits = nlohmann::json::array();
  for (const compiler::BoundaryChange& c : b.changes)
    changes.push_back({{"name", c.name},
                       {"is_input", c.is_input},
                       {"original", type_json(c.original)},
                       {"legalized", type_json(c.legalized)},
                       {"rules", c.rules}});
  for (const compiler::OutputSplit& s : b.output_splits)
    splits.push_back({{"output", s.output}, {"axis", s.axis}, {"parts", s.parts}});
  return {{"changes", changes}, {"output_splits", splits}};
}

nlohmann::json manifest_json(const std::string& name, const compiler::CompileResult& r, double ms) {
  nlohmann::json warnings = nlohmann::json::array();
  for (auto& d : r.diagnostics) warnings.push_back(compiler::format_diagnostic(d));
  return {{"name", name},
          {"chip", r.program.chip},
          {"inputs", bindings_json(r.program.inputs)},  // in binding (alphabetical) order, C6
          {"outputs", bindings_json(r.program.outputs)},
          {"input_alloc_bytes", r.program.inputs.alloc_bytes},
          {"output_alloc_bytes", r.program.outputs.alloc_bytes},
          {"boundary", boundary_json(r.boundary)},
          {"blob_constants", r.program.blob_constants},
          {"sram_estimate_bytes", r.sram_estimate_bytes},
          {"compile_ms", ms},
          {"warnings", warnings}};
}

void write_json(const std::string& path, const nlohmann::json& j) {
  std::string text = j.dump(2) + "\n";
  write_file_atomic(path, [&](FileWriter& w) { w.write_str(text); });
}

using CompileArgs = CompileRequest;

// Compiles programs into one output folder and collects their manifests.
struct ProgramWriter {
  std::string out;
  const compiler::ChipProfile& chip;
  nlohmann::json all = nlohmann::json::array();
  double total_ms = 0;  // passes + MIL emission only
  size_t warnings = 0;

  // Throws the compiler's Error, which names every rule broken and its node, in the context of
  // the program (`source`: the IR file it came from, if any).
  // `extra` fields are added to the program's manifest.
  void add(const std::string& name, ir::Graph g, const std::string& source = {}, const nlohmann::json& extra = {}) {
    Timer t;
    compiler::CompileResult r;
    try {
      r = compiler::compile_graph(g, chip);
    } catch (const Error& e) {
      throw Error(e.kind(), e.message(), {source, name, -1, e.context().hint});
    }
    double ms = t.seconds() * 1e3;
    total_ms += ms;
    std::string dir = (fs::path(out) / name).string();
    compiler::save_program(r.program, dir);
    nlohmann::json m = manifest_json(name, r, ms);
    if (extra.is_object()) m.update(extra);
    write_json(dir + "/manifest.json", m);
    warnings += r.diagnostics.size();
    for (auto& d : r.diagnostics) std::fprintf(stderr, "%s: %s\n", name.c_str(), compiler::format_diagnostic(d).c_str());
    all.push_back(std::move(m));
  }
};

// The programs of the model for `seq` tokens — exactly the list the runner of `use` loads
// (model/frontends/program_set.h): "generate", a prompt of seq tokens and the decode after it;
// "train", training on sequences of seq tokens. Attention mixes sequence positions, so legalize-ane
// cannot pad its buffers up to the C7 minimum the way it pads position-wise kernels; a narrow model
// gets its attention programs built for a wider sequence bucket, as the runners do.
std::vector<frontends::ProgramSpec> model_program_list(const ModelWeights& w, int seq, const std::string& use,
                                                       const compiler::ChipProfile& chip) {
  auto no_bucket = [&] {
    return Error(
        ErrorKind::Input,
        fmt::format("no sequence bucket up to {} lets this model's attention kernels reach the {}-byte minimum buffer (C7)",
                    chip.max_sequence_bucket, chip.min_buffer_bytes),
        {"", "--model", -1, "the model is too narrow for the ANE path; use the CPU backend"});
  };
  if (use == "train") {
    const frontends::TrainingBuckets b = frontends::training_buckets(w, seq, chip);
    if (b.attention == 0 || b.ffn == 0) throw no_bucket();
    return frontends::training_programs(w, b);
  }
  const int attention_min = frontends::inference_attention_bucket(w, chip);
  if (attention_min == 0) throw no_bucket();
  return frontends::inference_programs(w, seq, attention_min, chip);
}

void compile_model(const ModelWeights& w, int seq, const std::string& use, ProgramWriter& out, nlohmann::json& summary) {
  const std::vector<frontends::ProgramSpec> specs = model_program_list(w, seq, use, out.chip);
  const bool tty = isatty(2);
  nlohmann::json buckets = nlohmann::json::array();
  for (size_t i = 0; i < specs.size(); i++) {
    if (tty) std::fprintf(stderr, "\r[%zu/%zu] %-40s", i + 1, specs.size(), specs[i].name.c_str());
    out.add(specs[i].name, specs[i].build(), {},
            {{"kernel", specs[i].kernel}, {"layer", specs[i].layer}, {"seq_bucket", specs[i].S}});
    if (std::find(buckets.begin(), buckets.end(), specs[i].S) == buckets.end()) buckets.push_back(specs[i].S);
  }
  if (tty) std::fprintf(stderr, "\r%70s\r", "");
  const int widest = std::max_element(specs.begin(), specs.end(), [](auto& a, auto& b) { return a.S < b.S; })->S;
  if (widest > compiler::sequence_bucket_at_least(seq, out.chip))
    std::fprintf(
        stderr,
        "orion compile: attention programs built for sequence bucket %d: at --seq %d their buffers are below the %lld-byte minimum (C7)\n",
        widest, seq, static_cast<long long>(out.chip.min_buffer_bytes));
  summary["use"] = use;
  summary["seq_buckets"] = buckets;
}

}  // namespace

nlohmann::json compile_programs(const CompileRequest& a) {
  const compiler::ChipProfile& chip = compiler::chip_profile(a.chip);
  int sources = !a.model.empty() + !a.config.empty() + !a.ir_file.empty();
  if (sources != 1) throw_usage_error("give exactly one of --model, --config or --ir", "--model");
  ProgramWriter out{a.out, chip};
  nlohmann::json summary = {{"chip", chip.name}};
  if (!a.ir_file.empty()) {
    ir::Graph g = ir::parse_graph_file(a.ir_file);
    fs::create_directories(a.out);
    std::string name = g.name();
    out.add(name, std::move(g), a.ir_file);
  } else {
    ModelWeights w = !a.model.empty() ? load_model(a.model) : random_weights(config_preset(a.config), a.seed);
    if (a.seq < 1 || a.seq > w.config.seq_len)
      throw_usage_error(fmt::format("must be in 1..{} (the model's context)", w.config.seq_len), "--seq");
    fs::create_directories(a.out);
    summary["seq"] = a.seq;
    compile_model(w, a.seq, a.use, out, summary);
  }
  summary["programs"] = out.all;
  summary["compile_ms"] = out.total_ms;
  write_json((fs::path(a.out) / "manifest.json").string(), summary);
  summary["warnings"] = out.warnings;
  return summary;
}

namespace {

void run_compile(const CompileArgs& a) {
  const nlohmann::json summary = compile_programs(a);
  std::printf("compiled %zu program(s) for %s in %.1f ms (passes + MIL, excluding weight I/O); %zu warning(s); wrote %s\n",
              summary["programs"].size(), summary["chip"].get<std::string>().c_str(), summary["compile_ms"].get<double>(),
              summary["warnings"].get<size_t>(), a.out.c_str());
}

struct MilCheckArgs {
  std::string file, weights, chip = "m4";
};


void run_mil_check(const MilCheckArgs& a) {
  const compiler::ChipProfile& chip = compiler::chip_profile(a.chip);
  std::string text = read_text_file(a.file);
  // Weights: weights/*.bin beside the file (or --weights DIR), keyed as the MIL names them.
  compiler::WeightDict dict;
  fs::path wdir = a.weights.empty() ? fs::path(a.file).parent_path() / "weights" : fs::path(a.weights);
  std::error_code ec;
  if (fs::is_directory(wdir, ec))
    for (auto& e : fs::directory_iterator(wdir)) {
      if (!e.is_regular_file()) continue;
      auto m = MappedFile::open(e.path().string());
      dict[compiler::weight_key(e.path().filename().string())] = std::vector<uint8_t>(m->data(), m->data() + m->size());
    }
  ir::Graph g = compiler::parse_mil(text, dict, a.file);
  auto diags = check_as_written(g, chip);
  int errors = 0;
  // Before the compiler's rules, anesim's public-definition checks: the program version and
  // opset the chip takes (C18) and every op's signature in that opset.
  const runtime::anesim::MilScan scan = runtime::anesim::scan_mil(text, a.file);
  if (std::string why = runtime::anesim::version_problem(scan.program_version, scan.function_target, chip); !why.empty())
    std::printf("%s: error C18: %s\n", a.file.c_str(), why.c_str()), errors++;
  for (const std::string& problem : runtime::anesim::signature_problems(scan))
    std::printf("%s: error signature: %s\n", a.file.c_str(), problem.c_str()), errors++;
  for (auto& d : diags) {
    std::printf("%s: %s\n", a.file.c_str(), compiler::format_diagnostic(d).c_str());
    errors += d.level == compiler::Diagnostic::Level::Error;
  }
  if (errors)
    throw Error(ErrorKind::Input, fmt::format("{} rule violation(s) for {}", errors, chip.name),
                {a.file, {}, -1, "see docs/ane-rules.md for each rule"});
  std::printf("%s: ok for %s (%zu nodes, %zu warning(s))\n", a.file.c_str(), chip.name.c_str(), g.nodes().size(),
              diags.size());
}

// Every registered pass with its one-line summary: first the standard pipeline in the order a
// compile runs it, then any pass only the IR tools and tests run.
void print_passes() {
  const std::vector<std::string> pipeline = compiler::standard_pipeline();
  std::printf("passes of a compile, in order:\n");
  for (const std::string& name : pipeline) std::printf("  %-15s %s\n", name.c_str(), compiler::make_pass(name)->summary());
  bool header = false;
  for (const std::string& name : compiler::pass_names()) {
    if (std::find(pipeline.begin(), pipeline.end(), name) != pipeline.end()) continue;
    if (!header) std::printf("other registered passes:\n"), header = true;
    std::printf("  %-15s %s\n", name.c_str(), compiler::make_pass(name)->summary());
  }
}

}  // namespace

// The file is checked as written: only annotate-sram (for the C20 warning) and validate-ane run.
// The standard pipeline would first legalize it — rewriting rsqrt for M1, expanding gelu, padding
// buffers — and so hide exactly the rules the file breaks.
std::vector<compiler::Diagnostic> check_as_written(ir::Graph& g, const compiler::ChipProfile& chip) {
  compiler::PassContext ctx;
  ctx.chip = &chip;
  compiler::run_pipeline(g, {"annotate-sram", "validate-ane"}, ctx);
  return ctx.diagnostics;
}

void add_compile_command(CLI::App& app) {
  auto a = std::make_shared<CompileArgs>();
  CLI::App* cmd = app.add_subcommand("compile", "compile a model's ANE programs (MIL text + weight blobs + manifest)");
  cmd->add_option("--model,-m", a->model, "model file or folder (any supported format)");
  cmd->add_option("--config", a->config, "a named config with random weights instead of a file")
      ->check(CLI::IsMember(config_preset_names()));
  cmd->add_option("--ir", a->ir_file, "compile one graph written in Orion's IR text form");
  cmd->add_option("--chip", a->chip, "ANE generation whose rules and syntax to use")
      ->capture_default_str()
      ->check(CLI::IsMember(compiler::chip_names()));
  cmd->add_option("--seq", a->seq, "tokens: the prompt length (generate) or the training sequence length (train)")
      ->capture_default_str();
  cmd->add_option("--for", a->use, "the program set of `orion generate --backend anesim` or `orion train --backend anesim`")
      ->capture_default_str()
      ->check(CLI::IsMember({"generate", "train"}));
  cmd->add_option("--out,-o", a->out, "output folder (one sub-folder per program)")->required();
  cmd->add_flag_callback(
      "--list-passes",
      [] {
        print_passes();
        throw CLI::Success();
      },
      "print the compiler's passes with what each does, and exit");
  cmd->callback([a] { run_compile(*a); });
}

void add_mil_command(CLI::App& app) {
  CLI::App* mil = app.add_subcommand("mil", "work with MIL files");
  mil->require_subcommand(1);
  auto a = std::make_shared<MilCheckArgs>();
  CLI::App* check = mil->add_subcommand("check", "parse a MIL file and list every ANE rule it breaks");
  check->add_option("file", a->file, "the .mil file")->required();
  check->add_option("--weights", a->weights, "folder of its weight blobs (default: weights/ beside the file)");
  check->add_option("--chip", a->chip, "ANE generation")
      ->capture_default_str()
      ->check(CLI::IsMember(compiler::chip_names()));
  check->callback([a] { run_mil_check(*a); });
}

}  // namespace orion::tools

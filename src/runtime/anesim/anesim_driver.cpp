// anesim's driver: compile, load, weight files, evaluate — the hardware's behaviour, failures
// included (see anesim_driver.h for the list of rules and where each is enforced).
#include "runtime/anesim/anesim_driver.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include <malloc.h>

#include "compiler/compile.h"
#include "compiler/mil/parse_mil.h"
#include "compiler/pass.h"
#include "runtime/anesim/anesim_plan.h"
#include "runtime/ane/ane_plan.h"
#include "runtime/anesim/blobfile_check.h"
#include "runtime/anesim/mil_scan.h"
#include "runtime/anesim/mil_signatures.h"
#include "runtime/anesim/sdpa_as_hardware.h"

namespace orion::runtime::anesim {
namespace {

// A compiled program. Like the hardware's, the network is fixed at compile time: `compiled` holds
// the graph with the weights as they were when compile() ran; `weight_files` is what sits in the
// model's folder and may be rewritten (delta reload); whether a reload reads them is a profile
// question (C10).
class AnesimProgram final : public DriverProgram {
 public:
  const AnesimDriver* owner = nullptr;
  std::string program_name, mil_text;
  std::vector<std::string> inputs, outputs;        // binding (alphabetical) order, C6
  std::vector<int64_t> input_bytes, output_bytes;  // packed fp16 data per surface
  std::shared_ptr<const ir::Graph> compiled;
  WeightDict weight_files;
  bool files_replaced = false;
  std::unique_ptr<Plan> plan;  // present while loaded
  ProgramCost cost;
  int serial = 0;  // this driver's number for the program (timing: is it resident?)
  bool evaluated = false;
  TimingBreakdown last;  // the prediction of its latest evaluation

  const std::string& name() const override { return program_name; }
  bool loaded() const override { return plan != nullptr; }
  const std::vector<std::string>& input_names() const override { return inputs; }
  const std::vector<std::string>& output_names() const override { return outputs; }
};

[[noreturn]] void compile_failed(const std::string& message, const std::string& hint) {
  throw DriverError(DriverStatus::CompileFailed, message, hint);
}

// The parser's error (anesim's own checks passed, so this is a form only our parser refuses).
[[noreturn]] void parse_failed(const std::string& name, const Error& e) {
  compile_failed(fmt::format("the ANE compiler rejected '{}': {}", name,
                             format_error_line(e.kind(), e.message(),
                                               {e.context().file, e.context().field, e.context().offset, {}})),
                 "compile the kernel with compiler::compile_graph, which legalizes it for the chip");
}

// A signature problem, with the rule when the op is one the ANE lacks (C2) rather than a typo.
std::string with_rule(const std::string& problem) {
  for (const char* op : {"'gelu'", "'silu'"})
    if (problem.find(std::string("op ") + op + " is not in opset") != std::string::npos)
      return fmt::format("{} — the ANE has no {} op (C2): use the tanh form / x·sigmoid(x)", problem, op);
  return problem;
}

// The weight files as the hardware's storage reader sees them (blobfile_check.h), before and
// independently of the compiler's parser reading the same constants.
void check_weight_files(const std::string& name, const std::string& mil_text, const WeightDict& weights) {
  try {
    check_blobfile_constants(mil_text, weights, name + ".mil");
  } catch (const Error& e) {
    compile_failed(fmt::format("the ANE compiler rejected '{}': {}", name,
                               format_error_line(e.kind(), e.message(), {e.context().file, e.context().field, -1, {}})),
                   e.context().hint);
  }
}

// What the hardware's compiler checks first, from the public definitions and not from our
// compiler: UTF-8 text (C19), program and opset versions for the chip (C18), every op's signature
// in its opset, every BLOBFILE constant (C8). Returns the text anesim runs: sdpa as the hardware
// runs it, its mask ignored (C15).
std::string check_public_definitions(const std::string& name, const std::string& mil_text, const WeightDict& weights,
                                     const compiler::ChipProfile& chip) {
  ane::check_mil_utf8(mil_text, name);
  MilScan m;
  try {
    m = scan_mil(mil_text, name + ".mil");
  } catch (const Error& e) {
    compile_failed(fmt::format("the ANE compiler could not read '{}': {}", name, e.message()), e.context().hint);
  }
  if (std::string why = version_problem(m.program_version, m.function_target, chip); !why.empty())
    compile_failed(fmt::format("the ANE compiler rejected '{}' for {}: {} (C18)", name, chip.name, why),
                   "emit the MIL for this chip profile");
  if (auto problems = signature_problems(m); !problems.empty()) {
    for (std::string& p : problems) p = with_rule(p);
    compile_failed(fmt::format("the ANE compiler rejected '{}': {}", name, fmt::join(problems, "; ")),
                   "the op signatures are coremltools' public op definitions (runtime/anesim/mil_signatures.inc)");
  }
  check_weight_files(name, mil_text, weights);
  return sdpa_with_mask_ignored(mil_text, m);
}

// Runs the ANE compiler's checks (validate-ane) on the parsed program: it is already legalized, so
// any finding is a rejection. Returns annotate-sram's working-set estimate for the timing model.
int64_t check_rules(ir::Graph& g, const std::string& name, const compiler::ChipProfile& chip) {
  compiler::PassContext ctx;
  ctx.chip = &chip;
  compiler::make_pass("annotate-sram")->run(g, ctx);
  compiler::make_pass("validate-ane")->run(g, ctx);
  std::string errors;
  for (const compiler::Diagnostic& d : ctx.diagnostics)
    if (d.level == compiler::Diagnostic::Level::Error)
      errors += (errors.empty() ? "" : "; ") + compiler::format_diagnostic(d);
  if (!errors.empty())
    compile_failed(fmt::format("the ANE compiler rejected '{}' for {}: {}", name, chip.name, errors),
                   "see docs/ane-rules.md; run this kernel on the CPU or change its shapes");
  return ctx.sram_estimate_bytes;
}

std::vector<std::pair<std::string, int64_t>> sorted_inputs(const ir::Graph& g) {
  std::vector<std::pair<std::string, int64_t>> v;
  for (int i : g.input_nodes()) v.emplace_back(g.node(i).name, int64_t(g.node(i).results[0].bytes()));
  std::sort(v.begin(), v.end());
  return v;
}
std::vector<std::pair<std::string, int64_t>> sorted_outputs(const ir::Graph& g) {
  std::vector<std::pair<std::string, int64_t>> v;
  for (const ir::GraphOutput& o : g.outputs()) v.emplace_back(o.name, int64_t(g.type(o.value).bytes()));
  std::sort(v.begin(), v.end());
  return v;
}

// The surface rules of one side (inputs: C13, outputs: C5), checked as the hardware does before it
// runs anything: status 0x1d names the first buffer that breaks one.
void check_surfaces(const char* side, const char* uniform_rule, const std::vector<std::string>& names,
                    const std::vector<int64_t>& packed, const std::vector<Surface*>& s, const compiler::ChipProfile& chip) {
  if (s.size() != names.size())
    throw DriverError(DriverStatus::EvalFailed, fmt::format("{} {} surfaces given, the program binds {} ({})", s.size(),
                                                            side, names.size(), fmt::join(names, ", ")));
  for (size_t i = 0; i < s.size(); i++) {
    if (!s[i]) throw DriverError(DriverStatus::EvalFailed, fmt::format("{} surface '{}' is null", side, names[i]));
    const int64_t a = int64_t(s[i]->alloc_bytes()), a0 = int64_t(s[0]->alloc_bytes());
    if (a < chip.min_buffer_bytes)
      throw DriverError(DriverStatus::BadSurfaces,
                        fmt::format("{} surface '{}' has {} bytes, below the minimum buffer of {} bytes on {} (C7)", side,
                                    names[i], a, chip.min_buffer_bytes, chip.name),
                        "allocate every surface with the program's binding-table size");
    if (a != a0)
      throw DriverError(DriverStatus::BadSurfaces,
                        fmt::format("{} surfaces must share one allocation size ({}): '{}' has {} bytes, '{}' has {}", side,
                                    uniform_rule, names[0], a0, names[i], a),
                        "allocate every surface of a side with the binding table's alloc_bytes");
    if (a < packed[i])
      throw DriverError(DriverStatus::BadSurfaces,
                        fmt::format("{} surface '{}' has {} bytes, too small for its packed fp16 data of {} bytes (C14)",
                                    side, names[i], a, packed[i]));
  }
}

// anesim allocates every op's result afresh and frees it a few ops later. glibc would hand freed
// blocks above its thresholds back to the kernel, so the next result of that size is a fresh
// mapping that faults in and zeroes every page again — half of a training step's evaluation time
// on a virtual machine. Keeping blocks up to 32 MB (glibc's largest mmap threshold) in the heap and
// the heap untrimmed up to 1 GB makes them reused instead. Once per process.
void keep_freed_tensors_in_the_heap() {
#ifdef M_MMAP_THRESHOLD
  static const bool done = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)done;
#endif
}

}  // namespace

AnesimDriver::AnesimDriver(const DriverOptions& options)
    : chip_(options.chip ? options.chip : &compiler::default_chip()), options_(options) {
  keep_freed_tensors_in_the_heap();
}

std::unique_ptr<DriverProgram> AnesimDriver::compile(const std::string& mil_text, const WeightDict& weights,
                                                     const std::string& name) {
  const int attempt = ++counters_.compiles;
  try {
    // C9: the hardware's compiler service stops compiling after ~119 programs per process and
    // says nothing; anesim makes the silent failure loud.
    if (attempt > chip_->compile_budget)
      compile_failed(fmt::format("compile #{} of '{}' is past the ANE's compile budget of {} per process on {} (C9): "
                                 "the hardware would fail silently here",
                                 attempt, name, chip_->compile_budget, chip_->name),
                     "reuse programs from the program cache, pass weights as inputs, or start a new process");
    const std::string runnable = check_public_definitions(name, mil_text, weights, *chip_);
    compiler::ParsedMil parsed;
    try {
      parsed = compiler::parse_mil_program(runnable, weights, name + ".mil");
    } catch (const Error& e) {
      parse_failed(name, e);
    }
    auto p = std::make_unique<AnesimProgram>();
    const int64_t sram = check_rules(parsed.graph, name, *chip_);
    p->owner = this;
    p->program_name = name;
    p->mil_text = runnable;
    for (auto& [n, bytes] : sorted_inputs(parsed.graph)) p->inputs.push_back(n), p->input_bytes.push_back(bytes);
    for (auto& [n, bytes] : sorted_outputs(parsed.graph)) p->outputs.push_back(n), p->output_bytes.push_back(bytes);
    p->cost = program_cost(parsed.graph, sram);
    p->serial = ++programs_compiled_;
    predicted_compile_ms_ += compile_and_load_ms(1, 0, chip_timing(*chip_));
    p->compiled = std::make_shared<const ir::Graph>(std::move(parsed.graph));  // weights copied into the graph
    p->weight_files = weights;
    return p;
  } catch (const DriverError&) {
    counters_.failed_compiles++;
    throw;
  }
}

static AnesimProgram& own(const AnesimDriver* self, DriverProgram& p) {
  auto* a = dynamic_cast<AnesimProgram*>(&p);
  if (!a || a->owner != self)
    throw DriverError(DriverStatus::LoadFailed,
                      fmt::format("program '{}' was not compiled by this anesim driver", p.name()));
  return *a;
}

void AnesimDriver::load(DriverProgram& dp) {
  AnesimProgram& p = own(this, dp);
  if (p.files_replaced && options_.reload_takes_effect) {
    // A profile on which reloading reads the model folder again: recompile the network from the
    // current files (the MIL text is unchanged, so only the constants differ).
    try {
      check_blobfile_constants(p.mil_text, p.weight_files, p.program_name + ".mil");
      p.compiled =
          std::make_shared<const ir::Graph>(compiler::parse_mil(p.mil_text, p.weight_files, p.program_name + ".mil"));
    } catch (const Error& e) {
      throw DriverError(DriverStatus::LoadFailed,
                        fmt::format("loading '{}' with its replaced weight files failed: {}", p.program_name, e.what()));
    }
    p.files_replaced = false;
  }
  // Otherwise the hardware keeps the network it compiled (C10): stale after a delta reload.
  if (!p.plan) p.plan = std::make_unique<Plan>(p.compiled, p.inputs, p.outputs);
  counters_.loads++;
  predicted_load_ms_ += reload_ms(double(p.cost.constant_bytes), chip_timing(*chip_));
  last_evaluated_ = 0;  // loading moved weights through the ANE: nothing is known to be resident
}

void AnesimDriver::unload(DriverProgram& dp) {
  AnesimProgram& p = own(this, dp);
  p.plan.reset();
  counters_.unloads++;
}

void AnesimDriver::replace_weight_files(DriverProgram& dp, const WeightDict& weights) {
  AnesimProgram& p = own(this, dp);
  for (const auto& [key, bytes] : weights) {
    if (!p.weight_files.count(key))
      throw DriverError(DriverStatus::LoadFailed,
                        fmt::format("'{}' is not a weight file of program '{}'", key, p.program_name),
                        "keys are \"@model_path/weights/<file>.bin\" as in the compile-time dictionary");
    p.weight_files[key] = bytes;
  }
  p.files_replaced = true;
}

void AnesimDriver::evaluate(DriverProgram& dp, const std::vector<Surface*>& inputs, const std::vector<Surface*>& outputs) {
  AnesimProgram& p = own(this, dp);
  if (!p.plan)
    throw DriverError(DriverStatus::EvalFailed, fmt::format("program '{}' is not loaded", p.program_name),
                      "call load() first");
  check_surfaces("input", "C13", p.inputs, p.input_bytes, inputs, *chip_);
  check_surfaces("output", "C5", p.outputs, p.output_bytes, outputs, *chip_);
  std::vector<const uint16_t*> in;
  std::vector<uint16_t*> out;
  for (Surface* s : inputs) in.push_back(s->f16());
  for (Surface* s : outputs) out.push_back(s->f16());
  p.plan->run(in, out);
  counters_.evaluations++;
  p.last = predict_evaluation(p.cost, *chip_, /*weights_resident=*/last_evaluated_ == p.serial);
  p.evaluated = true;
  last_evaluated_ = p.serial;
  counters_.predicted_ane_ms += p.last.total_ms;
}

TimingBreakdown AnesimDriver::predicted(const DriverProgram& dp) const {
  const AnesimProgram& p = own(this, const_cast<DriverProgram&>(dp));
  return p.evaluated ? p.last : predict_evaluation(p.cost, *chip_);
}

const ProgramCost& AnesimDriver::cost(const DriverProgram& p) const { return own(this, const_cast<DriverProgram&>(p)).cost; }

std::unique_ptr<Driver> make_anesim_driver(const DriverOptions& options) { return std::make_unique<AnesimDriver>(options); }

}  // namespace orion::runtime::anesim

// AneKernel: compile → load → (write surfaces → evaluate → read surfaces)* → unload.
#include "runtime/ane_kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "base/timer.h"

namespace orion::runtime {

namespace {

std::string shape_str(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

// The type a boundary tensor has on the host side (as the graph was built) and in the buffer.
struct BoundaryTypes {
  ir::Type host, buffer;
};
BoundaryTypes boundary_types(const compiler::AneBoundary& b, const compiler::Binding& binding, bool is_input) {
  const compiler::BoundaryChange* c = b.find_change(binding.name, is_input);
  return {c ? c->original : binding.type, binding.type};
}

// Rows of a boundary tensor: everything but its last (sequence) axis. legalize-ane only ever
// changes the sequence length (C7) or regroups the rows (C14), so host and buffer agree on it.
int64_t row_count(const ir::Type& t) {
  const int64_t S = t.shape.empty() ? 1 : t.shape.back();
  return S ? t.numel() / S : 0;
}
int64_t row_length(const ir::Type& t) { return t.shape.empty() ? 1 : t.shape.back(); }

// Concatenates row-major tensors along `axis` (they agree on every other axis).
ir::Tensor32 concat(const std::vector<ir::Tensor32>& parts, int64_t axis) {
  ORION_CHECK(!parts.empty(), "concat of no parts");
  std::vector<int64_t> shape = parts[0].shape;
  shape[size_t(axis)] = 0;
  for (const ir::Tensor32& p : parts) shape[size_t(axis)] += p.shape[size_t(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < int64_t(shape.size()); i++) {
    if (i < axis) outer *= shape[size_t(i)];
    if (i > axis) inner *= shape[size_t(i)];
  }
  ir::Tensor32 out(shape);
  float* dst = out.data.data();
  for (int64_t o = 0; o < outer; o++)
    for (const ir::Tensor32& p : parts) {
      const int64_t chunk = p.shape[size_t(axis)] * inner;
      std::memcpy(dst, p.data.data() + o * chunk, size_t(chunk) * sizeof(float));
      dst += chunk;
    }
  return out;
}

}  // namespace

std::vector<float> restride_rows(const std::vector<float>& from, int64_t rows, int64_t from_len, int64_t to_len) {
  ORION_CHECK(int64_t(from.size()) == rows * from_len, "restride of {} floats as {} rows of {}", from.size(), rows,
              from_len);
  std::vector<float> to(size_t(rows * to_len), 0.0f);
  const int64_t n = std::min(from_len, to_len);
  for (int64_t r = 0; r < rows; r++)
    std::memcpy(to.data() + r * to_len, from.data() + r * from_len, size_t(n) * sizeof(float));
  return to;
}

AneKernel::AneKernel(Driver& driver, ir::Graph built) : driver_(driver), graph_(std::move(built)) {}

std::unique_ptr<AneKernel> AneKernel::compile(Driver& driver, CompileBudget& budget, const ir::Graph& g) {
  Timer t;
  std::unique_ptr<AneKernel> k(new AneKernel(driver, g));
  ir::Graph work = g;  // the passes rewrite it
  compiler::CompileResult r = compiler::compile_graph(work, driver.chip());
  k->program_ = std::move(r.program);
  k->boundary_ = std::move(r.boundary);
  // Only a compile that reaches the driver costs budget: a graph the compiler refuses does not.
  budget.charge(k->program_.name, &driver);
  k->handle_ = driver.compile(k->program_.mil_text, k->program_.weights, k->program_.name);
  driver.load(*k->handle_);
  ORION_CHECK(k->handle_->input_names() == k->program_.inputs.names() &&
                  k->handle_->output_names() == k->program_.outputs.names(),
              "driver '{}' binds program '{}' in another order than its binding tables (C6)", driver.name(), k->name());
  // C5/C13 uniform sizes, C7 minimum: the emitter's binding tables and legalize-ane agree on
  // them; the larger is taken should they ever differ, so the driver never sees a small buffer.
  const int64_t min = driver.chip().min_buffer_bytes;
  const int64_t in_bytes = std::max({k->program_.inputs.alloc_bytes, k->boundary_.input_alloc_bytes, min});
  const int64_t out_bytes = std::max({k->program_.outputs.alloc_bytes, k->boundary_.output_alloc_bytes, min});
  k->inputs_.assign(k->program_.inputs.bindings.size(), Surface(size_t(in_bytes)));
  k->outputs_.assign(k->program_.outputs.bindings.size(), Surface(size_t(out_bytes)));
  k->resident_.assign(k->inputs_.size(), 0);
  k->timing_.compile_s = t.seconds();
  return k;
}

AneKernel::~AneKernel() {
  try {
    unload();
  } catch (...) {  // a destructor must not throw; the driver drops the program with its handle
  }
}

void AneKernel::unload() {
  if (handle_ && handle_->loaded()) driver_.unload(*handle_);
}

void AneKernel::load() {
  if (handle_ && !handle_->loaded()) driver_.load(*handle_);
}

void AneKernel::reload_weights(const WeightDict& weights) {
  unload();
  driver_.replace_weight_files(*handle_, weights);
  program_.weights = weights;
  load();
}

// Host tensors → packed fp16 surfaces, in binding (alphabetical) order; the sequence of a padded
// input is filled with zeros (C7), a flattened one (C14) is copied as is (same row-major bytes).
void AneKernel::write_inputs(const TensorMap& inputs) {
  const auto& bindings = program_.inputs.bindings;
  for (size_t k = 0; k < bindings.size(); k++) {
    const compiler::Binding& b = bindings[k];
    auto it = inputs.find(b.name);
    if (it == inputs.end() && resident_[k]) continue;  // its surface holds it already
    if (it == inputs.end())
      throw_usage_error(fmt::format("program '{}' needs input '{}' ({} given)", name(), b.name, inputs.size()), b.name,
                        "pass one tensor per graph input, keyed by the input's name");
    const BoundaryTypes t = boundary_types(boundary_, b, true);
    if (it->second.shape != t.host.shape)
      throw_usage_error(fmt::format("program '{}' input '{}' has shape {}, the graph declares {}", name(), b.name,
                                    shape_str(it->second.shape), shape_str(t.host.shape)),
                        b.name);
    const int64_t rows = row_count(t.host);
    ORION_CHECK(rows == row_count(t.buffer), "input '{}': {} and {} do not have the same rows", b.name, t.host.str(),
                t.buffer.str());
    if (row_length(t.host) == row_length(t.buffer)) {
      inputs_[k].write_f32(it->second.data.data(), it->second.data.size());
    } else {
      std::vector<float> padded = restride_rows(it->second.data, rows, row_length(t.host), row_length(t.buffer));
      inputs_[k].write_f32(padded.data(), padded.size());
    }
  }
}

uint16_t* AneKernel::resident_input(const std::string& name) {
  const auto& bindings = program_.inputs.bindings;
  for (size_t k = 0; k < bindings.size(); k++) {
    if (bindings[k].name != name) continue;
    const BoundaryTypes t = boundary_types(boundary_, bindings[k], true);
    ORION_CHECK(t.host.shape == t.buffer.shape, "program '{}': resident input '{}' is {} at the boundary, declared {}",
                this->name(), name, t.buffer.str(), t.host.str());
    resident_[k] = 1;
    return inputs_[k].f16();
  }
  throw_usage_error(fmt::format("program '{}' has no input '{}'", this->name(), name), name);
}

// Packed fp16 surfaces → host tensors: real sequence positions only, declared shapes, split
// outputs concatenated again (C1).
TensorMap AneKernel::read_outputs() {
  TensorMap parts;
  const auto& bindings = program_.outputs.bindings;
  for (size_t k = 0; k < bindings.size(); k++) {
    const compiler::Binding& b = bindings[k];
    const BoundaryTypes t = boundary_types(boundary_, b, false);
    std::vector<float> buf(size_t(t.buffer.numel()));
    outputs_[k].read_f32(buf.data(), buf.size());
    if (row_length(t.host) != row_length(t.buffer))
      buf = restride_rows(buf, row_count(t.buffer), row_length(t.buffer), row_length(t.host));
    parts[b.name] = ir::Tensor32(t.host.shape, std::move(buf));
  }
  for (const compiler::OutputSplit& s : boundary_.output_splits) {
    std::vector<ir::Tensor32> pieces;
    for (const std::string& p : s.parts) {
      auto it = parts.find(p);
      ORION_CHECK(it != parts.end(), "output '{}' of '{}' misses its part '{}'", s.output, name(), p);
      pieces.push_back(std::move(it->second));
      parts.erase(it);
    }
    parts[s.output] = concat(pieces, s.axis);
  }
  TensorMap out;
  for (const ir::GraphOutput& o : graph_.outputs()) {
    auto it = parts.find(o.name);
    ORION_CHECK(it != parts.end(), "program '{}' returned no '{}'", name(), o.name);
    ir::Tensor32 tensor = std::move(it->second);
    const std::vector<int64_t>& declared = graph_.type(o.value).shape;
    const int64_t declared_numel = graph_.type(o.value).numel();
    ORION_CHECK(tensor.numel() == declared_numel, "output '{}' of '{}' has {} values for {}", o.name, name(), tensor.numel(),
                shape_str(declared));
    tensor.shape = declared;
    out[o.name] = std::move(tensor);
  }
  return out;
}

TensorMap AneKernel::run(const TensorMap& inputs) {
  Timer t;
  write_inputs(inputs);
  timing_.write_surfaces_s += t.seconds();
  t.reset();
  std::vector<Surface*> in, out;
  for (Surface& s : inputs_) in.push_back(&s);
  for (Surface& s : outputs_) out.push_back(&s);
  driver_.evaluate(*handle_, in, out);
  timing_.evaluate_s += t.seconds();
  t.reset();
  TensorMap result = read_outputs();
  timing_.read_surfaces_s += t.seconds();
  timing_.runs++;
  return result;
}

}  // namespace orion::runtime

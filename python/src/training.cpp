// orion._core.Trainer: full training (train::Trainer) or LoRA fine-tuning (train::LoraTrainer),
// set up from the flags `orion train` / `orion lora train` take — parsed by the CLI's own option
// definitions (tools/command.h: parse_train_flags), so defaults, checks and error messages are the
// CLI's. fit() is the CLI's run(): the same loop, metrics log, checkpoints and Ctrl-C handling
// (the loop finishes the step and writes a checkpoint; here KeyboardInterrupt follows).
#include <signal.h>
#include <memory>

#include "base/error.h"
#include "data/token_dataset.h"
#include "model/io/model_io.h"
#include "model/lora/lora.h"
#include "model/lora/lora_io.h"
#include "bindings.h"
#include "tools/command.h"
#include "train/lora/lora_train.h"
#include "train/loop/trainer.h"

namespace orion::python {
namespace {

py::dict step_metrics(const train::StepStats& s) {
  py::dict d;
  d["step"] = s.step, d["loss"] = s.loss, d["lr"] = s.lr, d["grad_norm"] = s.grad_norm;
  d["ms"] = s.seconds * 1e3, d["skipped"] = s.skipped;
  return d;
}

// Python's handlers of SIGINT and SIGUSR1, put back however the training loop is left (it installs
// its own for the clean stop and restores them only when it returns normally).
class SignalHandlersKept {
 public:
  SignalHandlersKept() { sigaction(SIGINT, nullptr, &int_), sigaction(SIGUSR1, nullptr, &usr1_); }
  ~SignalHandlersKept() { sigaction(SIGINT, &int_, nullptr), sigaction(SIGUSR1, &usr1_, nullptr); }

 private:
  struct sigaction int_ {}, usr1_{};
};

class Trainer {
 public:
  // flags: as they would follow `orion train` (lora = false) or `orion lora train` (lora = true).
  // on_event(dict): every Step event's metrics (loss, lr, grad_norm, ms, skipped, val_loss, ...).
  Trainer(const std::vector<std::string>& flags, bool lora, py::object on_event) : on_event_(std::move(on_event)) {
    train::LoraTrainOptions lo;
    if (lora) lo = tools::parse_lora_train_flags(flags);
    else lo.train = tools::parse_train_flags(flags);
    train::TrainOptions& o = lo.train;
    printer_ = o.progress ? o.on_progress : nullptr;  // the CLI's printer, unless progress=False
    o.progress = true;  // events always flow: they feed the callbacks
    o.on_progress = [this](const train::ProgressEvent& e) { on_progress(e); };
    py::gil_scoped_release nogil;  // setup may train a tokenizer and tokenize data
    if (lora) lora_ = std::make_unique<train::LoraTrainer>(lo);
    else full_ = std::make_unique<train::Trainer>(lo.train);
  }

  // The run to its total steps, as `orion train`; the result as a dict.
  py::dict fit(const std::optional<int64_t>& steps) {
    if (steps) set_total_steps(*steps);
    interrupted_ = false;
    train::TrainResult r;
    {
      SignalHandlersKept kept;
      py::gil_scoped_release nogil;
      r = full_ ? full_->run() : lora_->run();
    }
    if (interrupted_) {  // the loop stopped after a step and wrote a checkpoint
      PyErr_SetString(PyExc_KeyboardInterrupt, fmt::format("training stopped; checkpoint {}", r.checkpoint).c_str());
      throw py::error_already_set();
    }
    py::dict d;
    d["steps_done"] = r.steps_done, d["skipped_steps"] = r.skipped_steps;
    d["first_loss"] = r.first_loss, d["last_loss"] = r.last_loss, d["val_loss"] = r.val_loss;
    d["seconds"] = r.seconds, d["tokens_per_second"] = r.tokens_per_second;
    d["checkpoint"] = r.checkpoint, d["model"] = r.model, d["tokenizer"] = r.tokenizer;
    return d;
  }

  // One step on given tokens: [B, T+1] (one micro-batch) or [accum, B, T+1]; inputs are
  // tokens[..., :T], targets tokens[..., 1:].
  py::dict step(const std::optional<py::array>& tokens) {
    const std::vector<data::Batch> batches = tokens ? to_batches(*tokens) : std::vector<data::Batch>{};
    train::StepStats s;
    {
      py::gil_scoped_release nogil;
      if (!tokens) s = full_ ? full_->step() : lora_->step();
      else s = full_ ? full_->step_on(batches) : lora_->step_on(batches);
    }
    return step_metrics(s);
  }

  float evaluate() {
    py::gil_scoped_release nogil;
    return full_ ? full_->evaluate() : lora_->evaluate();
  }
  std::string save() {
    py::gil_scoped_release nogil;
    return full_ ? full_->save() : lora_->save();
  }
  std::string export_result(const std::string& path) {
    py::gil_scoped_release nogil;
    if (full_) return full_->export_model(path);
    if (!path.empty()) throw_usage_error("a LoRA adapter is written to the run folder (out=...)", "path");
    return lora_->export_adapter();
  }
  void set_total_steps(int64_t steps) {
    if (steps < 1) throw_usage_error("must be at least 1", "--steps");
    full_ ? full_->set_total_steps(steps) : lora_->set_total_steps(steps);
  }
  int64_t step_index() const { return full_ ? full_->step_index() : lora_->step_index(); }

  // The trained values (or the last step's gradients) as files a PyTorch user reads: a model in the
  // Hugging Face safetensors layout (full training), or a PEFT adapter (LoRA). Python's interop
  // (orion/interop.py) reads them back as a state_dict.
  void write_state(const std::string& path, bool grads) const {
    py::gil_scoped_release nogil;
    if (full_) {
      save_model((grads ? full_->grads() : full_->params()).view(), path, ModelFormat::Safetensors);
      return;
    }
    LoraAdapter a = lora_->adapter().clone();
    if (grads) std::copy(lora_->lora().grads(), lora_->lora().grads() + a.size(), a.data());
    save_lora(a, path, LoraFormat::Peft);
  }

  // name → array: the trained values (all parameters, or the adapter's A and B), copied.
  py::dict parameters() const { return tensors(false); }
  py::dict gradients() const { return tensors(true); }  // of the last step, before clipping

 private:
  void on_progress(const train::ProgressEvent& e) {
    if (printer_) printer_(e);
    if (e.kind == train::ProgressEvent::Kind::Interrupted) interrupted_ = true;
    if (e.kind != train::ProgressEvent::Kind::Step || on_event_.is_none()) return;
    py::gil_scoped_acquire gil;
    py::dict d = step_metrics(e.stats);
    if (e.val_loss >= 0) d["val_loss"] = e.val_loss;
    d["done"] = e.done;
    if (!printer_ && e.phases) d["phases"] = e.phases();  // the ANE phase times since the last step
    if (e.compiles >= 0) d["compiles"] = e.compiles;
    on_event_(d);
  }

  std::vector<data::Batch> to_batches(const py::array& tokens) const {
    if (tokens.ndim() != 2 && tokens.ndim() != 3)
      throw_usage_error("must be [B, T+1] or [accum, B, T+1] token ids", "tokens");
    const std::vector<int> ids = token_vector(tokens, "tokens");  // row-major: [accum,] B, T+1
    const int V = full_ ? full_->params().config().vocab_size : lora_->base().config.vocab_size;
    for (int id : ids)  // the model's embedding rows are all there is (the data readers check the same)
      if (id < 0 || id >= V)
        throw_usage_error(fmt::format("token id {} is outside the model's vocabulary of {}", id, V), "tokens");
    const int n = tokens.ndim() == 3 ? int(tokens.shape(0)) : 1;
    const int B = int(tokens.shape(tokens.ndim() - 2)), T = int(tokens.shape(tokens.ndim() - 1)) - 1;
    std::vector<data::Batch> out(static_cast<size_t>(n));
    for (int a = 0; a < n; a++) {
      data::Batch& b = out[size_t(a)];
      b.B = B, b.T = T;
      const int* rows = ids.data() + size_t(a) * size_t(B) * size_t(T + 1);
      b.tokens.assign(rows, rows + size_t(B) * size_t(T + 1));
      for (int r = 0; r < B; r++) {
        const int* row = rows + size_t(r) * size_t(T + 1);
        b.inputs.insert(b.inputs.end(), row, row + T);
        b.targets.insert(b.targets.end(), row + 1, row + T + 1);
      }
    }
    return out;
  }

  py::dict tensors(bool grads) const {
    py::dict d;
    if (full_) {
      const train::ParamBuffer& p = grads ? full_->grads() : full_->params();
      for (const train::ParamInfo& t : p.tensors()) d[py::str(t.name)] = float_array(p.data() + t.offset, t.shape);
      return d;
    }
    const LoraAdapter& a = lora_->adapter();
    const float* base = grads ? lora_->lora().grads() : a.data();
    for (const LoraTensor& t : a.tensors()) {
      const std::string name = fmt::format("layers.{}.{}", t.layer, lora_target_name(t.target));
      d[py::str(name + ".lora_A")] = float_array(base + t.a_offset, {a.rank(), t.in});
      d[py::str(name + ".lora_B")] = float_array(base + t.b_offset, {t.out, a.rank()});
    }
    return d;
  }

  py::object on_event_;
  train::ProgressCallback printer_;
  bool interrupted_ = false;
  std::unique_ptr<train::Trainer> full_;
  std::unique_ptr<train::LoraTrainer> lora_;
};

}  // namespace

void bind_training(py::module_& m) {
  py::class_<Trainer>(m, "Trainer", "Full training or LoRA fine-tuning, set up from CLI flags (see orion.Trainer).")
      .def(py::init<const std::vector<std::string>&, bool, py::object>(), py::arg("flags"), py::arg("lora") = false,
           py::arg("on_event") = py::none())
      .def("fit", &Trainer::fit, py::arg("steps") = py::none())
      .def("step", &Trainer::step, py::arg("tokens") = py::none())
      .def("evaluate", &Trainer::evaluate)
      .def("save", &Trainer::save)
      .def("export", &Trainer::export_result, py::arg("path") = "")
      .def("set_total_steps", &Trainer::set_total_steps)
      .def_property_readonly("step_index", &Trainer::step_index)
      .def("write_state", &Trainer::write_state, py::arg("path"), py::arg("gradients") = false)
      .def("parameters", &Trainer::parameters)
      .def("gradients", &Trainer::gradients);
}

}  // namespace orion::python

// Full training: the trainable set "all parameters", and what the Trainer adds to the loop
// (export, samples, the unigram baseline).
#include "train/loop/trainer.h"

#include <cmath>
#include <filesystem>

#include "data/token_dataset.h"
#include "infer/generate.h"
#include "model/family/family.h"
#include "model/io/model_io.h"
#include "model/tokenizer/tokenizer.h"
#include "model/transformer.h"
#include "train/dist/communicator.h"
#include "train/model/guards.h"

namespace orion::train {
namespace fs = std::filesystem;

namespace {

// Every parameter of the model: AdamW over all of them, ckpt_<step>.ckpt checkpoints (with the
// options that shape the numbers, for a bit-identical resume), a model file at the end.
class FullParameters final : public TrainableSet {
 public:
  FullParameters(Params& params, Grads& grads, AdamW& adam, TrainModel& model, const TrainOptions& opt,
                 std::function<std::string()> export_model)
      : params_(params), grads_(grads), adam_(adam), model_(model), opt_(opt), export_(std::move(export_model)) {}
  void zero_grads() override { model_.zero_grad(); }
  float* grads() override { return grads_.data(); }
  size_t size() const override { return grads_.size(); }
  double grad_norm() override { return train::grad_norm(grads_); }
  void update(float lr, double norm) override {
    adam_.step(params_, grads_, lr, norm);  // the norm AdamW would take (one pass over the gradients, not two)
    model_.weights_updated();               // the block runner refreshes its weights (ANE; CPU: nothing)
  }
  int64_t adam_steps() const override { return adam_.step_count(); }
  const char* name() const override { return "parameters"; }
  uint64_t values_hash() const override { return checkpoint_hash(params_.data(), params_.size() * sizeof(float)); }
  std::string save_checkpoint(const std::string& dir, const CheckpointState& state, int keep) override {
    return train::save_checkpoint(dir, state, opt_.numeric_json(), params_, adam_, keep);
  }
  std::string export_result() override { return export_(); }

 private:
  Params& params_;
  Grads& grads_;
  AdamW& adam_;
  TrainModel& model_;
  const TrainOptions& opt_;
  std::function<std::string()> export_;
};

}  // namespace

void Trainer::setup_loop() {
  trained_ = std::make_unique<FullParameters>(*params_, *grads_, *opt_adam_, *model_, opt_,
                                              [this] { return comm_->rank() == 0 ? export_model() : std::string(); });
  loop_ = std::make_unique<TrainingLoop>(opt_, *comm_, *model_, *trained_, *train_, val_.get(), state_);
  loop_->what = params_->config().describe();
  loop_->ane = ane_;
  loop_->after_backward = [this](int64_t step) {
    if (after_backward) after_backward(step, *grads_);
  };
  if (tokenizer_) loop_->sample = [this](int tokens) { return sample("Once upon a time", tokens); };
}

std::string Trainer::export_model(const std::string& path_or_empty) {
  const ModelConfig& c = params_->config();
  // The family's .bin by default, unless its blocks need more than a .bin holds (llama3 RoPE scaling…).
  const std::optional<ModelFormat> bin = c.cpu_only_features().empty() ? model_family(c.arch).bin_format() : std::nullopt;
  std::string fmt_name =
      opt_.export_format.empty() ? format_name(bin.value_or(ModelFormat::Safetensors)) : opt_.export_format;
  if (fmt_name == "none") return "";
  auto format = parse_format(fmt_name);
  if (!format)
    throw_usage_error(fmt::format("unknown model format '{}'", fmt_name), "--export-format",
                      "use llama2c, llama2c-v1, safetensors or llmc");
  std::string path = path_or_empty;
  if (path.empty()) path = (fs::path(opt_.out) / (*format == ModelFormat::Safetensors ? "model" : "model.bin")).string();
  save_model(params_->view(), path, *format);
  return path;
}

std::string Trainer::sample(const std::string& prompt, int tokens) {
  if (!tokenizer_ || tokens <= 0) return "";
  ModelWeights w = params_->view();
  Transformer tf(w);
  std::vector<int> ids = tokenizer_->encode(prompt, true);
  if (ids.empty()) ids.push_back(std::max(0, tokenizer_->eos_id()));
  GenerateOptions go;
  go.max_new_tokens = tokens;
  go.sampler.temperature = 0;  // greedy: the same text for the same weights
  for (int id : {tokenizer_->eos_id(), tokenizer_->bos_id()})
    if (id >= 0) go.stop_ids.push_back(id);
  std::vector<int> out = ids;
  generate(tf, ids, go, [&](int id) { out.push_back(id); });
  return tokenizer_->decode(out);
}

double Trainer::unigram_entropy() const {
  std::vector<uint64_t> counts(size_t(params_->config().vocab_size) + 1, 0);
  uint64_t n = 0;
  for (const auto& f : train_->files())
    for (size_t i = 0; i < f.count; ++i) ++counts[std::min<size_t>(f.tokens[i], counts.size() - 1)], ++n;
  double h = 0;
  for (uint64_t k : counts)
    if (k) h -= double(k) / double(n) * std::log(double(k) / double(n));
  return h;
}

}  // namespace orion::train

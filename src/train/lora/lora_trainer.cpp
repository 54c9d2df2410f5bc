// LoRA fine-tuning runs: the trainable set "the adapter", and the LoraTrainer's setup (base model,
// adapter, blocks, data) before the one training loop takes over (lora_train.h).
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "base/file.h"
#include "data/prepare.h"
#include "data/token_dataset.h"
#include "model/io/model_io.h"
#include "model/lora/lora_io.h"
#include "train/dist/communicator.h"
#include "train/dist/data_parallel.h"
#include "train/lora/lora_train.h"

namespace orion::train {
namespace fs = std::filesystem;

namespace {

// lora_<step>.olora files of a folder, oldest first.
std::vector<std::string> list_lora_checkpoints(const std::string& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().starts_with("lora_") && e.path().extension() == ".olora")
      found.push_back(e.path().string());
  std::sort(found.begin(), found.end());
  return found;
}

// The A, B factors of an adapter over a frozen base: their gradients come from the blocks (the
// LoRA-only backward) or from dW' (gather); after an AdamW step W' is re-merged from the frozen W
// (or the ANE programs' adapter inputs refreshed). Checkpoints are lora_<step>.olora; the result is
// the adapter in Orion's format and/or the PEFT layout.
class LoraAdapterSet final : public TrainableSet {
 public:
  LoraAdapterSet(LoraTraining& lora, AdamW& adam, TrainModel& model, const Grads& model_grads, bool direct,
                 const LoraTrainOptions& opt, dist::Communicator& comm)
      : lora_(lora), adam_(adam), model_(model), model_grads_(model_grads), direct_(direct), opt_(opt), comm_(comm) {}
  void zero_grads() override {
    if (!direct_) model_.zero_grad();  // direct: nothing reads the model's gradient buffer
    lora_.zero_grads();
  }
  void gradients_done() override {
    if (!direct_) lora_.gather(model_grads_);  // dW' → dA, dB (direct: the blocks reported X, dY already)
  }
  float* grads() override { return lora_.grads(); }
  size_t size() const override { return lora_.adapter().size(); }
  double grad_norm() override { return adam_.norm(lora_.grads()); }
  void update(float lr, double /*norm*/) override {
    adam_.step(lora_.adapter().data(), lora_.grads(), lr);
    lora_.merge_into_work();                          // W' = W + s·B·A from the frozen W
    model_.weights_updated(lora_.merged_matrices());  // only those repacked; the ANE runner refreshes its programs' weights
  }
  int64_t adam_steps() const override { return adam_.step_count(); }
  const char* name() const override { return "adapter"; }
  uint64_t values_hash() const override {
    return checkpoint_hash(lora_.adapter().data(), lora_.adapter().size() * sizeof(float));
  }
  std::string save_checkpoint(const std::string& dir, const CheckpointState& state, int keep) override {
    LoraTrainingState st;
    st.json = {{"step", state.step},
               {"adam_steps", state.adam_steps},
               {"skipped", state.skipped_steps},
               {"data_position", state.data_position},
               {"model", opt_.model},
               {"options", opt_.train.numeric_json()}};  // a resume continues with these
    if (state.loss_scale > 0)  // a dynamic loss scale goes on from where it was
      st.json["loss_scale"] = state.loss_scale, st.json["loss_scale_clean_steps"] = state.loss_scale_clean_steps;
    st.m = adam_.m(), st.v = adam_.v();
    std::error_code ec;
    fs::create_directories(dir, ec);
    const std::string path = (fs::path(dir) / fmt::format("lora_{:08d}.olora", state.step)).string();
    save_lora_checkpoint(lora_.adapter(), path, st);
    const std::vector<std::string> found = list_lora_checkpoints(dir);  // keep the newest `keep`
    for (size_t i = 0; keep > 0 && i + size_t(keep) < found.size(); i++) fs::remove(found[i]);
    return path;
  }
  std::string export_result() override {
    const std::string& out = opt_.train.out;
    if (comm_.rank() != 0) return out;
    if (opt_.format != "peft") save_lora(lora_.adapter(), out, LoraFormat::Orion);
    if (opt_.format != "orion") save_lora(lora_.adapter(), out, LoraFormat::Peft, opt_.model);
    return out;
  }

 private:
  LoraTraining& lora_;
  AdamW& adam_;
  TrainModel& model_;
  const Grads& model_grads_;
  bool direct_;
  const LoraTrainOptions& opt_;
  dist::Communicator& comm_;
};

bool is_token_data(const std::string& path) {
  return is_directory(path) || path.ends_with(".bin") || path.ends_with(".tok");
}

}  // namespace

void LoraTrainer::setup_data() {
  TrainOptions& t = opt_.train;
  std::string path = t.data;
  if (!is_token_data(path)) {  // text: tokenize it once with the base model's tokenizer
    if (t.tokenizer.empty())
      throw_usage_error("text data needs the base model's tokenizer", "--tokenizer", "pass --tokenizer PATH");
    const std::string dir = (fs::path(t.out) / "data").string();
    auto prepare = [&] {
      if (file_exists((fs::path(dir) / "meta.json").string())) return;  // written last: the folder is complete
      data::PrepareOptions po;
      po.tokenizer = t.tokenizer, po.inputs = {t.data}, po.out_dir = dir, po.val_fraction = 0.1, po.progress = false;
      data::PrepareResult r = data::prepare_dataset(po);
      report_note(t, fmt::format("lora: {} tokenized: {} train and {} validation tokens → {}", t.data, r.train_tokens,
                                 r.val_tokens, dir));
    };
    // Rank 0 first; the other ranks then find its folder (same host or a shared disk) or, on
    // another host, make the same one themselves.
    if (comm_->rank() == 0) prepare();
    if (comm_->world() > 1) {
      comm_->barrier();
      if (comm_->rank() != 0) prepare();
    }
    path = dir;
  }
  TrainingData split = open_training_data(path, t, *comm_, base_->config.vocab_size, "lora");
  train_ = std::move(split.train), val_ = std::move(split.val);
}

// Rank 0 takes the newest checkpoint that reads cleanly (a damaged newer one is skipped with a
// note) and sends its bytes to the other ranks, which need no copy of their own.
LoraAdapter LoraTrainer::load_resumed(LoraTrainingState* resumed) {
  TrainOptions& t = opt_.train;
  std::string from = t.resume.empty() ? t.checkpoint_dir() : t.resume;
  if (is_directory(from) && is_directory((fs::path(from) / "checkpoints").string()) && list_lora_checkpoints(from).empty())
    from = (fs::path(from) / "checkpoints").string();  // a run folder
  std::vector<uint8_t> name, bytes;
  if (comm_->rank() == 0) {
    std::vector<std::string> found = is_directory(from) ? list_lora_checkpoints(from) : std::vector<std::string>{from};
    if (found.empty())
      throw_usage_error(fmt::format("no LoRA checkpoint in {}", from), "--resume", "start without --resume");
    for (auto it = found.rbegin(); it != found.rend() && bytes.empty(); ++it) {
      auto file = MappedFile::open(*it);
      try {
        LoraTrainingState probe;
        parse_lora_checkpoint(file->data(), file->size(), *it, &probe);
      } catch (const Error& e) {
        if (std::next(it) == found.rend()) throw;
        report_note(t, fmt::format("lora: skipping {}: {}", *it, e.what()));
        continue;
      }
      bytes.assign(file->data(), file->data() + file->size());
      name.assign(it->begin(), it->end());
    }
  }
  comm_->broadcast(name, 0);
  comm_->broadcast(bytes, 0);
  const std::string used(name.begin(), name.end());
  LoraAdapter adapter = parse_lora_checkpoint(bytes.data(), bytes.size(), used, resumed);
  adapter.check_fits(base_->config, used);
  state_.step = resumed->json.value("step", int64_t(0)), state_.skipped_steps = resumed->json.value("skipped", int64_t(0));
  state_.adam_steps = resumed->json.value("adam_steps", int64_t(0));
  state_.data_position = resumed->json.value("data_position", uint64_t(0));
  state_.loss_scale = resumed->json.value("loss_scale", 0.0f);
  state_.loss_scale_clean_steps = resumed->json.value("loss_scale_clean_steps", 0);
  // The run's numeric options and data continue it bit for bit (steps: a new total given wins).
  if (resumed->json.contains("options")) t.apply_numeric_json(resumed->json["options"], used);
  else if (t.steps <= 0 || t.data.empty())
    throw_usage_error(fmt::format("{} does not record its run's options (an older Orion wrote it)", used), "--resume",
                      "give the run's flags again, --data and --steps included");
  report_note(t, fmt::format("lora: resuming from {} at step {}", used, state_.step));
  return adapter;
}

LoraTrainer::LoraTrainer(LoraTrainOptions opt, dist::Communicator* comm) : opt_(std::move(opt)), comm_(comm) {
  TrainOptions& t = opt_.train;
  if (!comm_) own_comm_ = std::make_unique<dist::SingleProcess>(), comm_ = own_comm_.get();
  if (comm_->rank() != 0) t.progress = false;  // rank 0 alone prints (and writes files)
  if (opt_.model.empty()) throw_usage_error("LoRA training needs a base model", "--model");
  if (opt_.format != "orion" && opt_.format != "peft" && opt_.format != "both")
    throw_usage_error(fmt::format("unknown adapter format '{}'", opt_.format), "--format", "use orion, peft or both");
  const bool resuming = opt_.resume || !t.resume.empty();
  if (!resuming) t.validate();  // a resume validates the checkpoint's options below
  base_ = std::make_unique<ModelWeights>(load_model(opt_.model));
  const ModelConfig c = base_->config;
  std::error_code ec;
  fs::create_directories(t.checkpoint_dir(), ec);
  if (!is_directory(t.out)) throw_runtime_error("cannot create the output folder", t.out);

  // The adapter: fresh (A random, B = 0), or the newest checkpoint's with its optimiser state.
  LoraAdapter adapter;
  LoraTrainingState resumed;
  if (resuming) {
    adapter = load_resumed(&resumed);
    t.validate();
  } else {
    adapter = LoraAdapter(c, opt_.rank, opt_.alpha, parse_lora_targets(opt_.targets, c.arch));
    adapter.init(t.seed);
  }
  if (t.seq > c.seq_len)
    throw_usage_error(fmt::format("--seq {} exceeds the model's context of {} tokens", t.seq, c.seq_len), "--seq",
                      fmt::format("use --seq {} or less", c.seq_len));
  setup_model(std::move(adapter));
  if (resuming) adam_->m() = resumed.m, adam_->v() = resumed.v, adam_->set_step_count(state_.adam_steps);
  setup_data();
  train_->seek(state_.data_position);
  check_ranks_agree();
  trained_ = std::make_unique<LoraAdapterSet>(*lora_, *adam_, *model_, *grads_, direct_grads_, opt_, *comm_);
  loop_ = std::make_unique<TrainingLoop>(t, *comm_, *model_, *trained_, *train_, val_.get(), state_);
  loop_->what = lora_->adapter().describe() + " on " + base_->config.describe();
  loop_->ane = ane_;
}

// The working parameters, the blocks (CPU, 16-bit base, or ANE programs) and the optimiser.
void LoraTrainer::setup_model(LoraAdapter adapter) {
  const TrainOptions& t = opt_.train;
  const ModelConfig c = base_->config;
  DType base16 = DType::F32;
  if (opt_.base_dtype == "f16" || opt_.base_dtype == "bf16") base16 = opt_.base_dtype == "f16" ? DType::F16 : DType::BF16;
  else if (opt_.base_dtype != "f32")
    throw_usage_error(fmt::format("unknown base dtype '{}'", opt_.base_dtype), "--base-dtype", "use f32, f16 or bf16");
  if (base16 != DType::F32 && t.backend != "cpu")
    throw_usage_error("--base-dtype f16/bf16 is for the CPU backend", "--base-dtype",
                      "the ANE path bakes the base into fp16 programs already; drop --base-dtype");
  // The ANE programs are the plain blocks'; the CPU runner trains adapters over every Llama-like feature.
  if (t.backend != "cpu") c.require_plain_blocks(opt_.model, "LoRA training on the ANE path");
  if (base16 == DType::F32) {
    work_ = std::make_unique<Params>(Params::from_weights(*base_));
    grads_ = std::make_unique<Grads>(c);
  } else {  // embeddings, norms, biases in fp32; the block matrices once, in 16 bits; the loaded model let go
    work_ = std::make_unique<Params>(c, /*layer_matrices=*/false);
    work_->load(*base_);
    grads_ = std::make_unique<Grads>(c, false);
    base16_ = std::make_unique<Base16Weights>(*base_, base16);
    base_ = std::make_unique<ModelWeights>();
    base_->config = c;
  }
  const ActivationCheckpointing ckpt = t.activation_checkpointing();
  model_ = std::make_unique<TrainModel>(*work_, grads_.get(), t.batch, t.seq, ckpt);
  // The ANE path with the base baked and the adapter as program inputs: adapters on q and v (the
  // kernels' slots), Llama or GPT-2. Otherwise the ANE runner trains on the merged W', streamed as inputs.
  bool qv_only = true;
  for (LoraTarget tg : adapter.targets()) qv_only = qv_only && (tg == LoraTarget::Q || tg == LoraTarget::V);
  const bool adapter_inputs = t.backend != "cpu" && qv_only;
  lora_ = std::make_unique<LoraTraining>(*work_, std::move(adapter), /*merged=*/!adapter_inputs && !base16_);
  if (base16_) {  // the blocks widen the 16-bit base a layer at a time, with the adapter merged
    auto blocks = std::make_unique<Base16Blocks>(*work_, *base16_, lora_->adapter(), grads_.get(), t.batch, t.seq, ckpt);
    blocks16_ = blocks.get();
    model_->set_blocks(std::move(blocks));
  }
  if (t.backend != "cpu") {  // compiled at the first forward
    AneTrainOptions ao = t.ane;
    ao.driver = t.backend, ao.quiet = ao.quiet || !t.progress;
    auto blocks = adapter_inputs ? make_lora_ane_blocks(*work_, lora_->adapter(), *lora_, t.batch, t.seq, ao)
                                 : make_ane_blocks(*work_, grads_.get(), t.batch, t.seq, ao);
    if (!adapter_inputs)
      report_note(t,
                  "lora: the ANE path bakes the base with adapter inputs for q,v adapters only; this one "
                  "trains on the merged weights (streamed as program inputs)");
    ane_ = blocks.get();
    model_->set_blocks(std::move(blocks));
  }
  // The LoRA-only backward: no dW of the frozen base; dA, dB straight from X and dY.
  direct_grads_ = model_->freeze_base(lora_.get());
  AdamWConfig ac;
  ac.beta1 = t.beta1, ac.beta2 = t.beta2, ac.eps = t.eps, ac.weight_decay = t.weight_decay, ac.clip_norm = t.clip;
  adam_ = std::make_unique<AdamW>(lora_->layout(), lora_->adapter().size(), ac);
}

// Before the first step, the ranks must agree on everything that shapes the numbers.
void LoraTrainer::check_ranks_agree() {
  if (comm_->world() == 1) return;
  auto hash = [](const void* p, size_t n, uint64_t seed = 0xcbf29ce484222325ull) { return checkpoint_hash(p, n, seed); };
  const std::string options =
      fmt::format("{} {} {} {} {} {} {} {} {} {} {}", opt_.train.numeric_json().dump(), opt_.rank, opt_.alpha, opt_.targets,
                  state_.step, state_.skipped_steps, adam_->step_count(), train_->position(), opt_.train.backend,
                  lora_->adapter().describe(), base_->config.describe());
  const LoraAdapter& a = lora_->adapter();
  const size_t bytes = a.size() * sizeof(float);
  uint64_t base = 0xcbf29ce484222325ull;
  for (const auto& [name, t] : base_->named_tensors())
    base = hash(t->data, t->nbytes(), hash(name.data(), name.size(), base));
  dist::check_ranks_agree(*comm_, {{"LoRA options and state (--rank, --alpha, --targets, --batch, --lr, ...)",
                                    hash(options.data(), options.size())},
                                   {"base model weights", base},
                                   {"training data", dist::dataset_fingerprint(*train_)},
                                   {"adapter and optimiser moments",
                                    hash(adam_->v().data(), bytes, hash(adam_->m().data(), bytes, hash(a.data(), bytes)))}});
}

LoraTrainer::~LoraTrainer() = default;

size_t LoraTrainer::base_bytes() const {
  if (base16_) return base16_->bytes + blocks16_->layer_buffer_bytes();
  size_t bytes = 0;
  for (const ParamInfo& pi : work_->tensors())
    if (pi.matrix() && pi.name.starts_with("layers.")) bytes += pi.numel * sizeof(float);
  if (lora_->merged())
    for (const LoraTensor& t : lora_->adapter().tensors()) bytes += size_t(t.out * t.in) * sizeof(float);
  return bytes;
}

std::string LoraTrainer::export_adapter() { return trained_->export_result(); }

}  // namespace orion::train

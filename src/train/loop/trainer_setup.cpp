// Trainer setup: options ⇄ JSON, the model configuration, the tokenizer, the data and the model
// (fresh, fine-tuned from --init, or resumed from a checkpoint).
#include <cmath>
#include <filesystem>

#include "base/file.h"
#include "base/json_error.h"
#include "data/bpe_trainer.h"
#include "data/document_stream.h"
#include "data/prepare.h"
#include "data/rng.h"
#include "data/token_dataset.h"
#include "model/family/family.h"
#include "model/io/model_io.h"
#include "model/tokenizer/tokenizer.h"
#include "train/dist/data_parallel.h"
#include "train/loop/trainer.h"

namespace orion::train {
namespace fs = std::filesystem;

int TrainOptions::warmup_steps() const {
  if (warmup >= 0) return warmup;
  return int(std::min<int64_t>(100, steps / 20));
}

float TrainOptions::lr_at(int64_t s) const {
  const int64_t W = warmup_steps();
  if (s < W) return lr * float(s + 1) / float(W);
  if (schedule == "constant" || steps <= W) return lr;
  const double min_lr = double(lr) * min_lr_ratio;
  const double progress = std::min(1.0, double(s - W) / double(steps - W));
  return float(min_lr + 0.5 * (double(lr) - min_lr) * (1.0 + std::cos(M_PI * progress)));
}

ActivationCheckpointing TrainOptions::activation_checkpointing() const {
  ActivationCheckpointing a = ActivationCheckpointing::parse(checkpoint_activations);
  if (a.every > 0 && backend != "cpu")
    throw_usage_error(fmt::format("--checkpoint-activations {} is for the CPU backend", checkpoint_activations),
                      "--checkpoint-activations",
                      "the ANE path keeps its activations in the programs' output surfaces; drop the flag with --backend "
                      "anesim|ane");
  return a;
}

// Non-default mixed-precision settings join the numeric options (a resume keeps them); fp32 runs'
// options stay as they were.
static void add_precision_json(nlohmann::json& j, const TrainOptions& o) {
  if (o.precision != "fp32") j["precision"] = o.precision;
  if (o.loss_scale_mode() != "none") j["loss_scale"] = o.loss_scale_mode(), j["loss_scale_window"] = o.loss_scale_window;
}

nlohmann::json TrainOptions::numeric_json() const {
  nlohmann::json j = {{"config", config},
          {"init", init},
          {"data", data},
          {"vocab", vocab},
          {"batch", batch},
          {"seq", seq},
          {"accum", accum},
          {"shuffle", shuffle},
          {"steps", steps},
          {"lr", lr},
          {"schedule", schedule},
          {"warmup", warmup_steps()},
          {"min_lr_ratio", min_lr_ratio},
          {"weight_decay", weight_decay},
          {"beta1", beta1},
          {"beta2", beta2},
          {"eps", eps},
          {"clip", clip},
          {"seed", seed},
          {"max_bad_steps", max_bad_steps},
          {"sanitize_grads", sanitize_grads}};
  add_precision_json(j, *this);
  return j;
}

cpu::GemmPrecision TrainOptions::gemm_precision() const {
  if (precision == "fp32") return cpu::GemmPrecision::F32;
  if (precision == "bf16") return cpu::GemmPrecision::BF16;
  if (precision == "fp16") return cpu::GemmPrecision::F16;
  throw_usage_error(fmt::format("unknown precision '{}'", precision), "--precision", "use fp32, bf16 or fp16");
}

std::string TrainOptions::loss_scale_mode() const {
  gemm_precision();  // checks the spelling
  if (loss_scale == "auto") return precision == "fp16" ? "dynamic" : "none";
  return loss_scale;
}

void TrainOptions::validate() const {
  if (precision != "fp32" && backend != "cpu")
    throw_usage_error("--precision applies to the cpu backend", "--precision",
                      "the ANE path runs its programs in fp16 already; use --loss-scale there");
  if (batch < 1 || seq < 1 || accum < 1) throw_usage_error("--batch, --seq and --accum must be ≥ 1", "--batch");
  if (steps < 1) throw_usage_error("--steps must be ≥ 1", "--steps");
  if (!(lr > 0) || !std::isfinite(lr)) throw_usage_error("--lr must be a positive number", "--lr");
  if (schedule != "cosine" && schedule != "constant")
    throw_usage_error(fmt::format("unknown schedule '{}'", schedule), "--schedule", "use cosine or constant");
}

std::string TrainOptions::checkpoint_dir() const {
  return ckpt_dir.empty() ? (fs::path(out) / "checkpoints").string() : ckpt_dir;
}

std::string TrainOptions::metrics_path() const {
  return metrics.empty() ? (fs::path(out) / "metrics.jsonl").string() : metrics;
}

void TrainOptions::apply_numeric_json(const nlohmann::json& j, const std::string& source) {
  try {
    config = j.at("config").get<std::string>();
    init = j.at("init").get<std::string>();
    data = j.at("data").get<std::string>();
    vocab = json_number<int>(j.at("vocab"));
    batch = json_number<int>(j.at("batch")), seq = json_number<int>(j.at("seq")), accum = json_number<int>(j.at("accum"));
    shuffle = j.at("shuffle").get<bool>();
    if (steps <= 0) steps = json_number<int64_t>(j.at("steps"));  // a new total from the caller wins
    lr = json_number<float>(j.at("lr"));
    schedule = j.at("schedule").get<std::string>();
    warmup = json_number<int>(j.at("warmup"));
    min_lr_ratio = json_number<float>(j.at("min_lr_ratio"));
    weight_decay = json_number<float>(j.at("weight_decay"));
    beta1 = json_number<float>(j.at("beta1")), beta2 = json_number<float>(j.at("beta2")),
    eps = json_number<float>(j.at("eps"));
    clip = json_number<float>(j.at("clip"));
    seed = json_number<uint64_t>(j.at("seed"));
    max_bad_steps = json_number<int>(j.at("max_bad_steps"));
    sanitize_grads = j.at("sanitize_grads").get<bool>();
    precision = j.value("precision", std::string("fp32"));
    loss_scale = j.value("loss_scale", std::string("none"));
    loss_scale_window = json_number<int>(j.value("loss_scale_window", nlohmann::json(2000)));
  } catch (const nlohmann::json::exception& e) {
    throw_input_error(source, fmt::format("the training options are incomplete: {}", e.what()), "options", -1,
                      "the checkpoint was written by another Orion version");
  }
}

ModelConfig resolve_model_config(const std::string& name_or_path) {
  const bool looks_like_file = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json");
  if (!looks_like_file) return config_preset(name_or_path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text_file(name_or_path));
  } catch (const nlohmann::json::exception& e) {
    throw_input_error(
        name_or_path, fmt::format("not valid JSON: {}", e.what()), "config", -1,
        "write {\"arch\": \"llama\", \"dim\": 64, \"n_layers\": 5, \"n_heads\": 8, \"vocab_size\": 512, \"seq_len\": 256}");
  }
  return config_from_json(j, name_or_path);
}

namespace {

bool is_builtin(const std::string& spec) { return spec == "builtin" || spec.starts_with("builtin:"); }

// Trains the llama2.c-flavoured BPE tokenizer on the built-in stories of `spec`.
void train_builtin_tokenizer(const std::string& spec, int vocab, const std::string& path, const TrainOptions& opt) {
  data::DocumentStream docs(data::resolve_text_inputs({spec}));
  data::WordCounts counts = data::count_words(docs, 0, false);
  data::BpeTrainOptions bo;
  bo.vocab_size = vocab;
  data::write_llama2c_tokenizer(path, data::train_bpe(counts, data::TokenizerFormat::Llama2c, bo));
  report_note(opt, fmt::format("train: tokenizer of {} tokens learned from {} → {}", vocab, spec, path));
}

// The built-in corpus tokenized once per (spec, tokenizer): a data/ folder keyed by both, reused
// while meta.json (written last by prepare) exists.
std::string prepare_builtin(const std::string& spec, const std::string& tokenizer, const std::string& out,
                            const TrainOptions& opt) {
  std::string key = spec;
  for (char& ch : key)
    if (ch == ':') ch = '-';
  const std::string dir = (fs::path(out) / "data" / fmt::format("{}-{:08x}", key, uint32_t(hash_file(tokenizer)))).string();
  if (file_exists((fs::path(dir) / "meta.json").string())) return dir;
  data::PrepareOptions po;
  po.tokenizer = tokenizer;
  po.inputs = {spec};
  po.out_dir = dir;
  po.val_fraction = 0.05;
  po.progress = false;
  auto r = data::prepare_dataset(po);
  report_note(opt, fmt::format("train: {} tokenized in {:.1f} s: {} train and {} validation tokens → {}", spec, r.seconds,
                               r.train_tokens, r.val_tokens, dir));
  return dir;
}

}  // namespace

void Trainer::setup_tokenizer_and_data() {
  const bool builtin = is_builtin(opt_.data);
  if (!builtin) opt_.data = fs::absolute(opt_.data).lexically_normal().string();  // resumable from anywhere
  std::string tok = !state_.tokenizer.empty() ? state_.tokenizer : opt_.tokenizer;
  if (tok.empty() && builtin) {
    tok = (fs::path(opt_.out) / "tokenizer.bin").string();
    // Rank 0 goes first; a rank on the same host finds its tokenizer (the same bytes) and keeps it.
    const bool rank0_made_it = comm_->rank() != 0 && file_exists(tok) && hash_file(tok) == rank0_tokenizer_hash_;
    if (!rank0_made_it) train_builtin_tokenizer(opt_.data, opt_.vocab, tok, opt_);
  }
  if (tok.empty() && !builtin && is_directory(opt_.data)) {  // a prepared folder names its tokenizer
    const std::string meta = (fs::path(opt_.data) / "meta.json").string();
    if (file_exists(meta)) {
      auto j = nlohmann::json::parse(read_text_file(meta), nullptr, false);
      if (j.is_object() && j.contains("tokenizer") && j["tokenizer"].is_string() && file_exists(j["tokenizer"]))
        tok = j["tokenizer"].get<std::string>();
    }
  }
  if (!tok.empty()) {
    tok = fs::absolute(tok).lexically_normal().string();
    const uint64_t h = hash_file(tok);
    if (state_.tokenizer_hash != 0 && h != state_.tokenizer_hash)
      throw_input_error(tok, "the tokenizer changed since the checkpoint was written", "tokenizer", -1,
                        "restore the original tokenizer file, or start a new run");
    state_.tokenizer = tok;
    state_.tokenizer_hash = h;
    tokenizer_ = load_tokenizer(tok);
  }
  if (builtin && !tokenizer_) throw_usage_error("builtin data needs a tokenizer", "--tokenizer");
  const std::string path = builtin ? prepare_builtin(opt_.data, tok, opt_.out, opt_) : opt_.data;

  TrainingData split = open_training_data(path, opt_, *comm_, -1, "train");
  train_ = std::move(split.train), val_ = std::move(split.val);
}

void Trainer::setup_model(const Checkpoint* resumed) {
  ModelConfig c;
  if (resumed) {
    c = resumed->config;
    params_ = std::make_unique<Params>(resumed->params.clone());
  } else if (!opt_.init.empty()) {
    opt_.init = fs::absolute(opt_.init).lexically_normal().string();
    params_ = std::make_unique<Params>(Params::from_weights(load_model(opt_.init)));
    c = params_->config();
  } else {
    c = resolve_model_config(opt_.config);
    if (tokenizer_ && tokenizer_->vocab_size() != c.vocab_size) {  // size the vocabulary to the tokenizer
      report_note(opt_,
                  fmt::format("train: vocabulary {} → {} to match the tokenizer", c.vocab_size, tokenizer_->vocab_size()));
      c.vocab_size = tokenizer_->vocab_size();
      c.padded_vocab = model_family(c.arch).padded_vocab(c.vocab_size);
    }
    c.validate(opt_.config);
    params_ = std::make_unique<Params>(c);
    init_params(*params_, opt_.seed);
  }
  // The ANE programs are the plain blocks'; the CPU trains every Llama-like feature.
  if (opt_.backend != "cpu") c.require_plain_blocks(opt_.init.empty() ? opt_.config : opt_.init, "training on the ANE path");
  if (tokenizer_ && tokenizer_->vocab_size() > c.vocab_size)
    throw_usage_error(fmt::format("the tokenizer has {} tokens, the model {}", tokenizer_->vocab_size(), c.vocab_size),
                      "--tokenizer", "use the tokenizer the model was trained with");
  if (opt_.seq > c.seq_len)
    throw_usage_error(fmt::format("--seq {} exceeds the model's context of {} tokens", opt_.seq, c.seq_len), "--seq",
                      fmt::format("use --seq {} or less", c.seq_len));
  grads_ = std::make_unique<Grads>(c);
  model_ = std::make_unique<TrainModel>(*params_, grads_.get(), opt_.batch, opt_.seq, opt_.activation_checkpointing());
  if (opt_.backend != "cpu") {  // compiled at the first forward, from the (resumed) parameters
    AneTrainOptions a = opt_.ane;
    a.driver = opt_.backend, a.quiet = a.quiet || !opt_.progress;
    auto blocks = make_ane_blocks(*params_, grads_.get(), opt_.batch, opt_.seq, a);
    ane_ = blocks.get();
    model_->set_blocks(std::move(blocks));
  }
  AdamWConfig ac;
  ac.beta1 = opt_.beta1, ac.beta2 = opt_.beta2, ac.eps = opt_.eps;
  ac.weight_decay = opt_.weight_decay, ac.clip_norm = opt_.clip;
  opt_adam_ = std::make_unique<AdamW>(*params_, ac);
  if (resumed) {
    opt_adam_->m() = resumed->m;
    opt_adam_->v() = resumed->v;
    opt_adam_->set_step_count(resumed->state.adam_steps);
  }
}

std::unique_ptr<Checkpoint> Trainer::load_resumed(std::string* used) {
  if (comm_->world() == 1) return std::make_unique<Checkpoint>(load_latest_checkpoint(opt_.resume, used));
  // Rank 0 picks the newest good checkpoint and sends its bytes: the other ranks need no copy.
  std::unique_ptr<Checkpoint> ck;
  std::vector<uint8_t> bytes, name;
  if (comm_->rank() == 0) {
    ck = std::make_unique<Checkpoint>(load_latest_checkpoint(opt_.resume, used));
    auto file = MappedFile::open(*used);
    bytes.assign(file->data(), file->data() + file->size());
    name.assign(used->begin(), used->end());
  }
  comm_->broadcast(name, 0);
  comm_->broadcast(bytes, 0);
  if (ck) return ck;
  *used = std::string(name.begin(), name.end());
  return std::make_unique<Checkpoint>(parse_checkpoint(bytes.data(), bytes.size(), *used));
}

void Trainer::check_ranks_agree() {
  if (comm_->world() == 1) return;
  auto hash_text = [](const std::string& s) { return checkpoint_hash(s.data(), s.size()); };
  const size_t bytes = params_->size() * sizeof(float);
  const uint64_t weights = checkpoint_hash(params_->data(), bytes, hash_text(config_to_json(params_->config()).dump()));
  const uint64_t moments = checkpoint_hash(opt_adam_->v().data(), bytes, checkpoint_hash(opt_adam_->m().data(), bytes));
  const std::string state =
      fmt::format("{} {} {} {}", state_.step, state_.adam_steps, state_.data_position, state_.skipped_steps);
  dist::check_ranks_agree(*comm_,
                          {{"training options (--batch, --seq, --lr, --steps, ...)", hash_text(opt_.numeric_json().dump())},
                           {"model configuration and weights", weights},
                           {"tokenizer", state_.tokenizer_hash},
                           {"training data", dist::dataset_fingerprint(*train_)},
                           {"optimiser moments and step", checkpoint_hash(state.data(), state.size(), moments)}});
}

Trainer::Trainer(TrainOptions opt, dist::Communicator* comm) : opt_(std::move(opt)), comm_(comm) {
  if (!comm_) own_comm_ = std::make_unique<dist::SingleProcess>(), comm_ = own_comm_.get();
  if (comm_->rank() != 0) opt_.progress = false;  // rank 0 alone prints (and writes files)
  std::unique_ptr<Checkpoint> ck;
  if (!opt_.resume.empty()) {
    std::string used;
    ck = load_resumed(&used);
    const int64_t asked = opt_.steps;
    opt_.apply_numeric_json(ck->options, used);
    if (asked > 0 && asked != ck->options.value("steps", int64_t(0)))
      report_note(opt_,
                  fmt::format("train: note: --steps {} differs from the run's {}; the cosine schedule follows the new total",
                              asked, ck->options.value("steps", int64_t(0))));
    state_ = ck->state;
    const fs::path dir = fs::path(used).parent_path();
    if (opt_.out.empty())  // continue in the run folder the checkpoint belongs to
      opt_.out = (dir.filename() == "checkpoints" ? dir.parent_path() : dir).string();
    if (opt_.ckpt_dir.empty() && dir.filename() != "checkpoints") opt_.ckpt_dir = dir.string();  // a --ckpt-dir run
    report_note(opt_, fmt::format("train: resuming from {} at step {}", used, state_.step));
  } else {
    state_.rng_state = data::splitmix64(opt_.seed ^ 0x5eedull);
  }
  if (opt_.out.empty()) opt_.out = "orion-train";
  opt_.validate();
  if (!ck && opt_.init.empty()) {  // flag mistakes fail before the tokenizer and data work
    const ModelConfig c = resolve_model_config(opt_.config);
    if (opt_.seq > c.seq_len)
      throw_usage_error(fmt::format("--seq {} exceeds the model's context of {} tokens", opt_.seq, c.seq_len), "--seq",
                        fmt::format("use --seq {} or less", c.seq_len));
  }
  std::error_code ec;
  fs::create_directories(opt_.out, ec);
  if (!is_directory(opt_.out)) throw_runtime_error("cannot create the run folder", opt_.out);
  if (comm_->rank() == 0) setup_tokenizer_and_data();
  if (comm_->world() > 1) {  // the others after rank 0, which may have written the tokenizer and data
    std::vector<uint64_t> h = comm_->allgather(comm_->rank() == 0 ? state_.tokenizer_hash : 0);
    rank0_tokenizer_hash_ = h[0];
    if (comm_->rank() != 0) setup_tokenizer_and_data();
  }
  setup_model(ck.get());
  train_->seek(state_.data_position);
  check_ranks_agree();
  setup_loop();
}

Trainer::~Trainer() = default;

}  // namespace orion::train

// LoRA fine-tuning: the exact adapter gradient from the merged weight's, and the loop (lora_train.h).
#include "train/lora/lora_train.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "base/file.h"
#include "base/timer.h"
#include "data/prepare.h"
#include "data/token_dataset.h"
#include "model/io/model_io.h"
#include "model/lora/lora_io.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/train_kernels.h"
#include "train/loop/checkpoint.h"
#include "train/dist/communicator.h"
#include "train/dist/data_parallel.h"
#include "train/model/guards.h"

namespace orion::train {
namespace fs = std::filesystem;

// --- the adapter over the working parameters -----------------------------------------------------

float* LoraTraining::work_matrix(const LoraTensor& t) { return lora_target_member(work_.layers[size_t(t.layer)], t.target); }
const float* LoraTraining::grad_matrix(const Grads& g, const LoraTensor& t) const {
  return lora_target_member(g.layers[size_t(t.layer)], t.target);
}

LoraTraining::LoraTraining(Params& work, LoraAdapter adapter, bool merged)
    : work_(work), adapter_(std::move(adapter)), merged_(merged) {
  adapter_.check_fits(work.config(), "adapter");
  if (merged_)
    for (const LoraTensor& t : adapter_.tensors()) {
      const float* W = work_matrix(t);
      base_.emplace_back(W, W + t.out * t.in);
    }
  grads_.assign(adapter_.size(), 0.0f);
  merge_into_work();
}

const float* LoraTraining::base_matrix(size_t i) const {
  const LoraTensor& t = adapter_.tensors().at(i);
  return merged_ ? base_[i].data() : lora_target_member(work_.layers[size_t(t.layer)], t.target);
}

void LoraTraining::projection(int layer, LoraTarget target, const float* x, const float* dy, int N) {
  const LoraTensor* t = adapter_.find(layer, target);
  ORION_CHECK(t, "layer {} {} has no adapter", layer, lora_target_name(target));
  const int r = adapter_.rank(), in = int(t->in), out = int(t->out);
  const float s = adapter_.scale();
  u_.resize(size_t(N) * r), v_.resize(size_t(N) * r);
  // u = s·X·Aᵀ [N, r] (cpu::matmul: y [M, N] = x [M, K]·Wᵀ, W [N, K]); dB [out, r] += dYᵀ·u
  cpu::matmul(u_.data(), x, adapter_.A(*t), DType::F32, nullptr, N, in, r);
  for (float& e : u_) e *= s;
  cpu::matmul_backward_weight(grads_.data() + t->b_offset, dy, u_.data(), N, r, out);
  // v = s·dY·B [N, r] (dx [M, K] += dy [M, N]·W [N, K] with W = B [out, r]); dA [r, in] += vᵀ·X
  std::fill(v_.begin(), v_.end(), 0.0f);
  cpu::matmul_backward_input(v_.data(), dy, adapter_.B(*t), N, r, out);
  for (float& e : v_) e *= s;
  cpu::matmul_backward_weight(grads_.data() + t->a_offset, v_.data(), x, N, in, r);
}

std::vector<std::pair<size_t, size_t>> LoraTraining::layout() const {
  std::vector<std::pair<size_t, size_t>> l;
  for (const LoraTensor& t : adapter_.tensors()) {
    l.emplace_back(t.a_offset, size_t(adapter_.rank()) * size_t(t.in));
    l.emplace_back(t.b_offset, size_t(t.out) * size_t(adapter_.rank()));
  }
  return l;
}

void LoraTraining::merge_into_work() {
  if (!merged_) return;
  for (size_t i = 0; i < adapter_.tensors().size(); i++) {
    const LoraTensor& t = adapter_.tensors()[i];
    lora_merge_matrix(work_matrix(t), base_[i].data(), adapter_.A(t), adapter_.B(t), t.out, t.in, adapter_.rank(),
                      adapter_.scale());
  }
}

void LoraTraining::gather(const Grads& g) {
  const int r = adapter_.rank();
  const float s = adapter_.scale();
  for (const LoraTensor& t : adapter_.tensors()) {
    const float* G = grad_matrix(g, t);  // dW' [out, in]
    const float* A = adapter_.A(t);      // [r, in]
    const float* B = adapter_.B(t);      // [out, r]
    float* dA = grads_.data() + t.a_offset;
    float* dB = grads_.data() + t.b_offset;
    // dB = s·dW'·Aᵀ: matmul computes y [M, N] = x [M, K]·Wᵀ with W [N, K] — here x = dW', W = A.
    cpu::matmul(dB, G, A, DType::F32, nullptr, int(t.out), int(t.in), r);
    for (int64_t i = 0; i < t.out * r; i++) dB[i] *= s;
    // dA = s·Bᵀ·dW': row k of dA is s·Σ_o B[o, k]·dW'[o, :] (rows of dA are independent).
#pragma omp parallel for schedule(static) if (t.out * t.in * r > (1 << 18))
    for (int k = 0; k < r; k++) {
      float* row = dA + int64_t(k) * t.in;
      std::fill(row, row + t.in, 0.0f);
      for (int64_t o = 0; o < t.out; o++) {
        const float coef = s * B[o * r + k];
        if (coef == 0.0f) continue;
        const float* gr = G + o * t.in;
        for (int64_t i = 0; i < t.in; i++) row[i] += coef * gr[i];
      }
    }
  }
}

// --- the loop ----------------------------------------------------------------------------------------

namespace {
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
      if (t.progress)
        std::fprintf(stderr, "lora: %s tokenized: %llu train and %llu validation tokens → %s\n", t.data.c_str(),
                     (unsigned long long)r.train_tokens, (unsigned long long)r.val_tokens, dir.c_str());
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
  data::DatasetOptions d;
  d.B = t.batch, d.T = t.seq, d.shuffle = t.shuffle, d.seed = t.seed, d.vocab_size = base_->config.vocab_size;
  d.rank = comm_->rank(), d.world = comm_->world();  // this rank's rows of every global batch
  train_ = std::make_unique<data::TokenDataset>(data::TokenDataset::open(path, "train", d));
  if (is_directory(path)) {
    d.shuffle = false;
    try {
      val_ = std::make_unique<data::TokenDataset>(data::TokenDataset::open(path, "val", d));
    } catch (const Error& e) {
      if (t.progress) std::fprintf(stderr, "lora: no validation loss: %s\n", e.what());
    }
  }
}

LoraTrainer::LoraTrainer(LoraTrainOptions opt, dist::Communicator* comm) : opt_(std::move(opt)), comm_(comm) {
  TrainOptions& t = opt_.train;
  if (!comm_) own_comm_ = std::make_unique<dist::SingleProcess>(), comm_ = own_comm_.get();
  if (comm_->rank() != 0) t.progress = false;  // rank 0 alone prints (and writes files)
  if (opt_.model.empty()) throw_usage_error("LoRA training needs a base model", "--model");
  if (t.batch < 1 || t.seq < 1) throw_usage_error("--batch and --seq must be ≥ 1", "--batch");
  if (t.steps < 1) throw_usage_error("--steps must be ≥ 1", "--steps");
  if (!(t.lr > 0) || !std::isfinite(t.lr)) throw_usage_error("--lr must be a positive number", "--lr");
  if (opt_.format != "orion" && opt_.format != "peft" && opt_.format != "both")
    throw_usage_error(fmt::format("unknown adapter format '{}'", opt_.format), "--format", "use orion, peft or both");
  base_ = std::make_unique<ModelWeights>(load_model(opt_.model));
  const ModelConfig c = base_->config;
  if (t.seq > c.seq_len)
    throw_usage_error(fmt::format("--seq {} exceeds the model's context of {} tokens", t.seq, c.seq_len), "--seq",
                      fmt::format("use --seq {} or less", c.seq_len));
  std::error_code ec;
  fs::create_directories(fs::path(t.out) / "checkpoints", ec);
  if (!is_directory(t.out)) throw_runtime_error("cannot create the output folder", t.out);

  // The adapter: fresh (A random, B = 0), or the newest checkpoint's with its optimiser state.
  LoraAdapter adapter;
  LoraTrainingState resumed;
  const std::string ckdir = (fs::path(t.out) / "checkpoints").string();
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(ckdir, ec))
    if (e.path().filename().string().starts_with("lora_") && e.path().extension() == ".olora") found.push_back(e.path().string());
  std::sort(found.begin(), found.end());
  if (opt_.resume) {
    // Rank 0's newest checkpoint, its bytes sent to the other ranks (they need no copy of their own).
    std::vector<uint8_t> name, bytes;
    if (comm_->rank() == 0) {
      if (found.empty()) throw_usage_error(fmt::format("no LoRA checkpoint in {}", ckdir), "--resume", "start without --resume");
      auto file = MappedFile::open(found.back());
      bytes.assign(file->data(), file->data() + file->size());
      name.assign(found.back().begin(), found.back().end());
    }
    comm_->broadcast(name, 0);
    comm_->broadcast(bytes, 0);
    found = {std::string(name.begin(), name.end())};
    adapter = parse_lora_checkpoint(bytes.data(), bytes.size(), found.back(), &resumed);
    adapter.check_fits(c, found.back());
    step_ = resumed.json.value("step", int64_t(0)), skipped_ = resumed.json.value("skipped", int64_t(0));
    if (t.progress) std::fprintf(stderr, "lora: resuming from %s at step %lld\n", found.back().c_str(), (long long)step_);
  } else {
    adapter = LoraAdapter(c, opt_.rank, opt_.alpha, parse_lora_targets(opt_.targets, c.arch));
    adapter.init(t.seed);
  }
  DType base16 = DType::F32;
  if (opt_.base_dtype == "f16" || opt_.base_dtype == "bf16") base16 = opt_.base_dtype == "f16" ? DType::F16 : DType::BF16;
  else if (opt_.base_dtype != "f32")
    throw_usage_error(fmt::format("unknown base dtype '{}'", opt_.base_dtype), "--base-dtype", "use f32, f16 or bf16");
  if (base16 != DType::F32 && t.backend != "cpu")
    throw_usage_error("--base-dtype f16/bf16 is for the CPU backend", "--base-dtype",
                      "the ANE path bakes the base into fp16 programs already; drop --base-dtype");
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
  model_ = std::make_unique<TrainModel>(*work_, grads_.get(), t.batch, t.seq);
  // The ANE path with the base baked and the adapter as program inputs: adapters on q and v (the
  // kernels' slots), Llama or GPT-2. Otherwise the ANE runner trains on the merged W', streamed as inputs.
  bool qv_only = true;
  for (LoraTarget tg : adapter.targets()) qv_only = qv_only && (tg == LoraTarget::Q || tg == LoraTarget::V);
  const bool adapter_inputs = t.backend != "cpu" && qv_only;
  lora_ = std::make_unique<LoraTraining>(*work_, std::move(adapter), /*merged=*/!adapter_inputs && !base16_);
  if (base16_) {  // the blocks widen the 16-bit base a layer at a time, with the adapter merged
    auto blocks = std::make_unique<Base16Blocks>(*work_, *base16_, lora_->adapter(), grads_.get(), t.batch, t.seq);
    blocks16_ = blocks.get();
    model_->set_blocks(std::move(blocks));
  }
  if (t.backend != "cpu") {  // compiled at the first forward
    AneTrainOptions ao = t.ane;
    ao.driver = t.backend, ao.quiet = ao.quiet || !t.progress;
    auto blocks = adapter_inputs ? make_lora_ane_blocks(*work_, lora_->adapter(), *lora_, t.batch, t.seq, ao)
                                 : make_ane_blocks(*work_, grads_.get(), t.batch, t.seq, ao);
    if (!adapter_inputs && t.progress)
      std::fprintf(stderr, "lora: the ANE path bakes the base with adapter inputs for q,v adapters only; this one "
                           "trains on the merged weights (streamed as program inputs)\n");
    ane_ = blocks.get();
    model_->set_blocks(std::move(blocks));
  }
  // The LoRA-only backward: no dW of the frozen base; dA, dB straight from X and dY.
  direct_grads_ = model_->freeze_base(lora_.get());
  AdamWConfig ac;
  ac.beta1 = t.beta1, ac.beta2 = t.beta2, ac.eps = t.eps, ac.weight_decay = t.weight_decay, ac.clip_norm = t.clip;
  adam_ = std::make_unique<AdamW>(lora_->layout(), lora_->adapter().size(), ac);
  if (opt_.resume) adam_->m() = resumed.m, adam_->v() = resumed.v, adam_->set_step_count(resumed.json.value("adam_steps", int64_t(0)));
  setup_data();
  if (opt_.resume) train_->seek(resumed.json.value("data_position", uint64_t(0)));
  check_ranks_agree();
}

// Before the first step, the ranks must agree on everything that shapes the numbers.
void LoraTrainer::check_ranks_agree() {
  if (comm_->world() == 1) return;
  auto hash = [](const void* p, size_t n, uint64_t seed = 0xcbf29ce484222325ull) { return checkpoint_hash(p, n, seed); };
  const std::string options = fmt::format("{} {} {} {} {} {} {} {} {} {} {}", opt_.train.numeric_json().dump(), opt_.rank,
                                          opt_.alpha, opt_.targets, step_, skipped_, adam_->step_count(), train_->position(),
                                          opt_.train.backend, lora_->adapter().describe(), base_->config.describe());
  const LoraAdapter& a = lora_->adapter();
  const size_t bytes = a.size() * sizeof(float);
  uint64_t base = 0xcbf29ce484222325ull;
  for (const auto& [name, t] : base_->named_tensors()) base = hash(t->data, t->nbytes(), hash(name.data(), name.size(), base));
  dist::check_ranks_agree(*comm_, {{"LoRA options and state (--rank, --alpha, --targets, --batch, --lr, ...)", hash(options.data(), options.size())},
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

StepStats LoraTrainer::step() {
  Timer timer;
  TrainOptions& t = opt_.train;
  StepStats s;
  s.step = step_;
  s.lr = t.lr_at(step_);
  if (!direct_grads_) model_->zero_grad();  // direct: nothing reads the model's gradient buffer
  data::Batch b = train_->next();
  // With several ranks the loss and gradient are weighted by this rank's share of the counted
  // targets, and only the adapter's gradients are averaged (dist/data_parallel.h).
  const double weight = dist::micro_batch_weights(*comm_, {dist::counted_targets(b.targets)})[0];
  s.loss = model_->forward(b.inputs.data(), b.targets.data());
  bool finite = std::isfinite(s.loss);
  if (finite) {
    lora_->zero_grads();
    model_->backward(float(weight));  // direct: the blocks report X, dY of the adapted projections to lora_
    if (!direct_grads_) lora_->gather(*grads_);  // dW' → dA, dB
  }
  if (comm_->world() > 1) {  // the global loss (a NaN on any rank makes every rank skip the step)
    Timer comm_timer;
    double total[2] = {weight * s.loss, finite ? 0.0 : 1.0};
    comm_->allreduce_sum(total, 2);
    s.loss = float(total[0] / comm_->world()), finite = total[1] == 0;
    if (finite) dist::allreduce_mean(*comm_, lora_->grads(), lora_->adapter().size());
    s.comm_seconds = comm_timer.seconds();
  }
  if (finite && t.sanitize_grads) s.sanitized = sanitize_fp16(lora_->grads(), lora_->adapter().size());
  // The guard: a non-finite loss or adapter gradient never reaches the adapter or AdamW's moments.
  s.grad_norm = finite ? float(adam_->norm(lora_->grads())) : NAN;
  s.skipped = !std::isfinite(s.grad_norm);
  if (!s.skipped) {
    adam_->step(lora_->adapter().data(), lora_->grads(), s.lr);
    lora_->merge_into_work();  // W' = W + s·B·A from the frozen W
    model_->weights_updated();  // the ANE runner refreshes its programs' weights (CPU: nothing)
    consecutive_bad_ = 0;
  } else {
    ++skipped_, ++consecutive_bad_;
  }
  ++step_;
  s.seconds = timer.seconds();
  if (consecutive_bad_ >= t.max_bad_steps)
    throw_runtime_error(fmt::format("{} consecutive steps had a non-finite loss or gradient (the last: step {}); stopped",
                                    consecutive_bad_, step_),
                        last_checkpoint_.empty() ? t.out : last_checkpoint_, "lower --lr or check the data; --resume continues");
  return s;
}

float LoraTrainer::evaluate() {
  if (!val_) return -1;
  const uint64_t n = std::min<uint64_t>(uint64_t(std::max(1, opt_.train.eval_batches)), val_->batches_per_epoch());
  std::vector<float> losses;
  std::vector<int64_t> counts;
  for (uint64_t i = 0; i < n; ++i) {
    data::Batch b = val_->batch(i);  // with several ranks: this rank's rows of the global batch i
    losses.push_back(model_->forward(b.inputs.data(), b.targets.data()));
    counts.push_back(dist::counted_targets(b.targets));
  }
  const std::vector<double> weight = dist::micro_batch_weights(*comm_, counts);
  double sum = 0;
  for (uint64_t i = 0; i < n; ++i) sum += weight[i] * losses[i];
  comm_->allreduce_sum(&sum, 1);
  return float(sum / comm_->world() / double(n));
}

std::string LoraTrainer::save() {
  // Collective: the ranks' adapters must still be the same bits.
  if (comm_->world() > 1)
    dist::check_ranks_agree(*comm_, {{fmt::format("adapter after step {}", step_),
                                      checkpoint_hash(lora_->adapter().data(), lora_->adapter().size() * sizeof(float))}});
  if (comm_->rank() != 0) return "";  // rank 0 alone writes
  const std::string dir = (fs::path(opt_.train.out) / "checkpoints").string();
  LoraTrainingState st;
  st.json = {{"step", step_},          {"adam_steps", adam_->step_count()}, {"skipped", skipped_},
             {"data_position", train_->position()}, {"model", opt_.model}};
  st.m = adam_->m(), st.v = adam_->v();
  last_checkpoint_ = (fs::path(dir) / fmt::format("lora_{:08d}.olora", step_)).string();
  save_lora_checkpoint(lora_->adapter(), last_checkpoint_, st);
  std::vector<std::string> found;  // keep the newest `keep`
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().starts_with("lora_") && e.path().extension() == ".olora") found.push_back(e.path().string());
  std::sort(found.begin(), found.end());
  for (size_t i = 0; opt_.train.keep > 0 && i + size_t(opt_.train.keep) < found.size(); i++) fs::remove(found[i]);
  return last_checkpoint_;
}

std::string LoraTrainer::export_adapter() {
  const std::string& out = opt_.train.out;
  if (comm_->rank() != 0) return out;
  if (opt_.format != "peft") save_lora(lora_->adapter(), out, LoraFormat::Orion);
  if (opt_.format != "orion") save_lora(lora_->adapter(), out, LoraFormat::Peft, opt_.model);
  return out;
}

TrainResult LoraTrainer::run() {
  TrainOptions& t = opt_.train;
  TrainResult r;
  if (t.progress)
    std::fprintf(stderr, "lora: %s on %s; %llu training tokens, %d×%d tokens/step, steps %lld→%lld, lr %.1e %s\n",
                 lora_->adapter().describe().c_str(), base_->config.describe().c_str(),
                 (unsigned long long)train_->total_tokens(), t.batch, t.seq, (long long)step_, (long long)t.steps, t.lr,
                 t.schedule.c_str());
  Timer total;
  double step_seconds = 0, comm_seconds = 0;
  int64_t run_steps = 0;
  const double tokens_per_step = double(t.batch) * t.seq * comm_->world();  // every rank's rows
  if (t.progress && comm_->world() > 1)
    std::fprintf(stderr, "lora: data parallel over %s: %d rows per rank, global batch %d rows\n", comm_->describe().c_str(),
                 t.batch, t.batch * comm_->world());
  const int every = t.log_every > 0 ? t.log_every : int(std::max<int64_t>(1, t.steps / 20));
  while (step_ < t.steps) {
    StepStats s = step();
    step_seconds += s.seconds, comm_seconds += s.comm_seconds, ++run_steps;
    float val = -1;
    if (step_ == t.steps || (t.eval_every > 0 && step_ % t.eval_every == 0)) val = r.val_loss = evaluate();
    if (run_steps == 1) r.first_loss = s.loss;
    r.last_loss = s.loss;
    if (t.progress && (step_ % every == 0 || val >= 0 || run_steps == 1))
      std::fprintf(stderr, "lora: step %lld/%lld | loss %.4f%s | lr %.2e | gnorm %.3f | %.0f tok/s%s\n", (long long)step_,
                   (long long)t.steps, s.loss, val >= 0 ? fmt::format(" | val {:.4f}", val).c_str() : "", s.lr, s.grad_norm,
                   tokens_per_step * double(run_steps) / step_seconds,
                   ane_ ? fmt::format(" | {} compiles | {}", ane_->driver().counters().compiles, ane_->progress()).c_str() : "");
    if (t.checkpoint_every > 0 && step_ % t.checkpoint_every == 0 && step_ < t.steps) save();
  }
  r.checkpoint = save();
  r.model = export_adapter();
  r.steps_done = step_, r.skipped_steps = skipped_;
  r.seconds = total.seconds();
  r.tokens_per_second = step_seconds > 0 ? tokens_per_step * double(run_steps) / step_seconds : 0;
  r.world = comm_->world();
  if (run_steps > 0) r.bytes_reduced_per_step = comm_->stats.bytes_reduced / uint64_t(run_steps);
  r.comm_share = step_seconds > 0 ? comm_seconds / step_seconds : 0;
  if (t.progress)
    std::fprintf(stderr, "lora: %lld steps in %.1f s (%.0f tok/s), %lld skipped; adapter in %s\n", (long long)run_steps, r.seconds,
                 r.tokens_per_second, (long long)r.skipped_steps, r.model.c_str());
  if (t.progress && comm_->world() > 1)
    std::fprintf(stderr, "lora: all-reduce %.2f MB/step, %.1f%% of step time\n", double(r.bytes_reduced_per_step) / 1e6,
                 100.0 * r.comm_share);
  return r;
}

}  // namespace orion::train

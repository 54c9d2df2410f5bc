// orion._core.Model: a model loaded for inference, wired the way `orion generate` wires it
// (tools/cmd_generate.cpp): load_model + load_tokenizer, a Transformer on the CPU or an AneModel
// over anesim / the ANE, generate() with the same stop tokens and sampler, LoRA adapters switched
// per call without moving weights. Same options, same seed → the same text as the CLI.
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "base/error.h"
#include "infer/ane_model.h"
#include "infer/generate.h"
#include "model/io/model_io.h"
#include "model/lora/lora_io.h"
#include "model/tokenizer/tokenizer.h"
#include "bindings.h"
#include "tools/chat_prompt.h"
#include "tools/options.h"

namespace orion::python {
namespace {

// Thrown from the token callback when the Python side asked to stop (a stream closed early).
struct StopRequested {};

// Byte-level tokenizers split a character's UTF-8 bytes over several tokens: a stream hands Python
// the complete characters of `pending` (removed from it) and keeps an unfinished one for later.
std::string take_complete_utf8(std::string& pending) {
  size_t end = pending.size(), back = 0;
  while (back < 4 && back < end && (uint8_t(pending[end - 1 - back]) & 0xC0) == 0x80) back++;  // continuation bytes
  if (back < end) {
    const uint8_t lead = uint8_t(pending[end - 1 - back]);
    const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (need > back + 1) end -= back + 1;  // the last character is not complete yet
  }
  std::string out = pending.substr(0, end);
  pending.erase(0, end);
  return out;
}

py::str utf8_text(const std::string& bytes) { return py::bytes(bytes).attr("decode")("utf-8", "replace"); }

std::optional<DType> dtype_from(const std::string& name) {
  if (name.empty()) return std::nullopt;
  tools::DTypeOption o;
  o.name = name;
  return o.get();  // the CLI's --dtype check and message
}

class Model {
 public:
  Model(const std::string& path, const std::string& tokenizer, const std::string& dtype, const std::string& backend,
        const std::string& chip, int max_seq, int threads, const std::string& kv_cache)
      : path_(path) {
    tools::ThreadOptions{threads}.apply();  // the kernels' thread count, as --threads (0: all cores)
    if (backend != "cpu" && backend != "anesim" && backend != "ane")
      throw_usage_error(fmt::format("unknown backend '{}'", backend), "backend", "use cpu, anesim or ane");
    if (!std::filesystem::exists(path))
      throw_input_error(path, "no such file or folder", {}, -1, "pass the path of a model file (--model)");
    // Without a tokenizer (a model built from a state_dict) logits() works and text needs one.
    const std::string tok_path = tokenizer.empty() ? tools::tokenizer_beside(path).value_or("") : tokenizer;
    if (!tok_path.empty()) tokenizer_ = load_tokenizer(tok_path);
    LoadOptions lo;
    lo.dtype = dtype_from(dtype);
    w_ = std::make_unique<ModelWeights>(load_model(path, lo));
    if (tokenizer_ && tokenizer_->vocab_size() > w_->config.vocab_size)
      throw Error(ErrorKind::Usage,
                  fmt::format("the tokenizer has {} tokens but the model only {}", tokenizer_->vocab_size(),
                              w_->config.vocab_size),
                  {tok_path, "--tokenizer", -1, "use the tokenizer the model was trained with"});
    tools::KvCacheOption kv;
    kv.name = kv_cache;
    if (kv_cache != "f32" && kv_cache != "f16")
      throw_usage_error(fmt::format("unknown KV cache type '{}'", kv_cache), "kv_cache", "use \"f32\" or \"f16\"");
    if (backend != "cpu" && kv.get() != DType::F32)
      throw_usage_error("kv_cache=\"f16\" is for the CPU backend", "kv_cache", "the ANE path keeps its own f32 cache");
    if (backend == "cpu") {
      tf_ = std::make_unique<Transformer>(*w_, max_seq, kv.get());
      lm_ = std::make_unique<CpuLanguageModel>(*tf_);
    } else {
      rt_ = std::make_unique<AneRuntime>(backend, chip);
      auto m = std::make_unique<AneModel>(
          *w_, rt_->cache, AneModelOptions{std::filesystem::path(path).stem().string(), max_seq});
      ane_ = m.get();
      lm_ = std::move(m);
    }
    backend_ = backend;
  }

  // Generated text (the prompt not repeated). on_piece(str) sees every piece as it is chosen
  // (the CLI prints the same pieces); a False return stops the generation there.
  py::str generate(const std::string& prompt, int max_tokens, float temperature, float top_p, int top_k,
                       uint64_t seed, const std::optional<std::string>& adapter, bool add_bos, float lora_scale,
                       const py::object& on_piece) {
    if (max_tokens < 1) throw_usage_error("must be at least 1", "max_tokens");
    tokenizer();  // the CLI's error when there is none
    std::lock_guard lock(busy_);
    use_adapter(adapter, lora_scale);
    GenerateOptions go;
    go.max_new_tokens = max_tokens;
    go.sampler = SamplerOptions{temperature, top_p, top_k, seed};
    for (int id : {tokenizer_->eos_id(), tokenizer_->bos_id()})
      if (id >= 0) go.stop_ids.push_back(id);
    std::vector<int> ids = tokenizer_->encode(prompt, add_bos);
    if (ids.empty() && tokenizer_->bos_id() < 0 && tokenizer_->eos_id() >= 0)
      ids.push_back(tokenizer_->eos_id());  // GPT-2 starts an empty prompt from <|endoftext|>
    if (ids.empty()) throw_usage_error("the prompt gives no tokens", "prompt", "pass some text, or add_bos=True");
    std::string text, pending;
    int prev = ids.back();
    {
      py::gil_scoped_release nogil;
      try {
        stats_ = orion::generate(*lm_, ids, go, [&](int id) {
          const std::string piece = tools::printable_piece(tokenizer_->decode_token(prev, id));
          prev = id;
          text += piece;
          pending += piece;
          if (!on_piece.is_none()) {
            py::gil_scoped_acquire gil;
            const std::string complete = take_complete_utf8(pending);
            py::object more = complete.empty() ? py::none() : on_piece(utf8_text(complete));
            if (!more.is_none() && !more.cast<bool>()) throw StopRequested{};
          }
          check_signals();
        });
      } catch (const StopRequested&) {
      }
    }
    if (!on_piece.is_none() && !pending.empty()) on_piece(utf8_text(pending));
    return utf8_text(text);
  }

  // Logits of every position, [n, V]: the CPU runs the whole sequence in one pass; the ANE path
  // feeds the tokens one by one (its programs give the last position's logits).
  py::array_t<float> logits(const py::array& tokens) {
    const std::vector<int> ids = token_vector(tokens, "tokens");
    if (tokens.ndim() != 1) throw_usage_error("must be a 1-D array of token ids", "tokens");
    if (ids.empty()) throw_usage_error("needs at least one token", "tokens");
    std::lock_guard lock(busy_);
    const int V = lm_->vocab_size(), n = int(ids.size());
    py::array_t<float> out({n, V});
    float* dst = out.mutable_data();
    {
      py::gil_scoped_release nogil;
      if (tf_) {
        const float* all = tf_->forward(ids.data(), n, 0, /*all_logits=*/true);
        std::copy(all, all + size_t(n) * size_t(V), dst);
      } else {
        for (int i = 0; i < n; i++) {
          const float* row = lm_->forward(&ids[size_t(i)], 1, i);
          std::copy(row, row + V, dst + size_t(i) * size_t(V));
        }
      }
    }
    return out;
  }

  void load_adapter(const std::string& path, const std::string& name) {
    std::lock_guard lock(busy_);
    LoraAdapter a = load_lora(path, w_->config);
    if (ane_ && a.rank() > ane_->lora_slot()) ane_->enable_lora(a.rank());
    adapters_.insert_or_assign(name, std::move(a));
  }

  std::vector<std::string> adapter_names() const {
    std::vector<std::string> names;
    for (auto& [n, a] : adapters_) names.push_back(n);
    return names;
  }

  py::dict last_stats() const {
    py::dict d;
    d["prompt_tokens"] = stats_.prompt_tokens, d["generated_tokens"] = stats_.generated_tokens;
    d["prefill_seconds"] = stats_.prefill_seconds, d["decode_seconds"] = stats_.decode_seconds;
    d["prefill_tok_per_s"] = stats_.prefill_tok_per_s(), d["decode_tok_per_s"] = stats_.decode_tok_per_s();
    d["stopped_at_eos"] = stats_.stopped_at_eos;
    return d;
  }

  py::dict config() const {
    const ModelConfig& c = w_->config;
    py::dict d;
    d["arch"] = arch_name(c.arch);
    d["dim"] = c.dim, d["hidden_dim"] = c.hidden_dim, d["n_layers"] = c.n_layers, d["n_heads"] = c.n_heads;
    d["n_kv_heads"] = c.n_kv_heads, d["vocab_size"] = c.vocab_size, d["seq_len"] = c.seq_len;
    d["describe"] = c.describe();
    return d;
  }

  const Tokenizer& tokenizer() const {
    if (!tokenizer_) tools::find_tokenizer_beside(path_);  // throws the CLI's "no tokenizer" error
    return *tokenizer_;
  }
  // The weights as a model file (model_io.h: save_model), in `format` (default from the name).
  void save(const std::string& path, const std::string& format) const {
    std::optional<ModelFormat> f = format.empty() ? format_for_output(path, w_->config.arch) : parse_format(format);
    if (!f)
      throw_usage_error(fmt::format("unknown model format '{}'", format), "format",
                        "use llama2c, llama2c-v1, safetensors or llmc");
    py::gil_scoped_release nogil;
    save_model(*w_, path, *f);
  }
  const std::string& path() const { return path_; }
  const std::string& backend() const { return backend_; }

 private:
  void use_adapter(const std::optional<std::string>& name, float scale) {
    const LoraAdapter* a = nullptr;
    if (name) {
      auto it = adapters_.find(*name);
      if (it == adapters_.end()) {
        std::string names = "none";
        if (!adapters_.empty()) names = fmt::format("{}", fmt::join(adapter_names(), ", "));
        throw_usage_error(fmt::format("no adapter named '{}'", *name), "adapter", "the adapters loaded are: " + names);
      }
      a = &it->second;
    }
    if (tf_) tf_->set_lora(a, scale);
    if (ane_) ane_->set_lora(a, scale);
  }

  std::string path_, backend_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ModelWeights> w_;
  std::unique_ptr<Transformer> tf_;
  std::unique_ptr<AneRuntime> rt_;
  std::unique_ptr<LanguageModel> lm_;
  AneModel* ane_ = nullptr;
  std::map<std::string, LoraAdapter> adapters_;
  GenerateStats stats_;
  std::mutex busy_;  // one generation or forward at a time (the KV cache is shared)
};

}  // namespace

void bind_model(py::module_& m) {
  py::class_<Tokenizer>(m, "Tokenizer", "The tokenizer of a model (encode text to ids and back).")
      .def("encode", [](const Tokenizer& t, const std::string& text, bool add_bos) { return t.encode(text, add_bos); },
           py::arg("text"), py::arg("add_bos") = false, "Token ids of text; add_bos prepends BOS where the format has one.")
      .def("decode", [](const Tokenizer& t, const std::vector<int>& ids) {
             return py::bytes(t.decode(ids)).attr("decode")("utf-8", "replace");
           }, py::arg("ids"), "The text of a sequence of token ids.")
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size)
      .def_property_readonly("bos_id", &Tokenizer::bos_id, "Beginning-of-sequence id (-1: none).")
      .def_property_readonly("eos_id", &Tokenizer::eos_id, "End-of-sequence id (-1: none).")
      .def_property_readonly("name", &Tokenizer::name);

  py::class_<Model>(m, "Model", "A model loaded for inference (see orion.load).")
      .def(py::init<const std::string&, const std::string&, const std::string&, const std::string&, const std::string&,
                    int, int, const std::string&>(),
           py::arg("path"), py::arg("tokenizer") = "", py::arg("dtype") = "", py::arg("backend") = "cpu",
           py::arg("chip") = "m4", py::arg("max_seq") = 0, py::arg("threads") = 0, py::arg("kv_cache") = "f32")
      .def("generate", &Model::generate, py::arg("prompt"), py::arg("max_tokens") = 256, py::arg("temperature") = 1.0f,
           py::arg("top_p") = 0.9f, py::arg("top_k") = 0, py::arg("seed") = 0, py::arg("adapter") = py::none(),
           py::arg("add_bos") = true, py::arg("lora_scale") = 1.0f, py::arg("on_piece") = py::none())
      .def("logits", &Model::logits, py::arg("tokens"))
      .def("load_adapter", &Model::load_adapter, py::arg("path"), py::arg("name"))
      .def("save", &Model::save, py::arg("path"), py::arg("format") = "")
      .def_property_readonly("adapters", &Model::adapter_names)
      .def_property_readonly("last_stats", &Model::last_stats)
      .def_property_readonly("config", &Model::config)
      .def_property_readonly("path", &Model::path)
      .def_property_readonly("backend", &Model::backend)
      .def_property_readonly("tokenizer", &Model::tokenizer, py::return_value_policy::reference_internal);
}

}  // namespace orion::python

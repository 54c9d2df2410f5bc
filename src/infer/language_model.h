// LanguageModel: what generation needs from a model — feed tokens, get the next token's logits —
// whoever computes the blocks. Two implementations:
//   CpuLanguageModel  the Transformer (model/transformer.h): every layer on the CPU, the reference;
//   AneModel          (infer/ane_model.h): the transformer blocks as compiled ANE programs through a
//                     Driver (the ANE on macOS, anesim anywhere), embedding/classifier on the CPU.
// generate() (infer/generate.h) and `orion bench generate` are written against this interface.
#pragma once
#include "base/error.h"
#include "model/transformer.h"

namespace orion {

// Usage errors for feeding tokens[0..n) at positions pos..pos+n−1 of a context of max_seq tokens
// when n < 1, the sequence would run past the context, or an id is outside the vocabulary.
inline void check_forward_tokens(const int* tokens, int n, int pos, int max_seq, int vocab_size) {
  if (n <= 0) throw_usage_error("no tokens to run", "prompt", "give a non-empty prompt");
  if (pos < 0 || pos + n > max_seq)
    throw_usage_error(fmt::format("sequence of {} tokens exceeds the model's context of {}", pos + n, max_seq), "n",
                      "ask for fewer tokens or use a shorter prompt");
  for (int i = 0; i < n; i++)
    if (tokens[i] < 0 || tokens[i] >= vocab_size)
      throw_usage_error(fmt::format("token id {} is outside the model's vocabulary of {}", tokens[i], vocab_size),
                        "tokens", "the tokenizer does not belong to this model");
}

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;
  // Feeds tokens[0..n) at positions pos..pos+n−1; pos must equal the number of tokens already fed
  // (pos 0 starts a new sequence). Returns the logits of the last token, [V], valid until the next
  // call. Usage errors for token ids outside the vocabulary or a sequence longer than max_seq().
  virtual const float* forward(const int* tokens, int n, int pos) = 0;
  virtual int max_seq() const = 0;
  virtual int vocab_size() const = 0;
};

// The CPU reference behind the interface (the Transformer is borrowed, not owned).
class CpuLanguageModel final : public LanguageModel {
 public:
  explicit CpuLanguageModel(Transformer& tf) : tf_(tf) {}
  const float* forward(const int* tokens, int n, int pos) override { return tf_.forward(tokens, n, pos); }
  int max_seq() const override { return tf_.max_seq(); }
  int vocab_size() const override { return tf_.vocab_size(); }

 private:
  Transformer& tf_;
};

}  // namespace orion

// LanguageModel: what generation needs from a model — feed tokens, get the next token's logits —
// whoever computes the blocks. Two implementations:
//   CpuLanguageModel  the Transformer (model/transformer.h): every layer on the CPU, the reference;
//   AneModel          (infer/ane_model.h): the transformer blocks as compiled ANE programs through a
//                     Driver (the ANE on macOS, anesim anywhere), embedding/classifier on the CPU.
// generate() (infer/generate.h) and `orion bench generate` are written against this interface.
#pragma once
#include "model/transformer.h"

namespace orion {

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

// `orion data prepare`: text documents → tokenized shards with a train/validation split.
//
// Each document is stripped of surrounding whitespace and prefixed with the tokenizer's
// sequence delimiter: BOS (id 1) for llama2.c / SentencePiece tokenizers, as llama2.c's
// pretokenize does, or <|endoftext|> for GPT-2, as llm.c does. Documents are tokenized in parallel
// in chunks (one tokenizer instance per thread: encoders keep per-instance caches) and appended in
// input order, so the output does not depend on the thread count.
//
// Split: document i (0-based, in input order) goes to validation when
// floor((i+1)·f) > floor(i·f) for f = val_fraction — exactly ⌊N·f⌋ documents, spread evenly through
// the input rather than taken from its start or end. Same inputs, same files.
//
// Output in out_dir: train_000.bin, train_001.bin, … and val_000.bin, … (a new shard starts when one
// reaches shard_tokens; documents are never cut), plus meta.json describing them. Every file is
// written with write_file_atomic.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/token_files.h"

namespace orion::data {

struct PrepareOptions {
  std::string tokenizer;            // a path load_tokenizer() accepts
  std::vector<std::string> inputs;  // document_stream.h specs
  std::string out_dir;
  double val_fraction = 0.05;
  int threads = 0;                            // 0: all cores
  std::string format = "auto";                // llama2c | llmc | auto (llmc for GPT-2 tokenizers, else llama2c)
  uint64_t shard_tokens = uint64_t(1) << 27;  // 128 Mi tokens = 256 MB per shard
  bool progress = true;
};

struct PrepareResult {
  uint64_t documents = 0, train_documents = 0, val_documents = 0;
  uint64_t train_tokens = 0, val_tokens = 0;
  std::vector<std::string> train_files, val_files;
  TokenFormat format = TokenFormat::Llama2c;
  int vocab_size = 0;
  double seconds = 0;
};

PrepareResult prepare_dataset(const PrepareOptions& opt);

// Whether document i goes to the validation split (see above).
bool is_validation_document(uint64_t i, double val_fraction);

}  // namespace orion::data

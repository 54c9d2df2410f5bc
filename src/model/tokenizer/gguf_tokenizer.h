// The tokenizer a GGUF model file carries in its metadata (llama.cpp's tokenizer.ggml.* keys):
//   tokenizer.ggml.model   "gpt2": byte-level BPE — tokens, merges ("a b"), and tokenizer.ggml.pre
//                          naming the pre-tokenizer (default / gpt-2, llama-bpe for Llama 3, qwen2,
//                          smollm); read through the tokenizer.json reader with the pipeline those
//                          models' tokenizer.json files have.
//                          "llama": SentencePiece pieces and scores, encoded like llama2.c's run.c
//                          (merge by score, byte fallback <0x00>..<0xFF> at ids 3..258, BOS 1, EOS 2).
//   tokenizer.ggml.token_type  1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte
//   tokenizer.ggml.bos_token_id / eos_token_id, add_bos_token
// Anything else (another model kind or pre-tokenizer, a missing key) is an Input error naming the
// file and the key.
//
// Writing (orion convert --to gguf): the keys above for a Hugging Face byte-level BPE tokenizer.json
// whose pipeline is one of those pre-tokenizers (compared field by field), its tokens (added ones
// as control or user-defined tokens), merges, and the BOS/EOS ids and add_bos_token that Orion's
// tokenizer.json reader uses for it — so the GGUF tokenizer encodes as the tokenizer.json does.
// GPT-2's own files (encoder.json + vocab.bpe, or vocab.json + merges.txt: a file of the pair or a
// folder holding it) become the same "gpt2" kind with pre-tokenizer gpt-2 and <|endoftext|> a
// control token (EOS), as llama.cpp's converter writes GPT-2.
// A llama2.c tokenizer.bin or a SentencePiece .model in Llama 2's layout (BOS 1, EOS 2, <0x00>..
// <0xFF> at 3..258) becomes the "llama" kind: its pieces (a space spelled ▁), scores and token
// types (unknown, control, byte, unused, normal), the BOS/EOS/unknown ids and add_bos_token true,
// as llama.cpp's converter writes a Llama 2 tokenizer.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.h"

namespace orion {
namespace io {
struct GgufOutValue;
}

// True when the file at path starts with GGUF's magic.
bool is_gguf_file(const std::string& path);
// True when the GGUF file has a tokenizer (tokenizer.ggml.model).
bool gguf_has_tokenizer(const std::string& path);
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path);

// The tokenizer.ggml.* metadata of a tokenizer.json, tokenizer.bin or .model file or a GPT-2 BPE
// pair (see above);
// empty, with *why_not saying why, when it is not a tokenizer GGUF can hold this way.
std::vector<io::GgufOutValue> gguf_tokenizer_metadata(const std::string& path, std::string* why_not);

}  // namespace orion

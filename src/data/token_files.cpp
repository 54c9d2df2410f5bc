#include "data/token_files.h"

#include <algorithm>

#include "base/error.h"

namespace orion::data {

const char* token_format_name(TokenFormat f) { return f == TokenFormat::Llmc ? "llmc" : "llama2c"; }

namespace {

void read_llmc_header(TokenFile& f) {
  const size_t size = f.map->size();
  if (size < kLlmcHeaderBytes)
    throw_input_error(f.path, fmt::format("the file ends inside the llm.c header ({} of {} bytes)", size, kLlmcHeaderBytes),
                      "header", int64_t(size), "the file is truncated");
  ByteReader r(f.map->data(), size, f.path);
  r.read<int32_t>("magic");
  const int32_t version = r.read<int32_t>("version");
  const int32_t count = r.read<int32_t>("token count");
  if (version != kLlmcVersion)
    throw_input_error(f.path,
                      fmt::format("llm.c token file version {}; only version {} (uint16 tokens) is supported", version,
                                  kLlmcVersion),
                      "version", 4, version == 2 ? "version 2 holds uint32 tokens (Llama 3); re-tokenize to uint16" : "");
  if (count < 0) throw_input_error(f.path, fmt::format("negative token count {}", count), "token count", 8);
  const size_t payload = size - kLlmcHeaderBytes;
  if (payload != size_t(count) * 2)
    throw_input_error(f.path,
                      fmt::format("the header says {} tokens ({} bytes) but {} bytes follow the header", count,
                                  size_t(count) * 2, payload),
                      "token count", 8, payload < size_t(count) * 2 ? "the file is truncated" : "extra bytes at the end");
  f.data_offset = kLlmcHeaderBytes;
  f.count = size_t(count);
}

void check_ids(const TokenFile& f, int vocab_size) {
  if (vocab_size <= 0) return;
  uint16_t max_id = 0;
  for (size_t i = 0; i < f.count; ++i) max_id = std::max(max_id, f.tokens[i]);
  if (max_id < vocab_size) return;
  for (size_t i = 0; i < f.count; ++i)  // the slow path only runs to name the first bad id
    if (f.tokens[i] >= vocab_size)
      throw_input_error(f.path,
                        fmt::format("token {} has id {}, not below the vocabulary size {}", i, f.tokens[i], vocab_size),
                        "tokens", int64_t(f.data_offset + 2 * i),
                        "the data was tokenized with a different tokenizer than the one given");
}

}  // namespace

TokenFile open_token_file(const std::string& path, int vocab_size, std::optional<TokenFormat> expect) {
  TokenFile f;
  f.path = path;
  f.map = MappedFile::open(path);
  const size_t size = f.map->size();
  if (size == 0)
    throw_input_error(path, "the token file is empty", {}, 0, "expected llama2.c uint16 tokens or an llm.c token file");
  int32_t first = 0;
  if (size >= 4) std::memcpy(&first, f.map->data(), 4);
  if (expect == TokenFormat::Llmc && first != kLlmcMagic)
    throw_input_error(path, fmt::format("magic {} is not the llm.c token file magic {}", first, kLlmcMagic), "magic", 0,
                      size < kLlmcHeaderBytes ? "the file is truncated" : "is this a llama2.c shard (raw uint16)?");
  if (expect == TokenFormat::Llama2c && first == kLlmcMagic)
    throw_input_error(path, "this is an llm.c token file (it starts with the magic 20240520), not a raw llama2.c shard",
                      "magic", 0);
  if (first == kLlmcMagic) {
    f.format = TokenFormat::Llmc;
    read_llmc_header(f);
  } else {
    if (size % 2 != 0)
      throw_input_error(path, fmt::format("odd size {}: a llama2.c shard is a stream of 2-byte tokens", size), {},
                        int64_t(size - 1), "the file is truncated, or it is not a token file");
    f.count = size / 2;
  }
  f.tokens = reinterpret_cast<const uint16_t*>(f.map->data() + f.data_offset);
  check_ids(f, vocab_size);
  return f;
}

void write_token_file(const std::string& path, const uint16_t* tokens, size_t count, TokenFormat format) {
  if (format == TokenFormat::Llmc && count > size_t(INT32_MAX))
    throw_runtime_error(fmt::format("{} tokens do not fit an llm.c header (int32 count)", count), path,
                        "write smaller shards");
  write_file_atomic(path, [&](FileWriter& w) {
    if (format == TokenFormat::Llmc) {
      int32_t header[256] = {};
      header[0] = kLlmcMagic;
      header[1] = kLlmcVersion;
      header[2] = int32_t(count);
      w.write(header, sizeof(header));
    }
    w.write(tokens, count * sizeof(uint16_t));
  });
}

std::vector<std::pair<size_t, size_t>> split_sequences(const uint16_t* tokens, size_t count, int separator) {
  std::vector<std::pair<size_t, size_t>> seqs;
  size_t start = 0;
  for (size_t i = 1; i <= count; ++i)
    if (i == count || tokens[i] == separator) {
      if (i > start) seqs.emplace_back(start, i);
      start = i;
    }
  return seqs;
}

}  // namespace orion::data

// Data readers: TinyStories JSON shards, plain text, llama2.c and llm.c token files, and the input
// specs of document_stream.h — valid files read back exactly, malformed ones fail with an error
// that names the file, the offset and what was expected.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"
#include "data/document_stream.h"
#include "data/text_documents.h"
#include "data/tinystories_json.h"
#include "data/token_files.h"
#include "support.h"

namespace orion::data {
namespace {

std::string write(const std::string& name, const std::string& bytes) {
  static const std::string dir = test::temp_dir();
  std::string path = dir + "/" + name;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

template <typename Reader>
std::vector<std::string> read_all(const std::string& path) {
  Reader r(path);
  std::vector<std::string> out;
  std::string d;
  while (r.next(d)) out.push_back(d);
  return out;
}

// Runs f, expecting an orion::Error; returns it for inspection.
template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error was thrown";
  return Error(ErrorKind::Internal, "none");
}

TEST(TinyStoriesJson, StreamsStoriesWithEscapesAndBraces) {
  std::string json = R"( [ {"story": "Tom said \"hi\" {and} [waved].\n", "summary": "x"},
    {"instruction": {"prompt": "}"}, "story": "\u00e9 caf\u00e9 \\ end"} ] )";
  auto stories = read_all<TinyStoriesReader>(write("ok.json", json));
  ASSERT_EQ(stories.size(), 2u);
  EXPECT_EQ(stories[0], "Tom said \"hi\" {and} [waved].\n");
  EXPECT_EQ(stories[1], "\xc3\xa9 caf\xc3\xa9 \\ end");
  EXPECT_TRUE(read_all<TinyStoriesReader>(write("empty_array.json", " [ ] ")).empty());
}

TEST(TinyStoriesJson, MalformedInputsNameFileOffsetAndExpectation) {
  struct Case {
    std::string json, message_part;
    int64_t offset;
  };
  const std::vector<Case> cases = {
      {"", "empty", 0},
      {"{\"story\": \"a\"}", "expected '['", 0},
      {"[{\"story\": \"a\"}, ", "ends inside the array", 17},
      {"[{\"story\": \"a\"", "ends inside this object", 1},
      {"[{\"story\": 5}]", "no string field \"story\"", 1},
      {"[{\"text\": \"a\"}]", "no string field \"story\"", 1},
      {"[\"a story\"]", "expected an object", 1},
      {"[{\"story\": \"a\"} {\"story\": \"b\"}]", "expected ',' or ']'", 16},
      {"[{\"story\": \"a\"}] extra", "after the closing ']'", 17},
      {"[{\"story\": \"a\" \"b\"}]", "invalid JSON", -2},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = write("bad" + std::to_string(i) + ".json", cases[i].json);
    Error e = error_of([&] { read_all<TinyStoriesReader>(path); });
    EXPECT_EQ(e.kind(), ErrorKind::Input) << cases[i].json;
    EXPECT_EQ(e.context().file, path);
    EXPECT_NE(e.message().find(cases[i].message_part), std::string::npos) << e.what();
    if (cases[i].offset >= 0) EXPECT_EQ(e.context().offset, cases[i].offset) << cases[i].json;
    else EXPECT_GT(e.context().offset, 1) << e.what();  // inside the object
    EXPECT_NE(e.context().hint, "");
  }
}

TEST(TextDocuments, BlankLinesSeparateDocuments) {
  auto docs = read_all<TextDocumentReader>(write("a.txt", "\n\nFirst doc\nline two\n\n  \n\r\nSecond\r\n\n\nThird  \n"));
  EXPECT_EQ(docs, (std::vector<std::string>{"First doc\nline two", "Second", "Third"}));
  EXPECT_EQ(read_all<TextDocumentReader>(write("one.txt", "only one document, no newline")).size(), 1u);
  EXPECT_TRUE(read_all<TextDocumentReader>(write("blank.txt", "\n \n\t\n")).empty());
}

TEST(TextDocuments, EndOfTextLinesWinOverBlankLines) {
  // TinyStories' .txt: stories hold blank lines between paragraphs and end with <|endoftext|>.
  std::string text = "Once.\n\nThe end.\n<|endoftext|>\nAnother one.\n\nBye.\n  <|endoftext|>  \n";
  TextDocumentReader r(write("eot.txt", text));
  EXPECT_TRUE(r.endoftext_separated());
  EXPECT_EQ(read_all<TextDocumentReader>(write("eot.txt", text)),
            (std::vector<std::string>{"Once.\n\nThe end.", "Another one.\n\nBye."}));
  // A token in the middle of a line is text, not a separator.
  EXPECT_EQ(read_all<TextDocumentReader>(write("inline.txt", "a <|endoftext|> b\n\nc")).size(), 2u);
}

TEST(TextDocuments, BinaryAndInvalidUtf8AreRefusedWithOffset) {
  Error nul = error_of([&] { read_all<TextDocumentReader>(write("nul.txt", std::string("abc\n\nde\0f", 9))); });
  EXPECT_EQ(nul.context().offset, 7);
  EXPECT_NE(nul.message().find("NUL"), std::string::npos);
  Error bad = error_of([&] { read_all<TextDocumentReader>(write("bad.txt", "ok\xc3\xa9 then \xff here")); });
  EXPECT_EQ(bad.context().offset, 10);
  EXPECT_NE(bad.message().find("0xFF"), std::string::npos);
  EXPECT_EQ(find_invalid_utf8("\xc0\xaf"), 0u);       // overlong '/'
  EXPECT_EQ(find_invalid_utf8("a\xed\xa0\x80"), 1u);  // surrogate
  EXPECT_EQ(find_invalid_utf8("\xe2\x82"), 0u);       // truncated
  EXPECT_EQ(find_invalid_utf8("\xf0\x9f\x99\x82 ok"), std::string_view::npos);
}

TEST(TokenFiles, Llama2cShardRoundTripAndSequences) {
  const std::vector<uint16_t> toks = {1, 10, 11, 12, 1, 20, 1, 30, 31};
  const std::string path = write("shard.bin", "");
  write_token_file(path, toks, TokenFormat::Llama2c);
  EXPECT_EQ(std::filesystem::file_size(path), toks.size() * 2);
  TokenFile f = open_token_file(path, 32);
  EXPECT_EQ(f.format, TokenFormat::Llama2c);
  ASSERT_EQ(f.count, toks.size());
  EXPECT_EQ(std::vector<uint16_t>(f.tokens, f.tokens + f.count), toks);
  auto seqs = split_sequences(f.tokens, f.count, 1);
  EXPECT_EQ(seqs, (std::vector<std::pair<size_t, size_t>>{{0, 4}, {4, 6}, {6, 9}}));
  const uint16_t lead[] = {5, 6, 1, 7};
  EXPECT_EQ(split_sequences(lead, 4, 1), (std::vector<std::pair<size_t, size_t>>{{0, 2}, {2, 4}}));
}

TEST(TokenFiles, LlmcRoundTripAndHeader) {
  std::vector<uint16_t> toks(1000);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t(i * 37 % 50257);
  const std::string path = write("tok.bin", "");
  write_token_file(path, toks, TokenFormat::Llmc);
  EXPECT_EQ(std::filesystem::file_size(path), kLlmcHeaderBytes + toks.size() * 2);
  TokenFile f = open_token_file(path, 50257, TokenFormat::Llmc);
  EXPECT_EQ(f.format, TokenFormat::Llmc);
  EXPECT_EQ(f.data_offset, kLlmcHeaderBytes);
  EXPECT_EQ(std::vector<uint16_t>(f.tokens, f.tokens + f.count), toks);
}

// The llm.c header of `count` tokens followed by `payload` tokens, with edits.
std::string llmc_bytes(int32_t magic, int32_t version, int32_t count, size_t payload) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic, header[1] = version, header[2] = count;
  std::string s(reinterpret_cast<const char*>(header.data()), 1024);
  s.append(payload * 2, '\0');
  return s;
}

TEST(TokenFiles, MalformedFilesAreRefused) {
  struct Case {
    std::string name, bytes, message_part;
    int64_t offset;
    int vocab;
    std::optional<TokenFormat> expect;
  };
  std::string big_id("\x01\x00\x05\x00\xff\x7f\x02\x00", 8);  // ids 1, 5, 32767, 2
  const std::vector<Case> cases = {
      {"empty.bin", "", "empty", 0, -1, {}},
      {"odd.bin", std::string("\x01\x00\x02", 3), "odd size 3", 2, -1, {}},
      {"id.bin", big_id, "token 2 has id 32767", 4, 512, {}},
      {"short.bin", llmc_bytes(kLlmcMagic, 1, 10, 0).substr(0, 100), "ends inside the llm.c header", 100, -1, {}},
      {"trunc.bin", llmc_bytes(kLlmcMagic, 1, 10, 9), "header says 10 tokens (20 bytes) but 18 bytes", 8, -1, {}},
      {"long.bin", llmc_bytes(kLlmcMagic, 1, 10, 11), "but 22 bytes follow", 8, -1, {}},
      {"v2.bin", llmc_bytes(kLlmcMagic, 2, 10, 10), "version 2", 4, -1, {}},
      {"neg.bin", llmc_bytes(kLlmcMagic, 1, -5, 0), "negative token count", 8, -1, {}},
      {"magic.bin", llmc_bytes(20240521, 1, 10, 10), "magic 20240521 is not", 0, -1, TokenFormat::Llmc},
      // Read as a raw shard (no magic), its first id 55433 is outside even GPT-2's vocabulary.
      {"magicv.bin", llmc_bytes(20240521, 1, 10, 10), "token 0 has id 55433", 0, 50257, {}},
      {"notraw.bin", llmc_bytes(kLlmcMagic, 1, 10, 10), "not a raw llama2.c shard", 0, -1, TokenFormat::Llama2c},
  };
  for (const auto& c : cases) {
    const std::string path = write(c.name, c.bytes);
    Error e = error_of([&] { open_token_file(path, c.vocab, c.expect); });
    EXPECT_EQ(e.kind(), ErrorKind::Input) << c.name;
    EXPECT_EQ(e.context().file, path);
    EXPECT_NE(e.message().find(c.message_part), std::string::npos) << c.name << ": " << e.what();
    EXPECT_EQ(e.context().offset, c.offset) << c.name << ": " << e.what();
  }
  EXPECT_NO_THROW(open_token_file(write("fine.bin", big_id), 32768));
}

TEST(DocumentStream, ResolvesFoldersBuiltinAndRefusesTokenFiles) {
  write("corpus/b.txt", "B1\n\nB2");
  write("corpus/a.json", R"([{"story": "A1"}, {"story": "  "}, {"story": "A2"}])");
  write("corpus/sub/c.txt", "C1");
  write("corpus/ignored.bin", "xx");
  const std::string dir = std::filesystem::path(write("corpus/x.md", "not read")).parent_path().string();
  DocumentStream s(resolve_text_inputs({dir, "builtin:3:7"}));
  std::vector<std::string> docs;
  std::string d;
  while (s.next(d)) docs.push_back(d);
  // Sorted paths: a.json (A1, A2; the blank story is skipped), b.txt, sub/c.txt; then 3 built-in.
  ASSERT_EQ(docs.size(), 8u);
  EXPECT_EQ(docs[0], "A1");
  EXPECT_EQ(docs[1], "A2");
  EXPECT_EQ(docs[2], "B1");
  EXPECT_EQ(docs[4], "C1");
  EXPECT_EQ(s.documents(), 8u);
  EXPECT_GE(s.bytes_done(), s.bytes_total() * 9 / 10);

  auto b = resolve_text_inputs({"builtin", "builtin:25"});
  EXPECT_EQ(b[0].builtin_count, kDefaultBuiltinStories);
  EXPECT_EQ(b[1].builtin_count, 25u);
  EXPECT_EQ(error_of([] { resolve_text_inputs({"builtin:x"}); }).kind(), ErrorKind::Usage);
  EXPECT_EQ(error_of([&] { resolve_text_inputs({write("t.bin", "ab")}); }).kind(), ErrorKind::Usage);
  EXPECT_EQ(error_of([] { resolve_text_inputs({"/no/such/file.txt"}); }).kind(), ErrorKind::Input);
}

}  // namespace
}  // namespace orion::data

#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/tokenizer/hf_regex.h"

#include <pcre2.h>

#include <stdexcept>

#include "base/error.h"
#include "model/tokenizer/unicode.h"

namespace orion {

struct HfRegex::Impl {
  pcre2_code* code = nullptr;
  pcre2_match_context* limits = nullptr;
  ~Impl() {
    pcre2_match_context_free(limits);
    pcre2_code_free(code);
  }
};

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

HfRegex::HfRegex(const std::string& pattern) : impl_(std::make_unique<Impl>()) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                              &err, &err_offset, nullptr);
  if (!impl_->code)
    throw std::invalid_argument("PCRE2 rejects the pattern at offset " + std::to_string(err_offset) + ": " +
                                pcre2_message(err));
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // faster when available; plain matching otherwise
  // Bounds on backtracking, so a pathological pattern from a file fails instead of running forever.
  impl_->limits = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(impl_->limits, 10'000'000);
  pcre2_set_depth_limit(impl_->limits, 100'000);
}

HfRegex HfRegex::literal(const std::string& text) {
  std::string quoted = "\\Q";
  for (size_t i = 0; i < text.size(); ++i) {  // \E inside \Q...\E would end the quote early
    if (text.compare(i, 2, "\\E") == 0) {
      quoted += "\\E\\\\E\\Q";
      ++i;
    } else {
      quoted += text[i];
    }
  }
  return HfRegex(quoted + "\\E");
}

HfRegex::~HfRegex() = default;
HfRegex::HfRegex(HfRegex&&) noexcept = default;
HfRegex& HfRegex::operator=(HfRegex&&) noexcept = default;

void for_each_utf8_run(std::string_view text, const std::function<void(size_t, size_t, bool)>& fn) {
  size_t run = 0;
  for (size_t pos = 0; pos < text.size();) {
    Utf8Char c = decode_utf8(text, pos);
    if (c.cp != kInvalidCodepoint) {
      pos += c.len;
      continue;
    }
    if (pos > run) fn(run, pos, true);
    fn(pos, pos + 1, false);
    run = ++pos;
  }
  if (run < text.size()) fn(run, text.size(), true);
}

void HfRegex::for_each_match(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const {
  std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> data(
      pcre2_match_data_create_from_pattern(impl_->code, nullptr), pcre2_match_data_free);
  pcre2_match_data* md = data.get();
  auto run_matches = [&](size_t begin, size_t end, bool valid) {
    if (!valid) return;
    auto subject = reinterpret_cast<PCRE2_SPTR>(text.data() + begin);
    const size_t len = end - begin;
    for (size_t start = 0; start <= len;) {
      int rc = pcre2_match(impl_->code, subject, len, start, PCRE2_NO_UTF_CHECK, md, impl_->limits);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0)
        throw_runtime_error("a tokenizer regex failed on the text: " + pcre2_message(rc), {},
                            "the tokenizer.json pattern backtracks too much for this input");
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (ov[1] > ov[0]) {
        on_match(begin + ov[0], begin + ov[1]);
        start = ov[1];
      } else {  // an empty match: step over one character, as matchAll does
        if (ov[0] >= len) break;
        start = ov[0] + decode_utf8(std::string_view(text.data() + begin, len), ov[0]).len;
      }
    }
  };
  for_each_utf8_run(text, run_matches);
}

}  // namespace orion

// Golden pairs for GPT-2 byte-level BPE, computed by an independent implementation (js-tiktoken).
// Writes tests/testdata/tokenizer/gpt2_golden.json: [{"text": ..., "ids": [...]}, ...].
//
//   mkdir -p /tmp/jst && cd /tmp/jst && npm install js-tiktoken
//   NODE_PATH=/tmp/jst/node_modules node scripts/golden/gpt2_golden.mjs   (from the repo root)
//
// Note: JavaScript's \s also matches U+FEFF and not U+0085, unlike the Unicode White_Space that
// GPT-2's Python regex (and Orion) use, so no text below contains either.
import { createRequire } from "module";
import { writeFileSync } from "fs";
const require = createRequire(import.meta.url);
const { getEncoding } = require(process.env.NODE_PATH ? process.env.NODE_PATH + "/js-tiktoken" : "js-tiktoken");

const long_english = `It was a bright cold day in April, and the clocks were striking thirteen. Winston Smith, his chin nuzzled into his breast in an effort to escape the vile wind, slipped quickly through the glass doors of Victory Mansions, though not quickly enough to prevent a swirl of gritty dust from entering along with him.

The hallway smelt of boiled cabbage and old rag mats. At one end of it a coloured poster, too large for indoor display, had been tacked to the wall. It depicted simply an enormous face, more than a metre wide: the face of a man of about forty-five, with a heavy black moustache and ruggedly handsome features.

"Don't you think so?" she asked. "I'd rather we'd gone -- but they've said it's 3:45 p.m., and we're late!"
`;

const code = `#include <stdio.h>

int main(int argc, char** argv) {
    for (int i = 0; i < 10; ++i) {
\tprintf("%d\\n", i * i);   // squares
    }
    return 0;
}
def f(x):
    return {"a": [1, 2.5e-3, None], 'b': x ** 2}
`;

const texts = [
  "",
  "Hello world",
  "Hello, world! How are you?",
  " leading space",
  "trailing space ",
  "I'll they're we've she'd it's don't I'm you'll",
  "I'LL THEY'RE -- 'tis 'twas o'clock rock'n'roll",
  "  \n\n\t  x",
  "a  b   c    d",
  "tabs\tand\t\ttabs\n",
  "line1\nline2\r\nline3\n\n\nend",
  "   ",
  "\n",
  "x \n y",
  "1234567 89 3.14159 1,000,000 0x1F 2024-01-01",
  "Numbers: ½ ¾ ² ³ Ⅻ ٣٤٥ ४२",
  "café naïve résumé Ångström Straße",
  "cafe\u0301 nai\u0308ve e\u0301\u0301\u0301",
  "Ελληνικά και русский текст",
  "日本語のテキストと中文文本。",
  "我爱北京天安门，天安门上太阳升。",
  "مرحبا بالعالم، كيف حالك؟",
  "שלום עולם",
  "नमस्ते दुनिया",
  "한국어 텍스트입니다",
  "emoji 😀😃😄 🎉 👍🏽",
  "family 👨‍👩‍👧‍👦 and flag 🇺🇸 and 🏳️‍🌈",
  "mixed: abc123def ___ ... !!! ??? @user #tag $100 50%",
  "<|endoftext|>",
  "before<|endoftext|>after <|endoftext|> end",
  "<|endoftext|><|endoftext|>",
  "nbsp\u00a0here and\u3000ideographic space and\u2028line sep",
  "zero\u200bwidth and\u2009thin space",
  "URL: https://example.com/path?q=1&r=two#frag",
  "email: someone@example.org, phone +1 (555) 123-4567",
  "ALLCAPS lowercase MiXeD CamelCaseWord snake_case_word kebab-case-word",
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  "the the the the the the",
  "    indented code\n        more indented\n",
  "Quotes “curly” ‘single’ «guillemets» — dash – en",
  "math: ∑ x² ≤ ∞, α+β=γ, √2 ≈ 1.414",
  long_english,
  code,
];

const enc = getEncoding("gpt2");
const pairs = texts.map((text) => ({ text, ids: Array.from(enc.encode(text, "all")) }));
writeFileSync("tests/testdata/tokenizer/gpt2_golden.json", JSON.stringify(pairs, null, 0).replace(/\},\{/g, "},\n{") + "\n");
console.log(`wrote ${pairs.length} pairs`);

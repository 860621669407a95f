// wick tokenize: text to token ids (and back), one text or a JSON-lines batch.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "commands.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

typedef struct opts {
  const char *model;
  const char *jsonl;       // batch input file ("-" = stdin)
  const char *text;        // single input
  bool json, parse_special, add_special, decode, skip_special, stream;
} opts;

static void usage(FILE *f) {
  fprintf(f,
          "usage: wick tokenize -m MODEL [--json] [--no-special] [--no-bos] TEXT\n"
          "       wick tokenize -m MODEL --jsonl FILE [--no-special] [--no-bos]\n"
          "       wick tokenize -m MODEL --decode [--skip-special] [--stream] (IDS | --jsonl FILE)\n"
          "  --json          print the ids as a JSON array (-- TEXT for a text starting with '-')\n"
          "  --no-special    special-token text stays text (not parsed as special tokens)\n"
          "  --no-bos        do not add the BOS/EOS the model declares\n"
          "  --jsonl FILE    one input per line: a JSON string, or {\"b64\": \"...\"} for raw bytes;\n"
          "                  prints one JSON array per line (--decode: reads arrays, prints strings)\n"
          "  --decode        ids to text (IDS: space- or comma-separated)\n"
          "  --skip-special  --decode: leave special tokens out\n"
          "  --stream        --decode: through the streaming detokenizer, token by token\n");
}

// ---- JSON input ----

static const char *skip_ws(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n') p++;
  return p;
}

static int hex4(const char *p, uint32_t *v) {
  *v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    *v = *v * 16 + (uint32_t)d;
  }
  return 0;
}

static size_t put_utf8(uint32_t cp, char *o) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xC0 | (cp >> 6)), o[1] = (char)(0x80 | (cp & 0x3F)), 2;
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (char)(0xF0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

// Parses a JSON string at *pp (after skipping spaces) into out (room for
// strlen(*pp) bytes). Returns its length, or -1 with why set.
static long parse_jstring(const char **pp, char *out, const char **why) {
  const char *p = skip_ws(*pp);
  if (*p != '"') return *why = "expected '\"'", -1;
  p++;
  size_t o = 0;
  for (;;) {
    unsigned char c = (unsigned char)*p;
    if (c == 0) return *why = "unterminated string", -1;
    if (c == '"') break;
    if (c < 0x20) return *why = "raw control character in string", -1;
    if (c != '\\') {
      out[o++] = (char)c;
      p++;
      continue;
    }
    p++;
    char e = *p++;
    switch (e) {
      case '"': out[o++] = '"'; break;
      case '\\': out[o++] = '\\'; break;
      case '/': out[o++] = '/'; break;
      case 'b': out[o++] = '\b'; break;
      case 'f': out[o++] = '\f'; break;
      case 'n': out[o++] = '\n'; break;
      case 'r': out[o++] = '\r'; break;
      case 't': out[o++] = '\t'; break;
      case 'u': {
        uint32_t cp, lo;
        if (hex4(p, &cp)) return *why = "bad \\u escape", -1;
        p += 4;
        if (cp >= 0xDC00 && cp <= 0xDFFF) return *why = "lone low surrogate", -1;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
            return *why = "high surrogate without a low one", -1;
          p += 6;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        o += put_utf8(cp, out + o);
        break;
      }
      default: return *why = "unknown escape", -1;
    }
  }
  *pp = p + 1;
  return (long)o;
}

static int b64_val(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Decodes base64 s[0..n) into out; returns the length or -1.
static long b64_decode(const char *s, size_t n, char *out) {
  size_t o = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '=') break;
    int v = b64_val(s[i]);
    if (v < 0) return -1;
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (char)((acc >> bits) & 0xFF);
    }
  }
  return (long)o;
}

// One input line: a JSON string or {"b64": "..."}. Returns the length or -1.
static long parse_line(const char *line, char *out, const char **why) {
  const char *p = skip_ws(line);
  long n;
  if (*p == '{') {
    p = skip_ws(p + 1);
    if (parse_jstring(&p, out, why) != 3 || memcmp(out, "b64", 3))
      return *why = "expected {\"b64\": \"...\"}", -1;
    p = skip_ws(p);
    if (*p++ != ':') return *why = "expected ':'", -1;
    long m = parse_jstring(&p, out, why);
    if (m < 0) return -1;
    p = skip_ws(p);
    if (*p++ != '}') return *why = "expected '}'", -1;
    char *tmp = wk_malloc((size_t)m + 1);
    if (!tmp) return *why = "out of memory", -1;
    memcpy(tmp, out, (size_t)m);
    n = b64_decode(tmp, (size_t)m, out);
    wk_free(tmp);
    if (n < 0) return *why = "bad base64", -1;
  } else {
    n = parse_jstring(&p, out, why);
    if (n < 0) return -1;
  }
  if (*skip_ws(p)) return *why = "trailing characters after the value", -1;
  return n;
}

// Parses ids separated by spaces/commas, optionally inside [ ]. Returns count or -1.
static long parse_ids(const char *s, int32_t *ids, long cap) {
  const char *p = skip_ws(s);
  bool bracket = *p == '[';
  if (bracket) p++;
  long n = 0;
  for (;;) {
    while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (!*p || (bracket && *p == ']')) break;
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 0 || v > INT32_MAX || n >= cap) return -1;
    ids[n++] = (int32_t)v;
    p = end;
  }
  if (bracket && *p++ != ']') return -1;
  return *skip_ws(p) ? -1 : n;
}

// ---- output ----

static void print_ids(const int32_t *ids, int64_t n, bool json) {
  if (json) putchar('[');
  for (int64_t i = 0; i < n; i++) printf(i ? (json ? ", %d" : " %d") : "%d", ids[i]);
  puts(json ? "]" : "");
}

static void print_jstring(const char *s, size_t n) {
  putchar('"');
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c == '\n') fputs("\\n", stdout);
    else if (c == '\r') fputs("\\r", stdout);
    else if (c == '\t') fputs("\\t", stdout);
    else if (c < 0x20 || c == 0x7F) printf("\\u%04x", c);
    else putchar(c);
  }
  puts("\"");
}

// ---- actions ----

static int encode_one(const wk_tokenizer *t, const opts *o, const char *s, size_t n, bool json) {
  int64_t cap = (int64_t)n + 8;
  int32_t *ids = wk_malloc((size_t)cap * sizeof(int32_t));
  if (!ids) return fprintf(stderr, "wick tokenize: out of memory\n"), 1;
  int64_t k = tok_encode(t, s, n, o->add_special, o->parse_special, ids, cap);
  if (k > cap) {  // cannot happen (at most one id per byte plus BOS/EOS), but stay safe
    wk_free(ids);
    ids = wk_malloc((size_t)k * sizeof(int32_t));
    if (!ids) return fprintf(stderr, "wick tokenize: out of memory\n"), 1;
    k = tok_encode(t, s, n, o->add_special, o->parse_special, ids, k);
  }
  if (k < 0) {
    wk_free(ids);
    return fprintf(stderr, "wick tokenize: encoding failed: %s\n", wick_status_str((int)-k)), 1;
  }
  print_ids(ids, k, json);
  wk_free(ids);
  return 0;
}

static int decode_one(const wk_tokenizer *t, const opts *o, const int32_t *ids, long n, bool json) {
  bool render = !o->skip_special;
  char *text = NULL;
  int64_t len;
  if (o->stream) {
    int cap = tok_stream_min_cap(t);
    size_t room = (size_t)cap * ((size_t)n + 1);
    text = wk_malloc(room);
    if (!text) return fprintf(stderr, "wick tokenize: out of memory\n"), 1;
    tok_stream st;
    tok_stream_init(&st, t, render);
    len = 0;
    for (long i = 0; i <= n && len >= 0; i++) {
      int w = i < n ? tok_stream_push(&st, ids[i], text + len, cap) : tok_stream_flush(&st, text + len, cap);
      len = w < 0 ? w : len + w;
    }
  } else {
    len = tok_decode(t, ids, n, render, NULL, 0);
    if (len >= 0) {
      text = wk_malloc((size_t)len + 1);
      if (!text) return fprintf(stderr, "wick tokenize: out of memory\n"), 1;
      len = tok_decode(t, ids, n, render, text, len + 1);
    }
  }
  if (len < 0) {
    wk_free(text);
    return fprintf(stderr, "wick tokenize: decoding failed: %s (ids must be 0..%d)\n",
                   wick_status_str((int)-len), tok_n_vocab(t) - 1), 1;
  }
  if (json) print_jstring(text, (size_t)len);
  else fwrite(text, 1, (size_t)len, stdout), putchar('\n');
  wk_free(text);
  return 0;
}

static int run_batch(const wk_tokenizer *t, const opts *o) {
  FILE *f = strcmp(o->jsonl, "-") ? fopen(o->jsonl, "rb") : stdin;
  if (!f) return fprintf(stderr, "wick tokenize: cannot open %s\n", o->jsonl), 1;
  char *line = NULL;
  size_t lcap = 0;
  ssize_t ln;
  long lineno = 0;
  int rc = 0;
  while (!rc && (ln = getline(&line, &lcap, f)) >= 0) {
    lineno++;
    if (ln > 0 && line[ln - 1] == '\n') line[--ln] = 0;
    if (*skip_ws(line) == 0) continue;
    char *buf = wk_malloc(((size_t)ln + 8) * (o->decode ? 4 : 1));
    if (!buf) { rc = 1; break; }
    if (o->decode) {
      long n = parse_ids(line, (int32_t *)(void *)buf, (long)ln + 8);
      if (n < 0) {
        fprintf(stderr, "wick tokenize: %s:%ld: expected a JSON array of token ids, found '%.40s'\n", o->jsonl, lineno, line);
        rc = 1;
      } else {
        rc = decode_one(t, o, (int32_t *)(void *)buf, n, true);
      }
    } else {
      const char *why = "";
      long n = parse_line(line, buf, &why);
      if (n < 0) {
        fprintf(stderr, "wick tokenize: %s:%ld: %s in '%.40s'\n", o->jsonl, lineno, why, line);
        rc = 1;
      } else {
        rc = encode_one(t, o, buf, (size_t)n, true);
      }
    }
    wk_free(buf);
    fflush(stdout);
  }
  free(line);
  if (f != stdin) fclose(f);
  return rc;
}

static int parse_args(int argc, char **argv, opts *o) {
  *o = (opts){.parse_special = true, .add_special = true};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) o->model = argv[++i];
    else if (!strcmp(a, "--jsonl") && i + 1 < argc) o->jsonl = argv[++i];
    else if (!strcmp(a, "--json")) o->json = true;
    else if (!strcmp(a, "--no-special")) o->parse_special = false;
    else if (!strcmp(a, "--no-bos")) o->add_special = false;
    else if (!strcmp(a, "--decode")) o->decode = true;
    else if (!strcmp(a, "--skip-special")) o->skip_special = true;
    else if (!strcmp(a, "--stream")) o->stream = true;
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 0;
    else if (!strcmp(a, "--") && i + 1 < argc && !o->text) o->text = argv[++i];  // text starting with '-'
    else if (a[0] == '-' && a[1] && !o->text) {
      fprintf(stderr, "wick tokenize: unknown option '%s' (try --help)\n", a);
      return 2;
    } else if (!o->text) o->text = a;
    else {
      fprintf(stderr, "wick tokenize: expected one TEXT argument, found another: '%s'\n", a);
      return 2;
    }
  }
  if (!o->model) return fprintf(stderr, "wick tokenize: expected -m MODEL\n"), 2;
  if (!o->text == !o->jsonl) return fprintf(stderr, "wick tokenize: expected TEXT or --jsonl FILE (one of them)\n"), 2;
  return -1;
}

int cmd_tokenize(int argc, char **argv) {
  opts o;
  int rc = parse_args(argc, argv, &o);
  if (rc >= 0) return rc;
  const char *path = tool_model_path(o.model);
  wk_error err = {{0}};
  gguf_file *f = NULL;
  wk_tokenizer *t = NULL;
  if (gguf_open(&f, path, &err) || tok_load(&t, f, &err)) {
    fprintf(stderr, "wick tokenize: %s\n", err.msg);
    gguf_close(f);
    return 1;
  }
  gguf_close(f);
  if (o.jsonl) {
    rc = run_batch(t, &o);
  } else if (o.decode) {
    size_t n = strlen(o.text);
    int32_t *ids = wk_malloc((n / 2 + 2) * sizeof(int32_t));
    long k = ids ? parse_ids(o.text, ids, (long)(n / 2 + 2)) : -1;
    if (k < 0) {
      fprintf(stderr, "wick tokenize: expected token ids (e.g. \"1 2 3\"), found '%.40s'\n", o.text);
      rc = 1;
    } else rc = decode_one(t, &o, ids, k, o.json);
    wk_free(ids);
  } else {
    rc = encode_one(t, &o, o.text, strlen(o.text), o.json);
  }
  tok_free(t);
  return rc;
}

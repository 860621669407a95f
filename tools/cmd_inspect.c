// wick inspect MODEL [--json]: a GGUF file's header, metadata and tensor table.
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "format/gguf.h"
#include "quant/types.h"

#define SHORT_ARRAY 16  // arrays up to this length are printed whole
#define TEXT_PREVIEW 4  // elements shown of a longer array in text mode

// Length of the valid UTF-8 sequence at p (at most n bytes), 0 if invalid.
static size_t utf8_len(const unsigned char *p, size_t n) {
  unsigned c = p[0];
  size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (!len || len > n || (len == 2 && c < 0xc2) || (len == 4 && c > 0xf4)) return 0;
  for (size_t i = 1; i < len; i++)
    if ((p[i] & 0xc0) != 0x80) return 0;
  if (len == 3 && c == 0xe0 && p[1] < 0xa0) return 0;  // overlong
  if (len == 3 && c == 0xed && p[1] >= 0xa0) return 0;  // surrogate
  if (len == 4 && c == 0xf0 && p[1] < 0x90) return 0;
  if (len == 4 && c == 0xf4 && p[1] >= 0x90) return 0;
  return len;
}

// Prints s as a quoted JSON string (at most max bytes of it when max > 0);
// bytes that are not valid UTF-8 come out as \u00XX.
static void put_json_str(FILE *o, const char *s, size_t n, size_t max) {
  const unsigned char *p = (const unsigned char *)s;
  size_t end = max && n > max ? max : n;
  fputc('"', o);
  for (size_t i = 0; i < end;) {
    unsigned c = p[i];
    size_t len = utf8_len(p + i, n - i);
    if (c == '"' || c == '\\') fprintf(o, "\\%c", c);
    else if (c == '\n') fputs("\\n", o);
    else if (c == '\t') fputs("\\t", o);
    else if (c == '\r') fputs("\\r", o);
    else if (c < 0x20 || c == 0x7f || !len) fprintf(o, "\\u%04x", c);
    else {
      fwrite(p + i, 1, len, o);
      i += len;
      continue;
    }
    i++;
  }
  if (end < n) fputs("...", o);
  fputc('"', o);
}

// JSON gets round-trip precision; text gets what a reader wants to see.
static void put_double(FILE *o, double v, bool is_f32, bool json) {
  if (isnan(v)) fputs(json ? "\"nan\"" : "nan", o);
  else if (isinf(v)) fputs(v > 0 ? (json ? "\"inf\"" : "inf") : (json ? "\"-inf\"" : "-inf"), o);
  else fprintf(o, !json ? "%.7g" : is_f32 ? "%.9g" : "%.17g", v);
}

// One scalar element of type t read through the int/float/u64 accessors.
static void put_number(FILE *o, gguf_vtype t, int64_t i, double d, uint64_t u, bool json) {
  if (t == GGUF_BOOL) fputs(i ? "true" : "false", o);
  else if (t == GGUF_FLOAT32 || t == GGUF_FLOAT64) put_double(o, d, t == GGUF_FLOAT32, json);
  else if (t == GGUF_UINT64) fprintf(o, "%" PRIu64, u);
  else fprintf(o, "%" PRId64, i);
}

static void put_value(FILE *o, const gguf_kv *kv, bool json, size_t str_max);

static void put_elem(FILE *o, const gguf_kv *kv, uint64_t i, bool json, size_t str_max) {
  gguf_vtype et = gguf_arr_type(kv);
  if (et == GGUF_STRING) {
    gguf_str s = gguf_arr_str(kv, i);
    put_json_str(o, s.ptr, (size_t)s.len, str_max);
  } else if (et == GGUF_ARRAY) {
    put_value(o, gguf_arr_arr(kv, i), json, str_max);
  } else {
    int64_t iv = 0;
    double d = 0;
    uint64_t u = 0;
    gguf_arr_int(kv, i, &iv);
    gguf_arr_float(kv, i, &d);
    gguf_arr_u64(kv, i, &u);
    put_number(o, et, iv, d, u, json);
  }
}

static void put_value(FILE *o, const gguf_kv *kv, bool json, size_t str_max) {
  gguf_vtype t = gguf_kv_type(kv);
  if (t == GGUF_STRING) {
    gguf_str s;
    gguf_kv_str(kv, &s);
    put_json_str(o, s.ptr, (size_t)s.len, str_max);
    return;
  }
  if (t != GGUF_ARRAY) {
    int64_t iv = 0;
    double d = 0;
    uint64_t u = 0;
    gguf_kv_int(kv, &iv);
    gguf_kv_float(kv, &d);
    gguf_kv_u64(kv, &u);
    put_number(o, t, iv, d, u, json);
    return;
  }
  uint64_t n = gguf_arr_len(kv);
  const char *tn = gguf_vtype_name(gguf_arr_type(kv));
  if (json && n > SHORT_ARRAY) {
    fprintf(o, "{\"type\": \"%s\", \"len\": %" PRIu64 "}", tn, n);
    return;
  }
  uint64_t shown = json || n <= SHORT_ARRAY ? n : TEXT_PREVIEW;
  if (!json) fprintf(o, "%s[%" PRIu64 "] ", tn, n);
  fputc('[', o);
  for (uint64_t i = 0; i < shown; i++) {
    if (i) fputs(", ", o);
    put_elem(o, kv, i, json, str_max);
  }
  if (shown < n) fputs(", ...", o);
  fputc(']', o);
}

static void put_shape(FILE *o, const gguf_tensor *t) {
  fputc('[', o);
  for (uint32_t d = 0; d < t->n_dims; d++) fprintf(o, "%s%" PRId64, d ? ", " : "", t->ne[d]);
  fputc(']', o);
}

static const char *type_name(int type) {
  const wk_type_info *ti = wk_type_get(type);
  return ti ? ti->name : "?";
}

static void print_json(FILE *o, const gguf_file *f) {
  fprintf(o, "{\"version\": %" PRIu32 ", \"alignment\": %" PRIu64 ", \"data_offset\": %" PRIu64
          ", \"file_size\": %zu,\n \"metadata\": {",
          gguf_version(f), gguf_alignment(f), gguf_data_offset(f), gguf_file_size(f));
  for (uint64_t i = 0; i < gguf_n_kv(f); i++) {
    const gguf_kv *kv = gguf_kv_at(f, i);
    gguf_str k = gguf_kv_key(kv);
    fputs(i ? ",\n  " : "\n  ", o);
    put_json_str(o, k.ptr, (size_t)k.len, 0);
    fputs(": ", o);
    put_value(o, kv, true, 0);
  }
  fputs("},\n \"tensors\": [", o);
  for (uint64_t i = 0; i < gguf_n_tensors(f); i++) {
    const gguf_tensor *t = gguf_tensor_at(f, i);
    fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", o);
    put_json_str(o, t->name, strlen(t->name), 0);
    fprintf(o, ", \"type\": \"%s\", \"type_id\": %d, \"shape\": ", type_name(t->type), t->type);
    put_shape(o, t);
    fprintf(o, ", \"offset\": %" PRIu64 ", \"bytes\": %" PRIu64 "}", t->offset, t->nbytes);
  }
  fputs("]}\n", o);
}

static void print_hparams(FILE *o, const gguf_file *f, const char *arch) {
  size_t alen = strlen(arch);
  fprintf(o, "hyperparameters:\n");
  for (uint64_t i = 0; i < gguf_n_kv(f); i++) {
    const gguf_kv *kv = gguf_kv_at(f, i);
    gguf_str k = gguf_kv_key(kv);
    if (gguf_kv_type(kv) == GGUF_ARRAY || gguf_kv_type(kv) == GGUF_STRING) continue;
    if (k.len <= alen || memcmp(k.ptr, arch, alen) || k.ptr[alen] != '.') continue;
    fprintf(o, "  %-40.*s ", (int)(k.len - alen - 1), k.ptr + alen + 1);
    put_value(o, kv, false, 0);
    fputc('\n', o);
  }
}

static void print_text(FILE *o, const gguf_file *f, const char *path) {
  char arch[64] = "?", tok[64] = "?";
  gguf_get_str(f, "general.architecture", arch, sizeof arch);
  gguf_get_str(f, "tokenizer.ggml.model", tok, sizeof tok);
  const gguf_kv *vocab = gguf_get(f, "tokenizer.ggml.tokens");
  fprintf(o, "file:          %s (%zu bytes)\n", path, gguf_file_size(f));
  fprintf(o, "gguf version:  %" PRIu32 " (alignment %" PRIu64 ", data at byte %" PRIu64 ")\n",
          gguf_version(f), gguf_alignment(f), gguf_data_offset(f));
  fprintf(o, "architecture:  %s\n", arch);
  fprintf(o, "tokenizer:     %s, vocab %" PRIu64 "\n", tok, vocab ? gguf_arr_len(vocab) : 0);
  print_hparams(o, f, arch);
  fprintf(o, "\nmetadata (%" PRIu64 " entries):\n", gguf_n_kv(f));
  for (uint64_t i = 0; i < gguf_n_kv(f); i++) {
    const gguf_kv *kv = gguf_kv_at(f, i);
    gguf_str k = gguf_kv_key(kv);
    fprintf(o, "  %-40.*s %-4s ", (int)k.len, k.ptr, gguf_vtype_name(gguf_kv_type(kv)));
    put_value(o, kv, false, 80);
    fputc('\n', o);
  }
  fprintf(o, "\ntensors (%" PRIu64 "):\n  %-40s %-8s %-24s %12s\n", gguf_n_tensors(f), "name",
          "type", "shape", "bytes");
  uint64_t total = 0;
  for (uint64_t i = 0; i < gguf_n_tensors(f); i++) {
    const gguf_tensor *t = gguf_tensor_at(f, i);
    char shape[96];
    int n = snprintf(shape, sizeof shape, "[");
    for (uint32_t d = 0; d < t->n_dims && n > 0 && (size_t)n < sizeof shape; d++)
      n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRId64, d ? ", " : "", t->ne[d]);
    if (n > 0 && (size_t)n < sizeof shape) snprintf(shape + n, sizeof shape - (size_t)n, "]");
    fprintf(o, "  %-40s %-8s %-24s %12" PRIu64 "\n", t->name, type_name(t->type), shape,
            t->nbytes);
    total += t->nbytes;
  }
  fprintf(o, "total: %" PRIu64 " bytes (%.2f MiB) in %" PRIu64 " tensors\n", total,
          (double)total / (1024.0 * 1024.0), gguf_n_tensors(f));
}

int cmd_inspect(int argc, char **argv) {
  const char *model = NULL;
  bool json = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--json")) json = true;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      printf("usage: wick inspect MODEL [--json]\n"
             "  MODEL   a .gguf path, or smollm2 / gemma3 for the default models\n"
             "  --json  print one JSON object: version, metadata, tensors\n");
      return 0;
    } else if (!strcmp(argv[i], "-m") && i + 1 < argc) model = argv[++i];
    else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "wick inspect: unknown option '%s' (try --help)\n", argv[i]);
      return 2;
    } else if (!model) model = argv[i];
    else {
      fprintf(stderr, "wick inspect: more than one MODEL given ('%s', '%s')\n", model, argv[i]);
      return 2;
    }
  }
  if (!model) {
    fprintf(stderr, "wick inspect: expected a MODEL (try --help)\n");
    return 2;
  }
  const char *path = tool_model_path(model);
  gguf_file *f = NULL;
  wk_error err = {{0}};
  if (gguf_open(&f, path, &err)) {
    fprintf(stderr, "wick inspect: %s\n", err.msg);
    return 1;
  }
  if (json) print_json(stdout, f);
  else print_text(stdout, f, path);
  gguf_close(f);
  return 0;
}

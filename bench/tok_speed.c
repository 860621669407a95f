// Tokenizer encode/decode speed on one core.
//   bench_tok_speed [-m MODEL.gguf]... [-f TEXT_FILE] [-r REPEATS] [-c CHUNK_BYTES]
// -c encodes the text in pieces of about that size (under 4 KB the encoder
// keeps no word cache, as for a typical prompt); decode is then skipped.
// Without -f the text is ~4 MB of English-like prose built from a fixed word
// list with a seeded generator (sentences, punctuation, numbers, newlines).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

// Thread CPU time: on a shared machine, wall time also counts other processes.
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static const char *k_words[] = {
    "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "I", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an",
    "had", "they", "you", "were", "their", "one", "all", "we", "can", "her", "has", "there", "been",
    "if", "more", "when", "will", "would", "who", "so", "no", "people", "time", "government",
    "information", "development", "understanding", "particularly", "nevertheless", "approximately",
    "tokenizer", "inference", "engine", "model", "language", "performance", "measurement", "results",
    "experiment", "however", "therefore", "although", "because", "between", "through", "during",
    "without", "within", "system", "process", "different", "important", "available", "possible",
    "children", "country", "history", "question", "business", "morning", "evening", "water", "city",
    "don't", "it's", "we're", "they've", "I'm", "you'll", "she'd", "London", "Paris", "September",
};

static char *make_text(size_t target, size_t *len) {
  char *s = malloc(target + 64);
  if (!s) return NULL;
  uint64_t r = 0x9e3779b97f4a7c15ull;
  size_t n = 0;
  int in_sentence = 0;
  while (n < target) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;
    unsigned x = (unsigned)(r >> 33);
    const char *w = k_words[x % (sizeof k_words / sizeof k_words[0])];
    if (x % 53 == 0) {
      n += (size_t)snprintf(s + n, 64, " %u", (x >> 8) % 100000);
      continue;
    }
    if (!in_sentence) {
      s[n++] = (char)(w[0] >= 'a' && w[0] <= 'z' ? w[0] - 32 : w[0]);
      n += (size_t)snprintf(s + n, 64, "%s", w + 1);
      in_sentence = 1;
    } else {
      n += (size_t)snprintf(s + n, 64, " %s", w);
    }
    if (x % 11 == 0) s[n++] = ',';
    if (x % 13 == 0) {
      s[n++] = x % 7 == 0 ? '?' : '.';
      s[n++] = x % 5 == 0 ? '\n' : ' ';
      in_sentence = 0;
    }
  }
  s[n] = 0;
  *len = n;
  return s;
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s && fread(s, 1, (size_t)n, f) != (size_t)n) free(s), s = NULL;
  fclose(f);
  if (s) s[n] = 0, *len = (size_t)n;
  return s;
}

// Encodes text in pieces of about chunk bytes (cut at a space); returns the id count.
static int64_t encode_chunked(const wk_tokenizer *t, const char *text, size_t len, size_t chunk,
                              int32_t *ids, int64_t cap) {
  int64_t total = 0;
  size_t a = 0;
  while (a < len) {
    size_t b = a + chunk < len ? a + chunk : len;
    while (b < len && text[b] != ' ') b++;
    int64_t n = tok_encode(t, text + a, b - a, false, true, ids + total, cap - total);
    if (n < 0 || n > cap - total) return -1;
    total += n;
    a = b;
  }
  return total;
}

static int bench_model(const char *path, const char *text, size_t len, int repeats, size_t chunk) {
  wk_error err = {{0}};
  gguf_file *f = NULL;
  wk_tokenizer *t = NULL;
  double t0 = now_s();
  if (gguf_open(&f, path, &err) || tok_load(&t, f, &err)) {
    fprintf(stderr, "bench_tok_speed: %s\n", err.msg);
    gguf_close(f);
    return 1;
  }
  gguf_close(f);
  double load = now_s() - t0;
  int64_t cap = (int64_t)len + 16;
  int32_t *ids = malloc((size_t)cap * sizeof(int32_t));
  char *back = malloc(len * 3 + 16);
  if (!ids || !back) return 1;
  double best_enc = 1e30, best_dec = 1e30, best_wall = 1e30;
  int64_t n = 0;
  for (int r = 0; r < repeats; r++) {
    t0 = now_s();
    double w0 = wall_s();
    n = chunk ? encode_chunked(t, text, len, chunk, ids, cap) : tok_encode(t, text, len, false, true, ids, cap);
    double e = now_s() - t0, we = wall_s() - w0;
    if (we < best_wall) best_wall = we;
    if (n < 0) return fprintf(stderr, "bench_tok_speed: encode failed\n"), 1;
    if (chunk) {
      if (e < best_enc) best_enc = e;
      best_dec = 1e30;
      continue;
    }
    t0 = now_s();
    int64_t m = tok_decode(t, ids, n, false, back, (int64_t)len * 3 + 16);
    double d = now_s() - t0;
    if (m != (int64_t)len || memcmp(back, text, len)) fprintf(stderr, "warning: decode(encode(text)) != text\n");
    if (e < best_enc) best_enc = e;
    if (d < best_dec) best_dec = d;
  }
  printf("%-40s load %.2f s | encode %.2f MB/s (%.2f M tokens/s, %.2f bytes/token; wall-clock %.2f MB/s)"
         " | decode %.1f MB/s\n",
         path, load, (double)len / best_enc / 1e6, (double)n / best_enc / 1e6, (double)len / (double)n,
         (double)len / best_wall / 1e6, chunk ? 0.0 : (double)len / best_dec / 1e6);
  free(ids);
  free(back);
  tok_free(t);
  return 0;
}

int main(int argc, char **argv) {
  const char *models[8];
  int nm = 0, repeats = 3;
  size_t chunk = 0;
  const char *file = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-m") && i + 1 < argc && nm < 8) models[nm++] = argv[++i];
    else if (!strcmp(argv[i], "-f") && i + 1 < argc) file = argv[++i];
    else if (!strcmp(argv[i], "-r") && i + 1 < argc) repeats = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-c") && i + 1 < argc) chunk = (size_t)atol(argv[++i]);
    else return fprintf(stderr, "usage: bench_tok_speed [-m MODEL.gguf]... [-f TEXT] [-r REPEATS] [-c CHUNK]\n"), 2;
  }
  if (nm == 0) {
    models[nm++] = "models/smollm2-135m-instruct-q4_1.gguf";
    models[nm++] = "models/gemma3-270m-q4_k_m.gguf";
  }
  size_t len = 0;
  char *text = file ? read_file(file, &len) : make_text(4u << 20, &len);
  if (!text) return fprintf(stderr, "bench_tok_speed: cannot read %s\n", file ? file : "(generated)"), 1;
  printf("text: %s, %.2f MB; best of %d runs, 1 thread, MB/s over thread CPU time%s\n",
         file ? file : "generated English", (double)len / 1e6, repeats, chunk ? "; chunked, no decode" : "");
  int rc = 0;
  for (int i = 0; i < nm; i++) rc |= bench_model(models[i], text, len, repeats < 1 ? 1 : repeats, chunk);
  free(text);
  return rc;
}

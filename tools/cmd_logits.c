// wick logits: runs token ids through the CPU backend as one sequence and
// writes every position's logits (the hook of the reference tests).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "base/timer.h"
#include "commands.h"
#include "format/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

enum { LOGITS_BLOCK = 16 };

static void usage(FILE *f) {
  fprintf(f,
          "usage: wick logits -m MODEL (-t \"ID ID ...\" | --tokens-file F) [-o FILE]\n"
          "                   [--threads N] [--chunk K] [--greedy N] [--exact]\n"
          "  -o FILE        write float32 logits [n_tokens x vocab] (little-endian) to FILE;\n"
          "                 without -o, print the top-5 ids of each position\n"
          "  --chunk K      feed the prompt K tokens per forward call (default: all at once)\n"
          "  --greedy N     then append the argmax token N times; print the ids on stdout\n"
          "  --exact        exact f32 matrix products (default: the SIMD kernels, which\n"
          "                 round activations to 16 bits for quantized weights)\n");
}

// Parses whitespace-separated ids; *ids grows as needed.
static int parse_ids(const char *s, int32_t **ids, int *n, int *cap) {
  while (*s) {
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == ',') s++;
    if (!*s) break;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || errno || v < 0 || v > INT32_MAX) {
      fprintf(stderr, "wick logits: bad token id near '%.20s'\n", s);
      return 1;
    }
    if (*n == *cap) {
      int nc = *cap ? *cap * 2 : 256;
      int32_t *p = wk_realloc(*ids, (size_t)nc * sizeof *p);
      if (!p) return fprintf(stderr, "wick logits: out of memory\n"), 1;
      *ids = p, *cap = nc;
    }
    (*ids)[(*n)++] = (int32_t)v;
    s = end;
  }
  return 0;
}

static int read_file_text(const char *path, char **out) {
  FILE *f = fopen(path, "rb");
  if (!f) return fprintf(stderr, "wick logits: cannot open %s: %s\n", path, strerror(errno)), 1;
  size_t cap = 4096, n = 0;
  char *buf = wk_malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (n + 1 == cap) {
      char *nb = wk_realloc(buf, cap * 2);
      if (!nb) wk_free(buf);
      buf = nb, cap *= 2;
    }
  }
  fclose(f);
  if (!buf) return fprintf(stderr, "wick logits: out of memory\n"), 1;
  buf[n] = 0;
  *out = buf;
  return 0;
}

// CPU seconds of the whole process (all threads): on a busy machine a better
// measure of the work done than wall time.
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int32_t argmax(const float *x, int n) {
  int32_t best = 0;
  for (int i = 1; i < n; i++)
    if (x[i] > x[best]) best = i;
  return best;
}

// Prints the top-5 ids of one position (with their text when tok is set).
static void print_top5(const wk_tokenizer *tok, int pos, const float *x, int n) {
  int top[5];
  int k = n < 5 ? n : 5;
  for (int j = 0; j < k; j++) {
    int best = -1;
    for (int i = 0; i < n; i++) {
      int taken = 0;
      for (int q = 0; q < j; q++) taken |= top[q] == i;
      if (!taken && (best < 0 || x[i] > x[best])) best = i;
    }
    top[j] = best;
  }
  printf("%d:", pos);
  for (int j = 0; j < k; j++) {
    char piece[64];
    int len = tok ? tok_piece(tok, top[j], true, piece, (int)sizeof piece - 1) : -1;
    if (len >= 0 && len < (int)sizeof piece) {
      piece[len] = 0;
      for (int c = 0; c < len; c++)
        if ((unsigned char)piece[c] < 32) piece[c] = ' ';
      printf("  %d '%s' (%.3f)", top[j], piece, x[top[j]]);
    } else {
      printf("  %d (%.3f)", top[j], x[top[j]]);
    }
  }
  printf("\n");
}

typedef struct opts {
  const char *model, *ids_text, *ids_file, *out;
  int threads, chunk, greedy, exact;
} opts;

static int parse_args(int argc, char **argv, opts *o) {
  memset(o, 0, sizeof *o);
  o->threads = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), -1;
    if (!strcmp(a, "--exact")) {
      o->exact = 1;
      continue;
    }
    if (i + 1 >= argc) return fprintf(stderr, "wick logits: %s needs a value\n", a), 2;
    const char *v = argv[++i];
    if (!strcmp(a, "-m")) o->model = v;
    else if (!strcmp(a, "-t")) o->ids_text = v;
    else if (!strcmp(a, "--tokens-file")) o->ids_file = v;
    else if (!strcmp(a, "-o")) o->out = v;
    else if (!strcmp(a, "--threads")) o->threads = atoi(v);
    else if (!strcmp(a, "--chunk")) o->chunk = atoi(v);
    else if (!strcmp(a, "--greedy")) o->greedy = atoi(v);
    else return fprintf(stderr, "wick logits: unknown option %s\n", a), usage(stderr), 2;
  }
  if (!o->model || (!o->ids_text == !o->ids_file))
    return fprintf(stderr, "wick logits: need -m and one of -t / --tokens-file\n"), usage(stderr),
           2;
  if (o->threads < 1 || o->chunk < 0 || o->greedy < 0)
    return fprintf(stderr, "wick logits: --threads must be >= 1, --chunk and --greedy >= 0\n"), 2;
  return 0;
}

typedef struct run_state {
  wk_backend *be;
  const wk_model *m;
  int32_t *blocks;
  int n_blocks;
  int n_past;
  float *logits;
} run_state;

// Feeds ids[0..n) after what is cached; logits of all n rows into st->logits.
static int feed(run_state *st, const int32_t *ids, int n, int32_t *at, wk_error *err) {
  for (int i = 0; i < n; i++) at[i] = i;
  wk_seq seq = {st->blocks, st->n_blocks, st->n_past, n, 0};
  wk_batch b = {ids, n, &seq, 1, at, n};
  int rc = st->be->forward(st->be, &b, st->logits, err);
  if (!rc) st->n_past += n;
  return rc;
}

static int run(const opts *o, const int32_t *ids, int n_ids, wk_error *err) {
  gguf_file *f = NULL;
  wk_model m;
  memset(&m, 0, sizeof m);
  run_state st = {0};
  int32_t *at = NULL;
  wk_tokenizer *tok = NULL;
  FILE *out = NULL;
  int rc = gguf_open(&f, tool_model_path(o->model), err);
  if (rc || (rc = model_load(&m, f, err))) goto done;
  if (!o->out && !o->greedy) {
    wk_error terr;
    if (tok_load(&tok, f, &terr)) tok = NULL;  // ids only
  }
  int chunk = o->chunk > 0 && o->chunk < n_ids ? o->chunk : n_ids;
  int total = n_ids + o->greedy;
  st.n_blocks = (total + LOGITS_BLOCK - 1) / LOGITS_BLOCK;
  st.m = &m;
  st.be = backend_cpu_create();
  st.blocks = wk_calloc((size_t)st.n_blocks, sizeof *st.blocks);
  st.logits = wk_calloc((size_t)chunk * (size_t)m.vocab, sizeof(float));
  at = wk_calloc((size_t)chunk, sizeof *at);
  if (!st.be || !st.blocks || !st.logits || !at) {
    rc = wk_fail(err, WICK_ERR_NOMEM, "out of memory");
    goto done;
  }
  for (int i = 0; i < st.n_blocks; i++) st.blocks[i] = i;
  wk_backend_params p = {.max_batch_tokens = chunk, .max_seqs = 1, .max_logits = chunk,
                         .n_threads = o->threads, .exact = o->exact,
                         .kv = {.block_size = LOGITS_BLOCK, .n_blocks = st.n_blocks}};
  if ((rc = st.be->prepare(st.be, &m, &p, err))) goto done;
  if (o->out && !(out = fopen(o->out, "wb"))) {
    rc = wk_fail(err, WICK_ERR_IO, "cannot open %s: %s", o->out, strerror(errno));
    goto done;
  }
  double t0 = wk_now(), c0 = cpu_now();
  int last_n = 0;
  for (int i = 0; i < n_ids; i += chunk) {
    int n = n_ids - i < chunk ? n_ids - i : chunk;
    if ((rc = feed(&st, ids + i, n, at, err))) goto done;
    last_n = n;
    if (out && fwrite(st.logits, sizeof(float) * (size_t)m.vocab, (size_t)n, out) != (size_t)n) {
      rc = wk_fail(err, WICK_ERR_IO, "cannot write %s", o->out);
      goto done;
    }
    if (!out && !o->greedy)
      for (int j = 0; j < n; j++) print_top5(tok, i + j, st.logits + (size_t)j * m.vocab, m.vocab);
  }
  double t1 = wk_now(), c1 = cpu_now();
  fprintf(stderr, "prompt: %d tokens in %.1f ms (%.1f tok/s, %d threads, %s; cpu %.1f ms)\n",
          n_ids, (t1 - t0) * 1e3, n_ids / (t1 - t0), o->threads, o->exact ? "exact" : "fast",
          (c1 - c0) * 1e3);
  const float *last = st.logits + (size_t)(last_n - 1) * m.vocab;
  for (int g = 0; g < o->greedy; g++) {
    int32_t tok = argmax(last, m.vocab);
    printf(g ? " %d" : "%d", tok);
    if (g + 1 < o->greedy) {
      if ((rc = feed(&st, &tok, 1, at, err))) goto done;
      last = st.logits;
    }
  }
  if (o->greedy) {
    printf("\n");
    double t2 = wk_now(), c2 = cpu_now();
    if (o->greedy > 1)
      fprintf(stderr, "decode: %.1f ms/token (cpu %.1f ms/token)\n",
              (t2 - t1) * 1e3 / (o->greedy - 1), (c2 - c1) * 1e3 / (o->greedy - 1));
  }
done:
  if (out && fclose(out) && !rc) rc = wk_fail(err, WICK_ERR_IO, "cannot write %s", o->out);
  if (st.be) st.be->destroy(st.be);
  wk_free(st.blocks);
  wk_free(st.logits);
  wk_free(at);
  tok_free(tok);
  model_free(&m);
  gguf_close(f);
  return rc;
}

int cmd_logits(int argc, char **argv) {
  opts o;
  int rc = parse_args(argc, argv, &o);
  if (rc) return rc < 0 ? 0 : rc;
  int32_t *ids = NULL;
  int n = 0, cap = 0;
  char *text = NULL;
  if (o.ids_file && read_file_text(o.ids_file, &text)) return 1;
  rc = parse_ids(text ? text : o.ids_text, &ids, &n, &cap);
  wk_free(text);
  if (!rc && n == 0) {
    fprintf(stderr, "wick logits: no token ids given\n");
    rc = 1;
  }
  if (!rc) {
    wk_error err = {{0}};
    if (run(&o, ids, n, &err)) {
      fprintf(stderr, "wick logits: %s\n", err.msg);
      rc = 1;
    }
  }
  wk_free(ids);
  return rc ? 1 : 0;
}

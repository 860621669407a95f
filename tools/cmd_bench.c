// wick bench: prompt-processing and generation speed, measured the way
// llama-bench measures them, straight on the backend (no tokenizer, no
// sampler), so the figures are the forward pass alone.
//
//   pp: one batch of p random valid token ids evaluated from an empty cache
//       (fed in chunks of -b tokens, logits of the last token only);
//       tokens/s = p / seconds.
//   tg: n decode steps of one token each, also from an empty cache (after
//       -d tokens of untimed context when given), logits every step;
//       tokens/s = n / seconds.
//
// Each repetition times one pp and one tg; one untimed warm-up pass of each
// runs first. Generation bandwidth = bytes of weights read per token (every
// weight except the token embedding, which is only gathered, plus the output
// matrix) x tokens/s.
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "backend/backend.h"
#include "base/alloc.h"
#include "base/error.h"
#include "base/timer.h"
#include "commands.h"
#include "engine/session.h"
#include "format/gguf.h"
#include "model/model.h"

enum { KV_BLOCK = 16, MAX_REPS = 1000 };

typedef struct bench_opts {
  const char *model;   // -m as given
  const char *path;    // resolved file
  int n_prompt;        // -p
  int n_gen;           // -n
  int depth;           // -d: untimed context before each test
  int n_threads;       // -t
  int n_batch;         // -b
  int reps;            // -r
  const char *device;  // --device
  bool json;
} bench_opts;

typedef struct bench_run {  // everything a measurement needs, sized once
  gguf_file *f;
  wk_model m;
  bool model_ok;
  wk_backend *be;
  int32_t *blocks;  // [n_blocks] block table: 0, 1, 2, ...
  int n_blocks;
  int32_t *tokens;  // [depth + max(p, n)] random ids
  float *logits;    // [vocab]
  uint64_t rng;
} bench_run;

typedef struct summary {
  double mean, stdev, median;
} summary;

static void usage(FILE *f) {
  fprintf(f,
          "usage: wick bench -m MODEL [options]\n\n"
          "Prompt-processing (pp) and generation (tg) speed in tokens/s, mean +- stdev over\n"
          "repetitions, like llama-bench: pp = one batch of P random token ids from an empty\n"
          "cache; tg = N one-token decode steps from an empty cache.\n\n"
          "options:\n"
          "  -m, --model MODEL     GGUF file, or smollm2 / gemma3\n"
          "  -p, --n-prompt P      prompt tokens (default 512; 0 skips pp)\n"
          "  -n, --n-gen N         generated tokens (default 128; 0 skips tg)\n"
          "  -d, --depth D         tokens already in the cache before each test (default 0)\n"
          "  -t, --threads T       CPU threads (default: online cores)\n"
          "  -b, --batch B         most tokens per forward pass (default 512; 1024 on CUDA)\n"
          "  -r, --reps R          repetitions (default 5)\n"
          "      --device DEV      cpu, cuda or cuda:N (default cpu)\n"
          "      --json            print one JSON object instead of the table\n");
}

static int parse(int argc, char **argv, bench_opts *o, int *done) {
  args a;
  args_init(&a, "wick bench", argc, argv);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  *o = (bench_opts){.n_prompt = 512, .n_gen = 128, .n_threads = ncpu > 0 ? (int)ncpu : 1,
                    .n_batch = 0, .reps = 5, .device = "cpu"};
  *done = 0;
  for (const char *f; (f = args_next(&a));) {
    int r;
    if (args_is(f, "-h", "--help")) {
      usage(stdout);
      *done = 1;
      return 0;
    } else if (args_is(f, "-m", "--model")) r = args_str(&a, f, &o->model);
    else if (args_is(f, "-p", "--n-prompt")) r = args_int(&a, f, 0, 1 << 20, &o->n_prompt);
    else if (args_is(f, "-n", "--n-gen")) r = args_int(&a, f, 0, 1 << 20, &o->n_gen);
    else if (args_is(f, "-d", "--depth")) r = args_int(&a, f, 0, 1 << 20, &o->depth);
    else if (args_is(f, "-t", "--threads")) r = args_int(&a, f, 1, 1024, &o->n_threads);
    else if (args_is(f, "-b", "--batch")) r = args_int(&a, f, 1, 1 << 16, &o->n_batch);
    else if (args_is(f, "-r", "--reps")) r = args_int(&a, f, 1, MAX_REPS, &o->reps);
    else if (args_is(f, NULL, "--device")) r = args_str(&a, f, &o->device);
    else if (args_is(f, NULL, "--json")) {
      o->json = true;
      r = 0;
    } else r = args_unknown(&a, f);
    if (r) return -1;
  }
  if (!o->model) return args_error(&a, "-m MODEL is required (a GGUF file, smollm2 or gemma3)");
  if (o->n_prompt == 0 && o->n_gen == 0)
    return args_error(&a, "nothing to measure: -p and -n are both 0");
  o->path = tool_model_path(o->model);
  return 0;
}

// ---- set-up ----

static int make_backend(const char *device, wk_backend **out, int *ordinal, wk_error *e) {
  *ordinal = 0;
  if (!strcmp(device, "cpu")) {
    *out = backend_cpu_create();
    return *out ? WICK_OK : wk_fail(e, WICK_ERR_NOMEM, "out of memory for the backend");
  }
  if (strncmp(device, "cuda", 4) || (device[4] && device[4] != ':'))
    return wk_fail(e, WICK_ERR_INVALID, "--device must be cpu, cuda or cuda:N, got '%s'", device);
#ifdef WICK_HAVE_CUDA
  if (device[4] == ':') {
    char *end;
    long n = strtol(device + 5, &end, 10);
    if (end == device + 5 || *end || n < 0 || n > 1024)
      return wk_fail(e, WICK_ERR_INVALID, "--device must be cpu, cuda or cuda:N, got '%s'",
                     device);
    *ordinal = (int)n;
  }
  int n = backend_cuda_device_count();
  if (*ordinal >= n)
    return wk_fail(e, WICK_ERR_DEVICE, "--device %s: %d CUDA device(s) present", device, n);
  *out = backend_cuda_create();
  return *out ? WICK_OK : wk_fail(e, WICK_ERR_NOMEM, "out of memory for the backend");
#else
  return wk_fail(e, WICK_ERR_UNSUPPORTED, "--device %s: this wick was built without CUDA", device);
#endif
}

static void run_close(bench_run *r) {
  if (r->be) r->be->destroy(r->be);
  if (r->model_ok) model_free(&r->m);
  gguf_close(r->f);
  wk_free(r->blocks);
  wk_free(r->tokens);
  wk_free(r->logits);
}

// Also settles o->n_batch when -b was not given (the sessions' default).
static int run_open(bench_run *r, bench_opts *o, wk_error *e) {
  memset(r, 0, sizeof *r);
  r->rng = 0x9e3779b97f4a7c15ull;
  int st = gguf_open(&r->f, o->path, e);
  if (!st) st = model_load(&r->m, r->f, e);
  if (st) return st;
  r->model_ok = true;
  int longest = o->n_prompt > o->n_gen ? o->n_prompt : o->n_gen;
  int64_t n_pos = (int64_t)o->depth + longest;
  if (n_pos > (1 << 22)) return wk_fail(e, WICK_ERR_RANGE, "depth + tokens is %" PRId64
                                        ", expected at most %d", n_pos, 1 << 22);
  r->n_blocks = (int)((n_pos + KV_BLOCK - 1) / KV_BLOCK);
  r->blocks = wk_calloc((size_t)r->n_blocks, sizeof *r->blocks);
  r->tokens = wk_calloc((size_t)n_pos, sizeof *r->tokens);
  r->logits = wk_calloc((size_t)r->m.vocab, sizeof *r->logits);
  if (!r->blocks || !r->tokens || !r->logits)
    return wk_fail(e, WICK_ERR_NOMEM, "out of memory for %" PRId64 " positions", n_pos);
  for (int i = 0; i < r->n_blocks; i++) r->blocks[i] = i;
  int ordinal;
  st = make_backend(o->device, &r->be, &ordinal, e);
  if (st) return st;
  if (o->n_batch == 0) o->n_batch = session_default_batch(r->be);
  int chunk = o->n_batch < o->n_prompt ? o->n_batch : o->n_prompt;
  if (o->depth && chunk < (o->n_batch < o->depth ? o->n_batch : o->depth))
    chunk = o->n_batch < o->depth ? o->n_batch : o->depth;
  wk_backend_params bp = {.max_batch_tokens = chunk > 0 ? chunk : 1, .max_seqs = 1,
                          .max_logits = 1, .n_threads = o->n_threads, .device = ordinal,
                          .exact = 0, .kv = {.block_size = KV_BLOCK, .n_blocks = r->n_blocks}};
  return r->be->prepare(r->be, &r->m, &bp, e);
}

// Fresh random token ids in [0, vocab) for positions [from, from + n).
static void fill_tokens(bench_run *r, int from, int n) {
  for (int i = 0; i < n; i++) {
    r->rng ^= r->rng << 13;
    r->rng ^= r->rng >> 7;
    r->rng ^= r->rng << 17;
    r->tokens[from + i] = (int32_t)(r->rng % (uint64_t)r->m.vocab);
  }
}

// Evaluates tokens [n_past, n_past + n) in passes of at most `batch` tokens.
static int eval(bench_run *r, int n_past, int n, int batch, wk_error *e) {
  for (int done = 0; done < n;) {
    int c = n - done < batch ? n - done : batch;
    wk_seq seq = {.blocks = r->blocks, .n_blocks = r->n_blocks, .n_past = n_past + done,
                  .n_new = c, .first = 0};
    int32_t last = c - 1;
    wk_batch b = {.tokens = r->tokens + n_past + done, .n_tokens = c, .seqs = &seq,
                  .n_seqs = 1, .logits_at = &last, .n_logits = 1};
    int st = r->be->forward(r->be, &b, r->logits, e);
    if (st) return st;
    done += c;
  }
  return WICK_OK;
}

// CPU seconds of the whole process (all threads): beside wall time, it tells
// how a run fared on a machine shared with other work.
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// One pp test: wall and CPU seconds to evaluate p tokens after `depth`
// untimed ones.
static int time_pp(bench_run *r, const bench_opts *o, double secs[2], wk_error *e) {
  fill_tokens(r, 0, o->depth + o->n_prompt);
  int st = eval(r, 0, o->depth, o->n_batch, e);
  if (st) return st;
  double t0 = wk_now(), c0 = cpu_now();
  st = eval(r, o->depth, o->n_prompt, o->n_batch, e);
  secs[0] = wk_now() - t0;
  secs[1] = cpu_now() - c0;
  return st;
}

// One tg test: wall and CPU seconds for n one-token steps after `depth`
// untimed tokens.
static int time_tg(bench_run *r, const bench_opts *o, int n, double secs[2], wk_error *e) {
  fill_tokens(r, 0, o->depth + n);
  int st = eval(r, 0, o->depth, o->n_batch, e);
  if (st) return st;
  double t0 = wk_now(), c0 = cpu_now();
  for (int i = 0; i < n && !st; i++) st = eval(r, o->depth + i, 1, 1, e);
  secs[0] = wk_now() - t0;
  secs[1] = cpu_now() - c0;
  return st;
}

// ---- figures ----

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static summary summarize(const double *v, int n) {
  summary s = {0};
  for (int i = 0; i < n; i++) s.mean += v[i];
  s.mean /= n;
  for (int i = 0; i < n; i++) s.stdev += (v[i] - s.mean) * (v[i] - s.mean);
  s.stdev = n > 1 ? sqrt(s.stdev / (n - 1)) : 0;
  double sorted[MAX_REPS];
  memcpy(sorted, v, (size_t)n * sizeof *v);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_double);
  s.median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  return s;
}

// Bytes of weights a decode step reads: all but the token embedding (only
// one row of it is gathered), plus the output matrix (counted once: when
// tied to the embedding it is that table, read whole).
static uint64_t bytes_per_token(const wk_model *m) {
  const uint64_t n = model_weight_bytes(m) - m->tok_embd.nbytes;
  return m->tied_output ? n + m->output.nbytes : n;
}

static uint64_t n_params(const gguf_file *f) {
  uint64_t n = 0;
  for (uint64_t i = 0; i < gguf_n_tensors(f); i++) {
    const gguf_tensor *t = gguf_tensor_at(f, i);
    uint64_t e = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) e *= (uint64_t)t->ne[d];
    n += e;
  }
  return n;
}

static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s ? s + 1 : p;
}

static void json_samples(const char *key, const double *v, int n, summary s, int tokens) {
  printf(",\"%s\":{\"tokens\":%d,\"mean\":%.3f,\"stdev\":%.3f,\"median\":%.3f,\"samples\":[", key,
         tokens, s.mean, s.stdev, s.median);
  for (int i = 0; i < n; i++) printf("%s%.3f", i ? "," : "", v[i]);
  printf("]}");
}

typedef struct results {
  double pp[MAX_REPS], tg[MAX_REPS];          // tokens/s of each repetition
  double pp_cpu[MAX_REPS], tg_cpu[MAX_REPS];  // tokens per CPU second (all threads)
  summary pps, tgs, pps_cpu, tgs_cpu;
  uint64_t file_bytes, params, tok_bytes, kv_bytes;
} results;

static void print_json(const bench_run *r, const bench_opts *o, const results *x) {
  printf("{\"model\":\"%s\",\"arch\":\"%s\",\"file_bytes\":%" PRIu64 ",\"params\":%" PRIu64
         ",\"backend\":\"%s\",\"threads\":%d,\"batch\":%d,\"depth\":%d,\"reps\":%d,"
         "\"kv_bytes\":%" PRIu64 ",\"weight_bytes_per_token\":%" PRIu64,
         base_name(o->path), r->m.arch_name, x->file_bytes, x->params, r->be->name, o->n_threads,
         o->n_batch, o->depth, o->reps, x->kv_bytes, x->tok_bytes);
  if (o->n_prompt) {
    json_samples("pp", x->pp, o->reps, x->pps, o->n_prompt);
    json_samples("pp_per_cpu_s", x->pp_cpu, o->reps, x->pps_cpu, o->n_prompt);
  }
  if (o->n_gen) {
    json_samples("tg", x->tg, o->reps, x->tgs, o->n_gen);
    json_samples("tg_per_cpu_s", x->tg_cpu, o->reps, x->tgs_cpu, o->n_gen);
    printf(",\"tg_gb_per_s\":%.3f", x->tgs.mean * (double)x->tok_bytes / 1e9);
  }
  printf("}\n");
}

static void print_table(const bench_run *r, const bench_opts *o, const results *x) {
  printf("| %-34s | %10s | %8s | %-7s | %7s | %12s | %18s | %8s |\n", "model", "size", "params",
         "backend", "threads", "test", "t/s", "GB/s");
  printf("| %.34s | ---------: | -------: | %.7s | ------: | -----------: | -----------------: "
         "| -------: |\n", "----------------------------------", "-------");
  char size[32], params[32], test[32], ts[48];
  snprintf(size, sizeof size, "%.2f MiB", (double)x->file_bytes / (1024.0 * 1024.0));
  snprintf(params, sizeof params, "%.2f M", (double)x->params / 1e6);
  const char *name = base_name(o->path);
  if (o->n_prompt) {
    snprintf(test, sizeof test, o->depth ? "pp%d @ d%d" : "pp%d", o->n_prompt, o->depth);
    snprintf(ts, sizeof ts, "%.2f ± %.2f", x->pps.mean, x->pps.stdev);
    printf("| %-34.34s | %10s | %8s | %-7s | %7d | %12s | %19s | %8s |\n", name, size, params,
           r->be->name, o->n_threads, test, ts, "");
  }
  if (o->n_gen) {
    char gb[32];
    snprintf(test, sizeof test, o->depth ? "tg%d @ d%d" : "tg%d", o->n_gen, o->depth);
    snprintf(ts, sizeof ts, "%.2f ± %.2f", x->tgs.mean, x->tgs.stdev);
    snprintf(gb, sizeof gb, "%.2f", x->tgs.mean * (double)x->tok_bytes / 1e9);
    printf("| %-34.34s | %10s | %8s | %-7s | %7d | %12s | %19s | %8s |\n", name, size, params,
           r->be->name, o->n_threads, test, ts, gb);
  }
}

static int measure(bench_run *r, const bench_opts *o, results *x, wk_error *e) {
  double secs[2];
  int warm_tg = o->n_gen < 4 ? o->n_gen : 4;
  int st = WICK_OK;
  if (o->n_prompt) st = time_pp(r, o, secs, e);  // warm-up: touches every weight page
  if (!st && warm_tg) st = time_tg(r, o, warm_tg, secs, e);
  for (int i = 0; i < o->reps && !st; i++) {
    if (o->n_prompt && !(st = time_pp(r, o, secs, e))) {
      x->pp[i] = o->n_prompt / secs[0];
      x->pp_cpu[i] = secs[1] > 0 ? o->n_prompt / secs[1] : 0;
    }
    if (!st && o->n_gen && !(st = time_tg(r, o, o->n_gen, secs, e))) {
      x->tg[i] = o->n_gen / secs[0];
      x->tg_cpu[i] = secs[1] > 0 ? o->n_gen / secs[1] : 0;
    }
  }
  if (st) return st;
  x->pps = summarize(x->pp, o->reps);
  x->tgs = summarize(x->tg, o->reps);
  x->pps_cpu = summarize(x->pp_cpu, o->reps);
  x->tgs_cpu = summarize(x->tg_cpu, o->reps);
  return WICK_OK;
}

int cmd_bench(int argc, char **argv) {
  bench_opts o;
  int done;
  if (parse(argc, argv, &o, &done)) return 2;
  if (done) return 0;
  wk_error e = {{0}};
  bench_run r;
  results *x = wk_calloc(1, sizeof *x);
  int st = x ? run_open(&r, &o, &e) : wk_fail(&e, WICK_ERR_NOMEM, "out of memory");
  if (!st) {
    struct stat sb;
    x->file_bytes = stat(o.path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
    x->params = n_params(r.f);
    x->tok_bytes = bytes_per_token(&r.m);
    if (r.be->memory) {
      wk_backend_mem mem;
      r.be->memory(r.be, &mem);
      x->kv_bytes = mem.kv;
    }
    st = measure(&r, &o, x, &e);
  }
  if (!st) {
    if (o.json) print_json(&r, &o, x);
    else print_table(&r, &o, x);
  } else {
    fprintf(stderr, "wick bench: %s\n", e.msg);
  }
  if (x) run_close(&r);
  wk_free(x);
  return st ? 1 : 0;
}

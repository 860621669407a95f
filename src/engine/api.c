// The public C API (include/wick.h) over the engine's session.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "base/timer.h"
#include "engine/session.h"
#include "format/gguf.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "wick.h"

struct wick_model {
  gguf_file *f;       // the mapped file (weights point into it)
  wk_model m;         // model description (valid when has_weights)
  bool has_weights;
  wk_tokenizer *tok;
  char arch[64];      // general.architecture
};

struct wick_session {
  wk_session *s;
  wick_model *model;
};

enum { KV_BLOCK = 16 };

static int put_err(char *err, size_t errlen, int st, const wk_error *e) {
  if (err && errlen) snprintf(err, errlen, "%s", st ? e->msg : "");
  return st;
}

static int fail(char *err, size_t errlen, int st, const char *msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
  return st;
}

// ---- models ----

wick_model_params wick_model_default_params(void) {
  return (wick_model_params){.tokenizer_only = false};
}

int wick_model_load(wick_model **out, const char *path, const wick_model_params *params,
                    char *err, size_t errlen) {
  wk_error e = {{0}};
  if (!out) return fail(err, errlen, WICK_ERR_INVALID, "wick_model_load: out is NULL");
  *out = NULL;
  if (!path || !path[0]) return fail(err, errlen, WICK_ERR_INVALID, "model path is empty");
  wick_model_params p = params ? *params : wick_model_default_params();
  wick_model *md = wk_calloc(1, sizeof *md);
  if (!md) return fail(err, errlen, WICK_ERR_NOMEM, "out of memory");
  int st = gguf_open(&md->f, path, &e);
  if (!st) {
    if (!gguf_get_str(md->f, "general.architecture", md->arch, sizeof md->arch))
      st = wk_fail(&e, WICK_ERR_FORMAT, "%s: no general.architecture: not a model file", path);
  }
  if (!st && !p.tokenizer_only) {
    st = model_load(&md->m, md->f, &e);
    md->has_weights = st == WICK_OK;
  }
  if (!st) st = tok_load(&md->tok, md->f, &e);
  if (st) {
    wick_model_free(md);
    return put_err(err, errlen, st, &e);
  }
  *out = md;
  return put_err(err, errlen, WICK_OK, &e);
}

void wick_model_free(wick_model *md) {
  if (!md) return;
  tok_free(md->tok);
  if (md->has_weights) model_free(&md->m);
  gguf_close(md->f);
  wk_free(md);
}

int wick_model_n_vocab(const wick_model *md) {
  return md->has_weights ? md->m.vocab : tok_n_vocab(md->tok);
}

int wick_model_n_ctx_train(const wick_model *md) {
  if (md->has_weights) return md->m.ctx_train;
  char key[96];
  snprintf(key, sizeof key, "%s.context_length", md->arch);
  return (int)gguf_get_int(md->f, key, 0);
}

const char *wick_model_arch(const wick_model *md) { return md->arch; }
int32_t wick_model_token_bos(const wick_model *md) { return tok_bos(md->tok); }

bool wick_model_add_bos(const wick_model *md) {
  int32_t with[8], without[8];
  int64_t a = tok_encode(md->tok, "a", 1, true, false, with, 8);
  int64_t b = tok_encode(md->tok, "a", 1, false, false, without, 8);
  return a > b && b >= 0 && a <= 8 && with[0] == tok_bos(md->tok) && with[0] >= 0;
}

int64_t wick_model_meta_str(const wick_model *md, const char *key, char *buf, size_t cap) {
  const gguf_kv *kv = gguf_get(md->f, key);
  gguf_str s;
  if (!kv || !gguf_kv_str(kv, &s)) return -1;
  if (buf && cap) {
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    memcpy(buf, s.ptr, n);
    buf[n] = 0;
  }
  return (int64_t)s.len;
}

int64_t wick_tokenize(const wick_model *md, const char *text, size_t len, bool add_special,
                      bool parse_special, int32_t *ids, int64_t cap) {
  if (!md || (!text && len)) return -WICK_ERR_INVALID;
  return tok_encode(md->tok, text ? text : "", len, add_special, parse_special, ids, cap);
}

int64_t wick_detokenize(const wick_model *md, const int32_t *ids, int64_t n, bool render_special,
                        char *buf, int64_t cap) {
  if (!md || (!ids && n) || n < 0) return -WICK_ERR_INVALID;
  return tok_decode(md->tok, ids, n, render_special, buf, cap);
}

// ---- sessions ----

wick_session_params wick_session_default_params(void) {
  return (wick_session_params){.n_ctx = 0, .n_batch = 0, .n_logits = 1, .n_threads = 0,
                               .device = NULL, .exact = false};
}

// Picks the backend for a device name; *ordinal is the GPU number.
static int pick_backend(const char *device, wk_backend **out, int *ordinal, wk_error *e) {
  *out = NULL;
  *ordinal = 0;
  bool want_cuda = false;
  if (!device) {
#ifdef WICK_HAVE_CUDA
    want_cuda = backend_cuda_device_count() > 0;
#endif
  } else if (!strcmp(device, "cpu")) {
    want_cuda = false;
  } else if (!strncmp(device, "cuda", 4) && (device[4] == 0 || device[4] == ':')) {
    want_cuda = true;
    if (device[4] == ':') {
      char *end;
      long n = strtol(device + 5, &end, 10);
      if (end == device + 5 || *end || n < 0 || n > 1024)
        return wk_fail(e, WICK_ERR_INVALID, "device must be cpu, cuda or cuda:N, got '%s'",
                       device);
      *ordinal = (int)n;
    }
  } else {
    return wk_fail(e, WICK_ERR_INVALID, "device must be cpu, cuda or cuda:N, got '%s'", device);
  }
  if (!want_cuda) {
    *out = backend_cpu_create();
    return *out ? WICK_OK : wk_fail(e, WICK_ERR_NOMEM, "out of memory for the CPU backend");
  }
#ifdef WICK_HAVE_CUDA
  int n = backend_cuda_device_count();
  if (n == 0) return wk_fail(e, WICK_ERR_DEVICE, "device '%s': no CUDA device found", device);
  if (*ordinal >= n)
    return wk_fail(e, WICK_ERR_DEVICE, "device '%s': only %d CUDA device(s) present", device, n);
  *out = backend_cuda_create();
  return *out ? WICK_OK : wk_fail(e, WICK_ERR_NOMEM, "out of memory for the CUDA backend");
#else
  return wk_fail(e, WICK_ERR_UNSUPPORTED, "device '%s': this wick was built without CUDA", device);
#endif
}

int wick_session_create(wick_session **out, wick_model *md, const wick_session_params *params,
                        char *err, size_t errlen) {
  wk_error e = {{0}};
  if (!out) return fail(err, errlen, WICK_ERR_INVALID, "wick_session_create: out is NULL");
  *out = NULL;
  if (!md) return fail(err, errlen, WICK_ERR_INVALID, "wick_session_create: model is NULL");
  if (!md->has_weights)
    return fail(err, errlen, WICK_ERR_INVALID, "the model was loaded without weights");
  wick_session_params p = params ? *params : wick_session_default_params();
  if (p.n_ctx < 0) return put_err(err, errlen, wk_fail(&e, WICK_ERR_INVALID,
                                  "n_ctx must be >= 0, got %d", p.n_ctx), &e);
  if (p.n_batch < 0) return put_err(err, errlen, wk_fail(&e, WICK_ERR_INVALID,
                                    "n_batch must be >= 0 (0: the device's default), got %d",
                                    p.n_batch), &e);
  if (p.n_logits < 1) return put_err(err, errlen, wk_fail(&e, WICK_ERR_INVALID,
                                     "n_logits must be >= 1, got %d", p.n_logits), &e);
  if (p.n_threads < 0) return put_err(err, errlen, wk_fail(&e, WICK_ERR_INVALID,
                                      "n_threads must be >= 0, got %d", p.n_threads), &e);
  session_config c = {.n_ctx = p.n_ctx, .n_batch = p.n_batch, .n_logits = p.n_logits,
                      .kv_block_size = KV_BLOCK, .n_threads = p.n_threads, .exact = p.exact};
  if (c.n_ctx == 0) c.n_ctx = md->m.ctx_train > 0 && md->m.ctx_train < 2048 ? md->m.ctx_train : 2048;
  if (c.n_threads == 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    c.n_threads = n > 0 ? (int)n : 1;
  }
  wick_session *ws = wk_calloc(1, sizeof *ws);
  if (!ws) return fail(err, errlen, WICK_ERR_NOMEM, "out of memory");
  wk_backend *be;
  int st = pick_backend(p.device, &be, &c.device, &e);
  bool was_gpu = !st && strcmp(be->name, "cpu") != 0;
  c.n_batch = p.n_batch > 0 ? p.n_batch : session_default_batch(be);
  if (!st) st = session_create(&ws->s, &md->m, md->tok, be, &c, &e);
  if (st == WICK_ERR_UNSUPPORTED && !p.device && was_gpu) {
    // The default device cannot run this model (e.g. a shape the GPU kernels
    // lack): the CPU can.
    be = backend_cpu_create();
    c.n_batch = p.n_batch > 0 ? p.n_batch : session_default_batch(be);
    st = session_create(&ws->s, &md->m, md->tok, be, &c, &e);
  }
  if (st) {
    wk_free(ws);
    return put_err(err, errlen, st, &e);
  }
  ws->model = md;
  *out = ws;
  return put_err(err, errlen, WICK_OK, &e);
}

void wick_session_free(wick_session *ws) {
  if (!ws) return;
  session_free(ws->s);
  wk_free(ws);
}

void wick_session_reset(wick_session *ws) { session_reset(ws->s); }
int wick_session_n_ctx(const wick_session *ws) { return session_n_ctx(ws->s); }
int wick_session_n_past(const wick_session *ws) { return session_n_past(ws->s); }
const char *wick_session_device(const wick_session *ws) { return session_device(ws->s); }
void wick_session_memory(const wick_session *ws, wick_memory *out) {
  wk_backend_mem m;
  session_memory(ws->s, &m);
  *out = (wick_memory){.weights = m.weights, .weights_host = m.weights_host, .kv_cache = m.kv,
                       .workspace = m.workspace};
}

wick_sample_params wick_sample_default_params(void) {
  return (wick_sample_params){.max_tokens = 128, .temperature = 0.8f, .top_k = 40,
                              .top_p = 0.95f, .min_p = 0.05f, .repeat_penalty = 1.0f,
                              .presence_penalty = 0.0f, .frequency_penalty = 0.0f,
                              .penalty_last_n = 64, .seed = WICK_SEED_RANDOM, .stop = NULL,
                              .n_stop = 0};
}

static bool in_range(float x, float lo, float hi) { return isfinite(x) && x >= lo && x <= hi; }

// Checks p and turns it into the engine's parameters.
static int gen_from(const wick_sample_params *p, const void *salt, gen_params *g, wk_error *e) {
  if (p->max_tokens < -1)
    return wk_fail(e, WICK_ERR_INVALID, "max_tokens must be >= -1, got %d", p->max_tokens);
  if (!in_range(p->temperature, 0, 1e6f))
    return wk_fail(e, WICK_ERR_INVALID, "temperature must be >= 0, got %g", p->temperature);
  if (p->top_k < 0) return wk_fail(e, WICK_ERR_INVALID, "top_k must be >= 0, got %d", p->top_k);
  if (!in_range(p->top_p, 0, 1))
    return wk_fail(e, WICK_ERR_INVALID, "top_p must be in [0, 1], got %g", p->top_p);
  if (!in_range(p->min_p, 0, 1))
    return wk_fail(e, WICK_ERR_INVALID, "min_p must be in [0, 1], got %g", p->min_p);
  if (!in_range(p->repeat_penalty, 1e-6f, 1e6f))
    return wk_fail(e, WICK_ERR_INVALID, "repeat_penalty must be > 0, got %g", p->repeat_penalty);
  if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
    return wk_fail(e, WICK_ERR_INVALID, "presence and frequency penalties must be finite");
  if (p->penalty_last_n < -1)
    return wk_fail(e, WICK_ERR_INVALID, "penalty_last_n must be >= -1, got %d", p->penalty_last_n);
  if (p->n_stop < 0 || (p->n_stop > 0 && !p->stop))
    return wk_fail(e, WICK_ERR_INVALID, "n_stop is %d but stop is NULL or n_stop negative",
                   p->n_stop);
  uint64_t seed = p->seed;
  if (seed == WICK_SEED_RANDOM) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)salt;
  }
  *g = (gen_params){
      .sp = {.temperature = p->temperature, .top_k = p->top_k, .top_p = p->top_p,
             .min_p = p->min_p, .repeat_penalty = p->repeat_penalty,
             .presence_penalty = p->presence_penalty, .frequency_penalty = p->frequency_penalty,
             .penalty_last_n = p->penalty_last_n, .seed = seed},
      .max_tokens = p->max_tokens,
      .stop = p->stop,
      .n_stop = p->n_stop,
  };
  return WICK_OK;
}

int wick_generate_tokens(wick_session *ws, const int32_t *tokens, int n_tokens,
                         const wick_sample_params *params, wick_text_fn fn, void *user, char *err,
                         size_t errlen) {
  wk_error e = {{0}};
  if (!ws || (!tokens && n_tokens))
    return fail(err, errlen, WICK_ERR_INVALID, "wick_generate: session or tokens is NULL");
  wick_sample_params p = params ? *params : wick_sample_default_params();
  gen_params g;
  int st = gen_from(&p, ws, &g, &e);
  if (!st) st = session_generate(ws->s, tokens, n_tokens, &g, fn, user, &e);
  return put_err(err, errlen, st, &e);
}

int wick_generate(wick_session *ws, const char *prompt, const wick_sample_params *params,
                  wick_text_fn fn, void *user, char *err, size_t errlen) {
  wk_error e = {{0}};
  if (!ws || !prompt)
    return fail(err, errlen, WICK_ERR_INVALID, "wick_generate: session or prompt is NULL");
  int n_ctx = session_n_ctx(ws->s), n_past = session_n_past(ws->s);
  int64_t cap = (int64_t)n_ctx + 1;
  int32_t *ids = wk_malloc((size_t)cap * sizeof *ids);
  if (!ids) return fail(err, errlen, WICK_ERR_NOMEM, "out of memory for the prompt's tokens");
  int64_t n = tok_encode(ws->model->tok, prompt, strlen(prompt), n_past == 0, true, ids, cap);
  int st;
  if (n < 0) {
    st = wk_fail(&e, (int)-n, "cannot tokenize the prompt (%s)", wick_status_str((int)-n));
  } else if (n + n_past > n_ctx) {
    st = n_past ? wk_fail(&e, WICK_ERR_RANGE, "prompt is %lld tokens and %d are already in the "
                          "context, context is %d", (long long)n, n_past, n_ctx)
                : wk_fail(&e, WICK_ERR_RANGE, "prompt is %lld tokens, context is %d",
                          (long long)n, n_ctx);
  } else {
    st = wick_generate_tokens(ws, ids, (int)n, params, fn, user, err, errlen);
    wk_free(ids);
    return st;
  }
  wk_free(ids);
  return put_err(err, errlen, st, &e);
}

int wick_score(wick_session *ws, const int32_t *tokens, int n_tokens, double *nll, char *err,
               size_t errlen) {
  wk_error e = {{0}};
  if (!ws || !tokens || (!nll && n_tokens > 1))
    return fail(err, errlen, WICK_ERR_INVALID, "wick_score: session, tokens or nll is NULL");
  return put_err(err, errlen, session_score(ws->s, tokens, n_tokens, nll, &e), &e);
}

void wick_session_stats(const wick_session *ws, wick_stats *out) {
  const session_stats *s = session_get_stats(ws->s);
  *out = (wick_stats){.prompt_tokens = s->prompt_tokens, .gen_tokens = s->gen_tokens,
                      .prompt_seconds = s->prompt_seconds, .gen_seconds = s->gen_seconds,
                      .n_past = session_n_past(ws->s), .stop = (wick_stop_reason)s->stop};
}

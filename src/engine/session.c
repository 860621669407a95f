#include "engine/session.h"

#include <math.h>
#include <string.h>

#include "base/alloc.h"
#include "base/timer.h"
#include "engine/kv.h"
#include "engine/stop.h"


struct wk_session {
  const wk_model *m;
  const wk_tokenizer *tok;
  wk_backend *be;
  int n_ctx, n_batch, n_rows;  // context, tokens per pass, logits rows per pass
  kv_pool *kv;
  kv_seq seq;
  int32_t *tokens;   // [n_ctx] context; [0, n_eval) are in the KV cache
  int n_eval;
  int32_t pending;   // generated token not yet evaluated, -1 if none
  float *logits;     // [n_rows * vocab]
  int32_t *rows;     // [n_rows] 0, 1, 2, ... (token indices whose logits are wanted)
  wk_sampler *smp;
  int32_t cand_ids[WK_TOPK_MAX];  // the best logits of the last row, when the backend
  float cand_vals[WK_TOPK_MAX];   // selects them (forward_topk)
  int n_cand;                     // 0: s->logits holds the whole row
  int topk_off;                   // the backend declined forward_topk
  char *text;        // [text_cap] streamed text of one token
  int text_cap;
  session_stats stats;
};

int session_default_batch(const wk_backend *be) {
  return be && strcmp(be->name, "cpu") != 0 ? 1024 : 512;
}

int session_create(wk_session **out, const wk_model *m, const wk_tokenizer *t, wk_backend *be,
                   const session_config *c, wk_error *err) {
  *out = NULL;
  if (!be) return wk_fail(err, WICK_ERR_NOMEM, "session: out of memory for the backend");
  if (c->n_ctx < 1 || c->n_batch < 1 || c->n_logits < 1 || c->kv_block_size < 1) {
    be->destroy(be);
    return wk_fail(err, WICK_ERR_INVALID,
                   "session: need n_ctx, n_batch, n_logits >= 1, got %d, %d, %d", c->n_ctx,
                   c->n_batch, c->n_logits);
  }
  wk_session *s = wk_calloc(1, sizeof *s);
  if (!s) {
    be->destroy(be);
    return wk_fail(err, WICK_ERR_NOMEM, "session: out of memory");
  }
  s->m = m;
  s->tok = t;
  s->be = be;
  s->n_ctx = c->n_ctx;
  s->n_batch = c->n_batch < c->n_ctx ? c->n_batch : c->n_ctx;
  s->n_rows = c->n_logits < s->n_batch ? c->n_logits : s->n_batch;
  s->pending = -1;
  int n_blocks = (int)(((int64_t)c->n_ctx + c->kv_block_size - 1) / c->kv_block_size);
  int st = kv_pool_create(&s->kv, n_blocks, c->kv_block_size, err);
  if (!st) st = kv_seq_init(&s->seq, s->kv, c->n_ctx, err);
  if (!st) st = sampler_create(&s->smp, m->vocab, err);
  if (st) {
    session_free(s);
    return st;
  }
  size_t row_floats;
  if (!wk_mul_ok((size_t)s->n_rows, (size_t)m->vocab, &row_floats)) row_floats = SIZE_MAX / 8;
  s->tokens = wk_calloc((size_t)c->n_ctx, sizeof *s->tokens);
  s->logits = wk_calloc(row_floats, sizeof *s->logits);
  s->rows = wk_calloc((size_t)s->n_rows, sizeof *s->rows);
  s->text_cap = tok_stream_min_cap(t) > 4096 ? tok_stream_min_cap(t) : 4096;
  s->text = wk_malloc((size_t)s->text_cap);
  if (!s->tokens || !s->logits || !s->rows || !s->text) {
    session_free(s);
    return wk_fail(err, WICK_ERR_NOMEM, "session: out of memory for a context of %d tokens",
                   c->n_ctx);
  }
  for (int i = 0; i < s->n_rows; i++) s->rows[i] = i;
  wk_backend_params bp = {
      .max_batch_tokens = s->n_batch,
      .max_seqs = 1,
      .max_logits = s->n_rows,
      .n_threads = c->n_threads,
      .device = c->device,
      .exact = c->exact,
      .kv = {.block_size = c->kv_block_size, .n_blocks = n_blocks},
  };
  st = be->prepare(be, m, &bp, err);
  if (st) {
    session_free(s);
    return st;
  }
  *out = s;
  return WICK_OK;
}

void session_free(wk_session *s) {
  if (!s) return;
  if (s->kv) kv_seq_free(s->kv, &s->seq);
  kv_pool_destroy(s->kv);
  sampler_free(s->smp);
  wk_free(s->tokens);
  wk_free(s->logits);
  wk_free(s->rows);
  wk_free(s->text);
  if (s->be) s->be->destroy(s->be);
  wk_free(s);
}

void session_reset(wk_session *s) {
  kv_seq_clear(s->kv, &s->seq);
  s->n_eval = 0;
  s->pending = -1;
}

int session_n_ctx(const wk_session *s) { return s->n_ctx; }
int session_n_past(const wk_session *s) { return s->n_eval + (s->pending >= 0); }
const char *session_device(const wk_session *s) { return s->be->name; }
void session_memory(const wk_session *s, wk_backend_mem *out) {
  *out = (wk_backend_mem){0};
  if (s->be->memory) s->be->memory(s->be, out);
}
const session_stats *session_get_stats(const wk_session *s) { return &s->stats; }

// Evaluates s->tokens[n_eval, n_eval + n) in one forward pass, asking for the
// logits of the chunk's tokens at[0, n_at): whole rows into s->logits, or
// with k > 0 the k best of the one row into s->cand_ids / s->cand_vals.
static int run_pass(wk_session *s, int n, const int32_t *at, int n_at, int k, wk_error *err) {
  int st = kv_seq_reserve(s->kv, &s->seq, s->n_eval + n, err);
  if (st) return st;
  wk_seq seq = {.blocks = s->seq.blocks, .n_blocks = s->seq.n_blocks, .n_past = s->n_eval,
                .n_new = n, .first = 0};
  wk_batch b = {.tokens = s->tokens + s->n_eval, .n_tokens = n, .seqs = &seq, .n_seqs = 1,
                .logits_at = at, .n_logits = n_at};
  s->n_cand = 0;
  st = k > 0 ? s->be->forward_topk(s->be, &b, k, s->cand_ids, s->cand_vals, err)
             : s->be->forward(s->be, &b, s->logits, err);
  if (st) return st;
  s->n_eval += n;
  s->n_cand = k;
  return WICK_OK;
}

static int forward_chunk(wk_session *s, int n, const int32_t *at, int n_at, wk_error *err) {
  return run_pass(s, n, at, n_at, 0, err);
}

// One decode step (the token at s->n_eval) whose row the sampler will read:
// through the backend's top-k selection when the sampling allows it (the
// draw is then exactly the one on the whole row), else a whole row.
static int forward_step(wk_session *s, wk_error *err) {
  int32_t zero = 0;
  int k = sampler_cands_needed(s->smp, s->n_eval + 1);
  if (!s->be->forward_topk || s->topk_off || k < 1 || k > WK_TOPK_MAX) k = 0;
  int st = run_pass(s, 1, &zero, 1, k, err);
  if (st != WICK_ERR_UNSUPPORTED || !k) return st;
  s->topk_off = 1;  // the backend declined before running anything
  return run_pass(s, 1, &zero, 1, 0, err);
}

// Puts the pending token and then src[0, n) after the context; fails when
// they do not fit. Returns the count placed through *placed.
static int place_input(wk_session *s, const int32_t *src, int n, int *placed, wk_error *err) {
  int extra = s->pending >= 0;
  if (n < 0 || (int64_t)s->n_eval + extra + n > s->n_ctx) {
    if (s->n_eval + extra == 0)
      return wk_fail(err, WICK_ERR_RANGE, "prompt is %d tokens, context is %d", n, s->n_ctx);
    return wk_fail(err, WICK_ERR_RANGE, "prompt is %d tokens and %d are already in the context, "
                   "context is %d", n, s->n_eval + extra, s->n_ctx);
  }
  int32_t vocab = s->m->vocab;
  for (int i = 0; i < n; i++)
    if (src[i] < 0 || src[i] >= vocab)
      return wk_fail(err, WICK_ERR_INVALID, "token %d at position %d is outside the vocabulary "
                     "[0, %d)", src[i], i, vocab);
  int32_t *dst = s->tokens + s->n_eval;
  if (extra) dst[0] = s->pending;
  if (n) memcpy(dst + extra, src, (size_t)n * sizeof *src);
  s->pending = -1;
  *placed = n + extra;
  return WICK_OK;
}

// Evaluates n placed tokens in chunks; the last row of logits is left in
// s->logits.
static int prefill(wk_session *s, int n, wk_error *err) {
  for (int done = 0; done < n;) {
    int c = n - done < s->n_batch ? n - done : s->n_batch;
    int32_t last = c - 1;
    int st = forward_chunk(s, c, &last, 1, err);
    if (st) return st;
    done += c;
  }
  return WICK_OK;
}

// Releases streamed text to the caller; returns 1 when the caller stops.
static int emit(session_text_fn fn, void *user, const char *text, size_t len) {
  return len && fn ? fn(user, text, len) != 0 : 0;
}

// Decodes one token into text, through the stop-string filter.
static int push_token(wk_session *s, tok_stream *ts, stop_buf *sb, int32_t id, session_text_fn fn,
                      void *user, int *stop, wk_error *err) {
  int n = tok_stream_push(ts, id, s->text, s->text_cap);
  if (n < 0) return wk_fail(err, -n, "detokenizer: cannot decode token %d", id);
  const char *o;
  size_t ol;
  int matched = stop_push(sb, s->text, (size_t)n, &o, &ol);
  if (emit(fn, user, o, ol)) *stop = WICK_STOP_CALLBACK;
  else if (matched) *stop = WICK_STOP_STRING;
  return WICK_OK;
}

static int generate_loop(wk_session *s, const gen_params *g, tok_stream *ts, stop_buf *sb,
                         session_text_fn fn, void *user, wk_error *err) {
  session_stats *stt = &s->stats;
  int st = WICK_OK;
  for (;;) {
    if (g->max_tokens >= 0 && stt->gen_tokens >= g->max_tokens) {
      stt->stop = WICK_STOP_MAX_TOKENS;
      break;
    }
    if (stt->gen_tokens > 0) {  // evaluate the previous token
      if (s->n_eval >= s->n_ctx) {
        stt->stop = WICK_STOP_CONTEXT;
        break;
      }
      s->tokens[s->n_eval] = s->pending;
      s->pending = -1;
      if ((st = forward_step(s, err))) return st;
    }
    int32_t id = s->n_cand ? sampler_sample_cands(s->smp, s->cand_ids, s->cand_vals, s->n_cand,
                                                  s->tokens, s->n_eval)
                           : sampler_sample(s->smp, s->logits, s->tokens, s->n_eval);
    stt->gen_tokens++;
    if (tok_is_eog(s->tok, id)) {
      stt->stop = WICK_STOP_EOG;  // the token is not kept in the context
      break;
    }
    s->pending = id;
    if ((st = push_token(s, ts, sb, id, fn, user, &stt->stop, err))) return st;
    if (stt->stop) return WICK_OK;  // callback or stop string: nothing more is released
  }
  int n = tok_stream_flush(ts, s->text, s->text_cap);
  if (n < 0) return wk_fail(err, -n, "detokenizer: cannot flush");
  const char *o;
  size_t ol;
  if (stop_push(sb, s->text, (size_t)n, &o, &ol)) {
    stt->stop = WICK_STOP_STRING;
    emit(fn, user, o, ol);
    return WICK_OK;
  }
  if (emit(fn, user, o, ol)) {
    stt->stop = WICK_STOP_CALLBACK;
    return WICK_OK;
  }
  stop_flush(sb, &o, &ol);
  emit(fn, user, o, ol);
  return WICK_OK;
}

int session_generate(wk_session *s, const int32_t *prompt, int n_prompt, const gen_params *g,
                     session_text_fn fn, void *user, wk_error *err) {
  memset(&s->stats, 0, sizeof s->stats);
  int placed;
  int st = place_input(s, prompt, n_prompt, &placed, err);
  if (st) return st;
  if (placed == 0) return wk_fail(err, WICK_ERR_INVALID, "empty prompt");
  stop_buf sb;
  st = stop_init(&sb, g->stop, g->n_stop, (size_t)s->text_cap, err);
  if (st) return st;
  double t0 = wk_now();
  st = prefill(s, placed, err);
  double t1 = wk_now();
  s->stats.prompt_tokens = placed;
  s->stats.prompt_seconds = t1 - t0;
  if (st) {
    stop_free(&sb);
    session_reset(s);  // the cache may hold part of the prompt
    return st;
  }
  sampler_set(s->smp, &g->sp);
  tok_stream ts;
  tok_stream_init(&ts, s->tok, false);
  ts.started = true;  // the text continues the prompt: no leading-space rule
  st = generate_loop(s, g, &ts, &sb, fn, user, err);
  s->stats.gen_seconds = wk_now() - t1;
  stop_free(&sb);
  return st;
}

// -log softmax(row)[target] in double precision.
static double nll_of(const float *row, int n, int32_t target) {
  double mx = row[0];
  for (int i = 1; i < n; i++)
    if (row[i] > mx) mx = row[i];
  double sum = 0;
  for (int i = 0; i < n; i++) sum += exp((double)row[i] - mx);
  return log(sum) + mx - (double)row[target];
}

int session_score(wk_session *s, const int32_t *tokens, int n, double *nll, wk_error *err) {
  memset(&s->stats, 0, sizeof s->stats);
  if (n < 1) return wk_fail(err, WICK_ERR_INVALID, "score: need at least 1 token, got %d", n);
  int offset = s->pending >= 0;  // a pending token goes first, unscored
  int placed;
  int st = place_input(s, tokens, n, &placed, err);
  if (st) return st;
  double t0 = wk_now();
  size_t vocab = (size_t)s->m->vocab;
  for (int done = 0; done < placed;) {
    int c = placed - done < s->n_rows ? placed - done : s->n_rows;
    if ((st = forward_chunk(s, c, s->rows, c, err))) {
      session_reset(s);
      return st;
    }
    for (int j = 0; j < c; j++) {
      int i = done + j - offset;  // row j predicts tokens[i + 1]
      if (i >= 0 && i + 1 < n) nll[i] = nll_of(s->logits + (size_t)j * vocab, (int)vocab, tokens[i + 1]);
    }
    done += c;
  }
  s->stats.prompt_tokens = placed;
  s->stats.prompt_seconds = wk_now() - t0;
  return WICK_OK;
}

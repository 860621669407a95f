// A session: one conversation on a backend. It owns the backend, the KV
// block table, the sampler and every buffer (sized at creation; nothing is
// allocated per token). Prompts are evaluated as one batch (in chunks of
// n_batch tokens), then tokens are generated one step at a time.
#ifndef WICK_ENGINE_SESSION_H
#define WICK_ENGINE_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/error.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

typedef struct session_config {
  int n_ctx;          // context length (tokens)
  int n_batch;        // most tokens per forward pass
  int n_logits;       // most rows of logits per forward pass (scoring)
  int kv_block_size;  // token slots per KV block
  int n_threads;      // CPU threads
  int device;         // GPU ordinal
  int exact;          // backend's exact f32 path
} session_config;

typedef struct gen_params {
  sampler_params sp;
  int max_tokens;           // < 0: until the context is full
  const char *const *stop;  // [n_stop]
  int n_stop;
} gen_params;

typedef struct session_stats {
  int prompt_tokens;
  int gen_tokens;
  double prompt_seconds;
  double gen_seconds;
  int stop;  // wick_stop_reason (WICK_STOP_*)
} session_stats;

typedef struct wk_session wk_session;

// Prompt tokens a forward pass when the caller names none: 512 on the CPU,
// 1024 on a GPU. On a GPU each pass of the GEMM path dequantizes every matrix
// again, so larger passes pay: 8B Q4_K_M, 4064-token prompt on the H200,
// 0.204 s in passes of 512 against 0.152 s in passes of 1024, for 0.11 GB
// more workspace (bench/RESULTS.md, session 9).
int session_default_batch(const wk_backend *be);

// Takes ownership of be (destroyed here on failure too).
int session_create(wk_session **out, const wk_model *m, const wk_tokenizer *t, wk_backend *be,
                   const session_config *c, wk_error *err);
void session_free(wk_session *s);
void session_reset(wk_session *s);
int session_n_ctx(const wk_session *s);
// Tokens in the context, counting a generated token not yet evaluated.
int session_n_past(const wk_session *s);
const char *session_device(const wk_session *s);
void session_memory(const wk_session *s, wk_backend_mem *out);  // zeros when not reported
const session_stats *session_get_stats(const wk_session *s);

typedef int (*session_text_fn)(void *user, const char *text, size_t len);

// Appends prompt and generates (see wick_generate).
int session_generate(wk_session *s, const int32_t *prompt, int n_prompt, const gen_params *g,
                     session_text_fn fn, void *user, wk_error *err);
// Appends tokens; nll[i] = -log p(tokens[i+1] | context) for i < n - 1.
int session_score(wk_session *s, const int32_t *tokens, int n, double *nll, wk_error *err);

#endif

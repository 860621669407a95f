// wick: LLM inference in C.
//
// Worked example (generate text from a prompt, streaming it as it comes;
// examples/generate.c is this program):
//
//   #include <stdio.h>
//   #include <wick.h>
//
//   static int on_text(void *user, const char *text, size_t len) {
//     (void)user;
//     fwrite(text, 1, len, stdout);
//     fflush(stdout);
//     return 0;  // non-zero stops generation
//   }
//
//   int main(void) {
//     wick_model *model = NULL;
//     wick_session *session = NULL;
//     char err[512];
//     if (wick_model_load(&model, "models/smollm2-135m-instruct-q4_1.gguf", NULL, err,
//                         sizeof err)) {
//       fprintf(stderr, "%s\n", err);
//       return 1;
//     }
//     wick_session_params sp = wick_session_default_params();
//     sp.n_ctx = 512;
//     if (wick_session_create(&session, model, &sp, err, sizeof err)) {
//       fprintf(stderr, "%s\n", err);
//       wick_model_free(model);
//       return 1;
//     }
//     wick_sample_params gp = wick_sample_default_params();
//     gp.max_tokens = 32;
//     gp.temperature = 0;  // greedy
//     int rc = wick_generate(session, "The capital of France is", &gp, on_text, NULL, err,
//                            sizeof err);
//     if (rc) fprintf(stderr, "%s\n", err);
//     wick_stats st;
//     wick_session_stats(session, &st);
//     fprintf(stderr, "\n%d tokens at %.1f tokens/s\n", st.gen_tokens,
//             st.gen_seconds > 0 ? st.gen_tokens / st.gen_seconds : 0.0);
//     wick_session_free(session);
//     wick_model_free(model);
//     return rc ? 1 : 0;
//   }
//
// Rules: every function that can fail returns a wick_status (0 = WICK_OK) and,
// when err is non-NULL, writes one NUL-terminated line saying what was
// expected and what was found. There is no global state: objects are
// independent, but one object must not be used from two threads at once.
// Every *_create / *_load has a *_free, which accepts NULL.
#ifndef WICK_H
#define WICK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wick_status {
  WICK_OK = 0,
  WICK_ERR_IO = 1,           // a file could not be opened, read or mapped
  WICK_ERR_FORMAT = 2,       // a file is malformed (truncated, corrupt, hostile)
  WICK_ERR_UNSUPPORTED = 3,  // valid, but not something wick can run
  WICK_ERR_NOMEM = 4,        // an allocation failed
  WICK_ERR_INVALID = 5,      // a bad argument (flag, parameter, prompt)
  WICK_ERR_RANGE = 6,        // too long for the context or a buffer
  WICK_ERR_DEVICE = 7,       // a GPU call failed
} wick_status;

// A short constant description of a status code.
const char *wick_status_str(int status);

// ---- models ----

// Weights, tokenizer and model description, loaded from a GGUF file. The file
// stays mapped while the model lives. A model may back several sessions.
typedef struct wick_model wick_model;

typedef struct wick_model_params {
  bool tokenizer_only;  // load the tokenizer and metadata only (no session possible)
} wick_model_params;

wick_model_params wick_model_default_params(void);

// params may be NULL (defaults). On failure *out is NULL.
int wick_model_load(wick_model **out, const char *path, const wick_model_params *params,
                    char *err, size_t errlen);
void wick_model_free(wick_model *model);

int wick_model_n_vocab(const wick_model *model);      // tokens in the vocabulary
int wick_model_n_ctx_train(const wick_model *model);  // context length it was trained for
const char *wick_model_arch(const wick_model *model); // "llama", "gemma3", ...
int32_t wick_model_token_bos(const wick_model *model); // -1 if none
bool wick_model_add_bos(const wick_model *model);      // the tokenizer prepends BOS
// Copies the string metadata value of key (e.g. "tokenizer.chat_template")
// into buf (NUL-terminated, truncated to cap). Returns its full length, or -1
// when absent or not a string.
int64_t wick_model_meta_str(const wick_model *model, const char *key, char *buf, size_t cap);

// Text -> token ids. add_special: add BOS/EOS as the model declares.
// parse_special: text of special tokens ("<|im_start|>") becomes those tokens;
// leave it false for untrusted text. Writes up to cap ids and returns the
// total count (call again with a bigger buffer when it exceeds cap), or a
// negative wick_status.
int64_t wick_tokenize(const wick_model *model, const char *text, size_t len, bool add_special,
                      bool parse_special, int32_t *ids, int64_t cap);
// Token ids -> text, NUL-terminated in buf. Returns the text's full length
// (may exceed cap - 1: call again) or a negative wick_status. Special tokens
// are rendered only when render_special.
int64_t wick_detokenize(const wick_model *model, const int32_t *ids, int64_t n,
                        bool render_special, char *buf, int64_t cap);

// ---- sessions ----

// One conversation with a model: a backend (CPU or GPU), its KV cache, a
// sampler. Each wick_generate appends its prompt after everything already in
// the session (earlier prompts and generated text) and only the new tokens
// are evaluated; wick_session_reset starts over.
typedef struct wick_session wick_session;

typedef struct wick_session_params {
  int n_ctx;           // context length in tokens; 0 = min(2048, model's trained context)
  int n_batch;         // most prompt tokens evaluated in one forward pass; 0 = the device's
                       // default (512 on the CPU, 1024 on CUDA)
  int n_logits;        // rows of logits one forward pass can return: wick_score
                       // evaluates up to min(n_batch, n_logits) tokens per pass (default 1)
  int n_threads;       // CPU threads; 0 = number of online cores
  const char *device;  // "cpu", "cuda", "cuda:N"; NULL = cuda when compiled in and a GPU
                       // is present and it can run the model, else cpu
  bool exact;          // keep activations in f32 (slower; for reference comparisons)
} wick_session_params;

wick_session_params wick_session_default_params(void);

int wick_session_create(wick_session **out, wick_model *model, const wick_session_params *params,
                        char *err, size_t errlen);
void wick_session_free(wick_session *session);
void wick_session_reset(wick_session *session);  // empties the context
int wick_session_n_ctx(const wick_session *session);
int wick_session_n_past(const wick_session *session);  // tokens in the context now
const char *wick_session_device(const wick_session *session);  // "cpu", "cuda"

// Memory the session's backend holds, in bytes: weights on its device (for
// the CPU, the model's weights), weights a GPU backend keeps in pinned host
// memory (an untied token-embedding table), the KV cache and the workspace.
typedef struct wick_memory {
  uint64_t weights, weights_host, kv_cache, workspace;
} wick_memory;

void wick_session_memory(const wick_session *session, wick_memory *out);

#define WICK_SEED_RANDOM UINT64_MAX

typedef struct wick_sample_params {
  int max_tokens;           // most tokens to generate (default 128); -1 = until the context is full
  float temperature;        // 0 = greedy (argmax); default 0.8
  int top_k;                // keep the k most likely tokens; 0 = off (default 40)
  float top_p;              // nucleus: smallest set with probability >= top_p; 1 = off (0.95)
  float min_p;              // drop tokens below min_p * p(most likely); 0 = off (0.05)
  float repeat_penalty;     // divide positive / multiply negative logits of recent tokens (1 = off)
  float presence_penalty;   // subtract from logits of recent tokens (0 = off)
  float frequency_penalty;  // subtract count * this from logits of recent tokens (0 = off)
  int penalty_last_n;       // recent tokens the penalties look at (64); 0 = none, -1 = context
  uint64_t seed;            // same seed, same text; WICK_SEED_RANDOM (default) = from the clock
  const char *const *stop;  // n_stop strings; generation ends before the first one appears
  int n_stop;               // (the stop string itself is not returned)
} wick_sample_params;

wick_sample_params wick_sample_default_params(void);

// Receives generated text as it is produced (whole UTF-8 characters). Return
// non-zero to stop generation.
typedef int (*wick_text_fn)(void *user, const char *text, size_t len);

// Tokenizes prompt (special-token text is parsed; BOS is added as the model
// declares when the session is empty), evaluates it, then generates until an
// end-of-generation token, max_tokens, a stop string, a non-zero return of
// fn, or a full context. A prompt that does not fit in the context fails
// with WICK_ERR_RANGE ("prompt is N tokens, context is C"). fn may be NULL.
int wick_generate(wick_session *session, const char *prompt, const wick_sample_params *params,
                  wick_text_fn fn, void *user, char *err, size_t errlen);
// Same with a prompt already tokenized (nothing is added to it).
int wick_generate_tokens(wick_session *session, const int32_t *tokens, int n_tokens,
                         const wick_sample_params *params, wick_text_fn fn, void *user, char *err,
                         size_t errlen);

// Appends tokens to the session and scores them: nll[i] = -log p(tokens[i+1] |
// everything before it), for i in [0, n_tokens - 1), computed in double
// precision. nll must hold n_tokens - 1 values.
int wick_score(wick_session *session, const int32_t *tokens, int n_tokens, double *nll, char *err,
               size_t errlen);

typedef enum wick_stop_reason {
  WICK_STOP_NONE = 0,      // nothing generated yet
  WICK_STOP_EOG = 1,       // the model produced an end-of-generation token
  WICK_STOP_MAX_TOKENS = 2,
  WICK_STOP_STRING = 3,    // a stop string appeared
  WICK_STOP_CALLBACK = 4,  // the callback returned non-zero
  WICK_STOP_CONTEXT = 5,   // the context is full
} wick_stop_reason;

// Figures of the last wick_generate / wick_score call.
typedef struct wick_stats {
  int prompt_tokens;      // tokens evaluated before generation
  int gen_tokens;         // tokens sampled (the end-of-generation token included)
  double prompt_seconds;  // time to evaluate the prompt
  double gen_seconds;     // time from the end of the prompt to the last token
  int n_past;             // tokens in the context afterwards
  wick_stop_reason stop;  // why generation ended
} wick_stats;

void wick_session_stats(const wick_session *session, wick_stats *out);

#ifdef __cplusplus
}
#endif

#endif

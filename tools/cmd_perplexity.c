// wick perplexity: perplexity of a text file.
//
// Definition (kept simple so an independent implementation can match it):
// tokens = encode(whole text, no BOS/EOS, special-token text not parsed);
// consecutive chunks of L = CTX tokens, a final partial chunk dropped; each
// chunk's input is [BOS] (when the tokenizer adds BOS) + its L tokens,
// evaluated from an empty context; every input token with a preceding token
// is scored by -log p(token | prefix) (log-softmax in double precision);
// perplexity = exp(mean over all scored tokens of all chunks).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "wick.h"

static void usage(FILE *f) {
  fprintf(f, "usage: wick perplexity -m MODEL -f FILE [options]\n\n"
             "options:\n"
             "  -f, --file FILE          text to score\n"
             "  -c, --ctx-size N         tokens per chunk (default 512)\n"
             "  --chunks N               score only the first N chunks (default all)\n%s",
          args_common_help(false));
}

// Reads a whole file; NULL (error printed) on failure.
static char *read_file(const args *a, const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    args_error(a, "cannot open '%s': %m", path);
    return NULL;
  }
  char *buf = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n + 65536 + 1 > cap) {
      cap = cap ? cap * 2 : 1 << 20;
      char *nb = realloc(buf, cap);
      if (!nb) {
        free(buf);
        fclose(f);
        args_error(a, "out of memory reading '%s'", path);
        return NULL;
      }
      buf = nb;
    }
    size_t r = fread(buf + n, 1, 65536, f);
    n += r;
    if (r < 65536) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    args_error(a, "cannot read '%s'", path);
    return NULL;
  }
  buf[n] = 0;
  *len = n;
  return buf;
}

typedef struct ppl_job {
  const int32_t *toks;  // [n_chunks * L] text tokens
  int L, n_chunks;
  int32_t bos;          // -1: no BOS
  int32_t *in;          // [L + 1] one chunk's input
  double *nll;          // [L] its scores
} ppl_job;

static int score_chunks(const args *a, wick_session *s, const ppl_job *j) {
  double sum = 0;
  long count = 0;
  char err[512];
  for (int c = 0; c < j->n_chunks; c++) {
    int n = 0;
    if (j->bos >= 0) j->in[n++] = j->bos;
    memcpy(j->in + n, j->toks + (size_t)c * j->L, (size_t)j->L * sizeof *j->in);
    n += j->L;
    wick_session_reset(s);
    if (wick_score(s, j->in, n, j->nll, err, sizeof err)) return args_error(a, "%s", err);
    for (int i = 0; i < n - 1; i++) sum += j->nll[i];
    count += n - 1;
    wick_stats st;
    wick_session_stats(s, &st);
    fprintf(stderr, "[%d/%d] %.4f (%.1f tokens/s)\n", c + 1, j->n_chunks, exp(sum / count),
            st.prompt_seconds > 0 ? st.prompt_tokens / st.prompt_seconds : 0.0);
  }
  printf("perplexity: %.4f\n", exp(sum / count));
  return 0;
}

int cmd_perplexity(int argc, char **argv) {
  args a;
  args_init(&a, "wick perplexity", argc, argv);
  tool_opts o;
  args_opts_init(&o, false);
  const char *file = NULL;
  int ctx = 512, max_chunks = 0;
  for (const char *f; (f = args_next(&a));) {
    if (args_is(f, "-h", "--help")) {
      usage(stdout);
      return 0;
    }
    if (args_is(f, "-c", "--ctx-size")) {
      if (args_int(&a, f, 2, 1L << 20, &ctx)) return 2;
      continue;
    }
    int r = args_common(&a, f, &o);
    if (r < 0) return 2;
    if (r > 0) continue;
    if (args_is(f, "-f", "--file")) {
      if (args_str(&a, f, &file)) return 2;
    } else if (args_is(f, NULL, "--chunks")) {
      if (args_int(&a, f, 1, 1L << 30, &max_chunks)) return 2;
    } else {
      args_unknown(&a, f);
      return 2;
    }
  }
  if (!o.model) {
    args_error(&a, "-m MODEL is required (a GGUF file, smollm2 or gemma3)");
    return 2;
  }
  if (!file) {
    args_error(&a, "-f FILE is required");
    return 2;
  }
  size_t len;
  char *text = read_file(&a, file, &len);
  if (!text) return 1;
  char err[512];
  wick_model *model = NULL;
  wick_session *session = NULL;
  int32_t *toks = NULL, *in = NULL;
  double *nll = NULL;
  int rc = 1;
  if (wick_model_load(&model, tool_model_path(o.model), NULL, err, sizeof err)) {
    args_error(&a, "%s", err);
    goto done;
  }
  // At most one token per byte (byte fallback), so len + 8 ids always suffice.
  toks = malloc((len + 8) * sizeof *toks);
  if (!toks) {
    args_error(&a, "out of memory");
    goto done;
  }
  int64_t n_tok = wick_tokenize(model, text, len, false, false, toks, (int64_t)len + 8);
  if (n_tok < 0 || n_tok > (int64_t)len + 8) {
    args_error(&a, "cannot tokenize '%s' (%s)", file,
               n_tok < 0 ? wick_status_str((int)-n_tok) : "too many tokens");
    goto done;
  }
  if (n_tok < ctx) {
    args_error(&a, "'%s' is %lld tokens, one chunk needs %d (-c)", file, (long long)n_tok, ctx);
    goto done;
  }
  ppl_job j = {.toks = toks, .L = ctx, .n_chunks = (int)(n_tok / ctx), .bos = -1};
  if (max_chunks && max_chunks < j.n_chunks) j.n_chunks = max_chunks;
  if (wick_model_add_bos(model)) j.bos = wick_model_token_bos(model);
  // One forward pass per chunk when the logits fit in 256 MiB.
  int n_in = ctx + (j.bos >= 0);
  long rows = (256L << 20) / (4L * wick_model_n_vocab(model));
  o.sp.n_ctx = n_in;
  if (o.sp.n_batch == wick_session_default_params().n_batch) o.sp.n_batch = n_in;
  o.sp.n_logits = rows < 1 ? 1 : rows < o.sp.n_batch ? (int)rows : o.sp.n_batch;
  if (wick_session_create(&session, model, &o.sp, err, sizeof err)) {
    args_error(&a, "%s", err);
    goto done;
  }
  in = malloc((size_t)n_in * sizeof *in);
  nll = malloc((size_t)n_in * sizeof *nll);
  if (!in || !nll) {
    args_error(&a, "out of memory");
    goto done;
  }
  j.in = in;
  j.nll = nll;
  fprintf(stderr, "%s: %lld tokens, %d chunks of %d (+%s BOS)\n", file, (long long)n_tok,
          j.n_chunks, ctx, j.bos >= 0 ? "" : "no ");
  rc = score_chunks(&a, session, &j) ? 1 : 0;
done:
  free(nll);
  free(in);
  free(toks);
  wick_session_free(session);
  wick_model_free(model);
  free(text);
  return rc;
}

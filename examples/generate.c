// The worked example at the top of include/wick.h: load SmolLM2, generate 32
// tokens greedily after a prompt, stream them to stdout. Run from the repo root.
#include <stdio.h>
#include <wick.h>

static int on_text(void *user, const char *text, size_t len) {
  (void)user;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return 0;  // non-zero stops generation
}

int main(void) {
  wick_model *model = NULL;
  wick_session *session = NULL;
  char err[512];
  if (wick_model_load(&model, "models/smollm2-135m-instruct-q4_1.gguf", NULL, err,
                      sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  wick_session_params sp = wick_session_default_params();
  sp.n_ctx = 512;
  if (wick_session_create(&session, model, &sp, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    wick_model_free(model);
    return 1;
  }
  wick_sample_params gp = wick_sample_default_params();
  gp.max_tokens = 32;
  gp.temperature = 0;  // greedy
  int rc = wick_generate(session, "The capital of France is", &gp, on_text, NULL, err,
                         sizeof err);
  if (rc) fprintf(stderr, "%s\n", err);
  wick_stats st;
  wick_session_stats(session, &st);
  fprintf(stderr, "\n%d tokens at %.1f tokens/s\n", st.gen_tokens,
          st.gen_seconds > 0 ? st.gen_tokens / st.gen_seconds : 0.0);
  wick_session_free(session);
  wick_model_free(model);
  return rc ? 1 : 0;
}

// wick run: generate text from a raw prompt (no chat template), streaming it
// to stdout; speed figures go to stderr.
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "wick.h"

static void usage(FILE *f) {
  fprintf(f, "usage: wick run -m MODEL -p PROMPT [options]\n\n"
             "Generates text after PROMPT (used as is, BOS added as the model declares).\n\n"
             "options:\n  -p, --prompt PROMPT      the prompt\n%s",
          args_common_help(true));
}

static double rate(int n, double s) { return s > 0 ? n / s : 0; }

int cmd_run(int argc, char **argv) {
  args a;
  args_init(&a, "wick run", argc, argv);
  tool_opts o;
  args_opts_init(&o, true);
  const char *prompt = NULL;
  for (const char *f; (f = args_next(&a));) {
    if (args_is(f, "-h", "--help")) {
      usage(stdout);
      return 0;
    }
    int r = args_common(&a, f, &o);
    if (r < 0) return 2;
    if (r > 0) continue;
    if (args_is(f, "-p", "--prompt")) {
      if (args_str(&a, f, &prompt)) return 2;
      continue;
    }
    args_unknown(&a, f);
    return 2;
  }
  if (!o.model) {
    args_error(&a, "-m MODEL is required (a GGUF file, smollm2 or gemma3)");
    return 2;
  }
  if (!prompt) {
    args_error(&a, "-p PROMPT is required");
    return 2;
  }
  wick_model *model;
  wick_session *session;
  if (args_open(&a, &o, &model, &session)) return 1;
  char err[512];
  int rc = wick_generate(session, prompt, &o.gp, args_print_text, NULL, err, sizeof err);
  if (rc) {
    fflush(stdout);
    args_error(&a, "%s", err);
  } else {
    wick_stats st;
    wick_session_stats(session, &st);
    if (isatty(STDOUT_FILENO)) fputc('\n', stdout);
    fflush(stdout);
    fprintf(stderr,
            "prompt: %d tokens in %.3f s (%.1f tokens/s); generation: %d tokens in %.3f s "
            "(%.1f tokens/s) [%s, %d ctx]\n",
            st.prompt_tokens, st.prompt_seconds, rate(st.prompt_tokens, st.prompt_seconds),
            st.gen_tokens, st.gen_seconds, rate(st.gen_tokens, st.gen_seconds),
            wick_session_device(session), wick_session_n_ctx(session));
  }
  wick_session_free(session);
  wick_model_free(model);
  return rc ? 1 : 0;
}

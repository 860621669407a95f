// wick chat: interactive chat with the model's chat template. Each line of
// stdin is one user message (EOF ends). The KV cache is kept across turns:
// only the new turn's tokens are evaluated. Template text is tokenized with
// special tokens parsed; user and system text is not (no injection).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "wick.h"

typedef enum { TPL_CHATML, TPL_GEMMA } tpl_kind;

typedef struct chat {
  const args *a;
  wick_model *model;
  wick_session *session;
  tpl_kind kind;
  char sys_default[512];  // ChatML: system prompt the template adds when none is given
  int32_t *ids;           // [cap] tokens of the turn being built
  int n, cap;
} chat;

// Appends the tokens of text; special: parse special-token text.
static int add(chat *c, const char *text, bool special) {
  int64_t n = wick_tokenize(c->model, text, strlen(text), false, special, c->ids + c->n,
                            c->cap - c->n);
  if (n < 0) return args_error(c->a, "cannot tokenize the message (%s)", wick_status_str((int)-n));
  if (n > c->cap - c->n)
    return args_error(c->a, "prompt is over %d tokens, context is %d", c->cap,
                      wick_session_n_ctx(c->session));
  c->n += (int)n;
  return 0;
}

// Reads the template: ChatML or Gemma's turns.
static int pick_template_in(chat *c, char *tpl, size_t cap) {
  int64_t n = wick_model_meta_str(c->model, "tokenizer.chat_template", tpl, cap);
  c->sys_default[0] = 0;
  if (n >= 0 && strstr(tpl, "<|im_start|>")) {
    c->kind = TPL_CHATML;
    // A default system message written into the template, e.g. SmolLM2's.
    const char *k = "<|im_start|>system\n", *p = strstr(tpl, k);
    if (p) {
      p += strlen(k);
      const char *e = strstr(p, "<|im_end|>");
      if (e && (size_t)(e - p) < sizeof c->sys_default && !memchr(p, '{', (size_t)(e - p))) {
        memcpy(c->sys_default, p, (size_t)(e - p));
        c->sys_default[e - p] = 0;
      }
    }
    return 0;
  }
  if ((n >= 0 && strstr(tpl, "<start_of_turn>")) || !strcmp(wick_model_arch(c->model), "gemma3")) {
    c->kind = TPL_GEMMA;
    return 0;
  }
  int32_t probe[4];
  if (wick_tokenize(c->model, "<|im_start|>", 12, false, true, probe, 4) == 1) {
    c->kind = TPL_CHATML;
    return 0;
  }
  return args_error(c->a, "no chat template known for this model (architecture %s)",
                    wick_model_arch(c->model));
}

static int pick_template(chat *c) {
  size_t cap = 1 << 16;
  char *tpl = malloc(cap);
  if (!tpl) return args_error(c->a, "out of memory");
  int rc = pick_template_in(c, tpl, cap);
  free(tpl);
  return rc;
}

// Builds the tokens of one user turn (closing the previous reply first).
static int render(chat *c, const char *system, const char *msg, bool first) {
  c->n = 0;
  if (c->kind == TPL_CHATML) {
    if (!first && add(c, "<|im_end|>\n", true)) return -1;
    const char *sys = system ? system : c->sys_default[0] ? c->sys_default : NULL;
    if (first && sys) {
      if (add(c, "<|im_start|>system\n", true) || add(c, sys, false) ||
          add(c, "<|im_end|>\n", true))
        return -1;
    }
    return add(c, "<|im_start|>user\n", true) || add(c, msg, false) ||
                   add(c, "<|im_end|>\n<|im_start|>assistant\n", true)
               ? -1
               : 0;
  }
  if (first) {
    int32_t bos = wick_model_token_bos(c->model);
    if (bos >= 0 && c->cap > 0) c->ids[c->n++] = bos;
  } else if (add(c, "<end_of_turn>\n", true)) {
    return -1;
  }
  if (add(c, "<start_of_turn>user\n", true)) return -1;
  if (first && system && (add(c, system, false) || add(c, "\n\n", false))) return -1;
  return add(c, msg, false) || add(c, "<end_of_turn>\n<start_of_turn>model\n", true) ? -1 : 0;
}

static void usage(FILE *f) {
  fprintf(f, "usage: wick chat -m MODEL [--system TEXT] [options]\n\n"
             "Reads one user message per line from stdin (EOF ends) and streams replies.\n\n"
             "options:\n  --system TEXT            system message\n"
             "  --verbose-prompt         print each turn's token ids on stderr\n%s",
          args_common_help(true));
}

static int chat_loop(chat *c, const char *system, const wick_sample_params *gp, bool verbose) {
  char *line = NULL;
  size_t line_cap = 0;
  bool first = true;
  int rc = 0;
  for (;;) {
    ssize_t len = getline(&line, &line_cap, stdin);
    if (len < 0) break;
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
    if (len == 0) continue;
    if (render(c, system, line, first)) {
      rc = 1;
      break;
    }
    if (verbose) {  // the turn's token ids, for checking the template
      fprintf(stderr, "prompt tokens:");
      for (int i = 0; i < c->n; i++) fprintf(stderr, " %d", (int)c->ids[i]);
      fputc('\n', stderr);
    }
    char err[512];
    if (wick_generate_tokens(c->session, c->ids, c->n, gp, args_print_text, NULL, err, sizeof err)) {
      fputc('\n', stdout);
      fflush(stdout);
      args_error(c->a, "%s", err);
      rc = 1;
      break;
    }
    fputc('\n', stdout);
    fflush(stdout);
    first = false;
  }
  free(line);
  return rc;
}

int cmd_chat(int argc, char **argv) {
  args a;
  args_init(&a, "wick chat", argc, argv);
  tool_opts o;
  args_opts_init(&o, true);
  o.gp.max_tokens = 512;
  const char *system = NULL;
  bool verbose = false;
  for (const char *f; (f = args_next(&a));) {
    if (args_is(f, "-h", "--help")) {
      usage(stdout);
      return 0;
    }
    int r = args_common(&a, f, &o);
    if (r < 0) return 2;
    if (r > 0) continue;
    if (args_is(f, NULL, "--system")) {
      if (args_str(&a, f, &system)) return 2;
      continue;
    }
    if (args_is(f, NULL, "--verbose-prompt")) {
      verbose = true;
      continue;
    }
    args_unknown(&a, f);
    return 2;
  }
  if (!o.model) {
    args_error(&a, "-m MODEL is required (a GGUF file, smollm2 or gemma3)");
    return 2;
  }
  chat c = {.a = &a};
  if (args_open(&a, &o, &c.model, &c.session)) return 1;
  int rc = 1;
  if (!pick_template(&c)) {
    c.cap = wick_session_n_ctx(c.session);
    c.ids = malloc((size_t)c.cap * sizeof *c.ids);
    if (!c.ids) args_error(&a, "out of memory");
    else rc = chat_loop(&c, system, &o.gp, verbose);
  }
  free(c.ids);
  wick_session_free(c.session);
  wick_model_free(c.model);
  return rc;
}

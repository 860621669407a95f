#include "args.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/timer.h"
#include "commands.h"

void args_init(args *a, const char *cmd, int argc, char **argv) {
  a->cmd = cmd;
  a->argc = argc;
  a->argv = argv;
  a->i = 1;
}

const char *args_next(args *a) { return a->i < a->argc ? a->argv[a->i++] : NULL; }

bool args_is(const char *flag, const char *s, const char *l) {
  return (s && !strcmp(flag, s)) || (l && !strcmp(flag, l));
}

int args_error(const args *a, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (char *p = msg; *p; p++)
    if (*p == '\n') *p = ' ';  // one line, whatever the message holds
  fprintf(stderr, "%s: %s\n", a->cmd, msg);
  return -1;
}

int args_unknown(const args *a, const char *flag) {
  if (flag[0] == '-') return args_error(a, "unknown flag '%s' (see %s --help)", flag, a->cmd);
  return args_error(a, "unexpected argument '%s' (see %s --help)", flag, a->cmd);
}

int args_str(args *a, const char *flag, const char **out) {
  if (a->i >= a->argc) return args_error(a, "%s needs a value", flag);
  *out = a->argv[a->i++];
  return 0;
}

int args_int(args *a, const char *flag, long lo, long hi, int *out) {
  const char *s = NULL;
  if (args_str(a, flag, &s)) return -1;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno == ERANGE)
    return args_error(a, "%s expects an integer, got '%s'", flag, s);
  if (v < lo || v > hi) return args_error(a, "%s must be in [%ld, %ld], got %s", flag, lo, hi, s);
  *out = (int)v;
  return 0;
}

int args_float(args *a, const char *flag, double lo, double hi, bool lo_open, float *out) {
  const char *s = NULL;
  if (args_str(a, flag, &s)) return -1;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || *end || errno == ERANGE || !isfinite(v))
    return args_error(a, "%s expects a number, got '%s'", flag, s);
  if ((lo_open ? v <= lo : v < lo) || v > hi)
    return args_error(a, "%s must be in %c%g, %g], got %s", flag, lo_open ? '(' : '[', lo, hi, s);
  *out = (float)v;
  return 0;
}

int args_seed(args *a, const char *flag, uint64_t *out) {
  const char *s = NULL;
  if (args_str(a, flag, &s)) return -1;
  if (!strcmp(s, "-1")) {
    *out = WICK_SEED_RANDOM;
    return 0;
  }
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || *end || errno == ERANGE || s[0] == '-' || v == WICK_SEED_RANDOM)
    return args_error(a, "%s expects a non-negative integer or -1, got '%s'", flag, s);
  *out = v;
  return 0;
}

void args_opts_init(tool_opts *o, bool sampling) {
  memset(o, 0, sizeof *o);
  o->sp = wick_session_default_params();
  o->gp = wick_sample_default_params();
  o->sampling = sampling;
}

static int sampling_flag(args *a, const char *f, tool_opts *o) {
  wick_sample_params *g = &o->gp;
  if (args_is(f, "-n", "--n-predict")) return args_int(a, f, -1, 1L << 30, &g->max_tokens);
  if (args_is(f, NULL, "--temp")) return args_float(a, f, 0, 1000, false, &g->temperature);
  if (args_is(f, NULL, "--top-k")) return args_int(a, f, 0, 1L << 30, &g->top_k);
  if (args_is(f, NULL, "--top-p")) return args_float(a, f, 0, 1, false, &g->top_p);
  if (args_is(f, NULL, "--min-p")) return args_float(a, f, 0, 1, false, &g->min_p);
  if (args_is(f, "-s", "--seed")) return args_seed(a, f, &g->seed);
  if (args_is(f, NULL, "--repeat-penalty"))
    return args_float(a, f, 0, 1000, true, &g->repeat_penalty);
  if (args_is(f, NULL, "--repeat-last-n")) return args_int(a, f, -1, 1L << 30, &g->penalty_last_n);
  if (args_is(f, NULL, "--presence-penalty"))
    return args_float(a, f, -100, 100, false, &g->presence_penalty);
  if (args_is(f, NULL, "--frequency-penalty"))
    return args_float(a, f, -100, 100, false, &g->frequency_penalty);
  if (args_is(f, NULL, "--stop")) {
    const char *s = NULL;
    if (args_str(a, f, &s)) return -1;
    if (!s[0]) return args_error(a, "--stop needs a non-empty string");
    if (o->n_stop == ARGS_MAX_STOP) return args_error(a, "at most %d --stop strings", ARGS_MAX_STOP);
    o->stop[o->n_stop++] = s;
    g->stop = o->stop;
    g->n_stop = o->n_stop;
    return 0;
  }
  return 1;  // not a sampling flag
}

int args_common(args *a, const char *f, tool_opts *o) {
  int r;
  if (args_is(f, "-m", "--model")) r = args_str(a, f, &o->model);
  else if (args_is(f, "-c", "--ctx-size")) r = args_int(a, f, 1, 1L << 24, &o->sp.n_ctx);
  else if (args_is(f, "-t", "--threads")) r = args_int(a, f, 1, 1024, &o->sp.n_threads);
  else if (args_is(f, "-b", "--batch-size")) r = args_int(a, f, 1, 1L << 20, &o->sp.n_batch);
  else if (args_is(f, NULL, "--device")) r = args_str(a, f, &o->sp.device);
  else if (args_is(f, NULL, "--exact")) r = (o->sp.exact = true, 0);
  else if (!o->sampling) return 0;
  else if ((r = sampling_flag(a, f, o)) == 1) return 0;
  return r ? -1 : 1;
}

const char *args_common_help(bool sampling) {
  if (!sampling)
    return "  -m, --model MODEL        GGUF file, or smollm2 / gemma3 (default models)\n"
           "  -t, --threads N          CPU threads (default: number of cores)\n"
           "  -b, --batch-size N       tokens per forward pass (default 512; 1024 on CUDA)\n"
           "  --device DEV             cpu, cuda or cuda:N (default: cuda if present)\n"
           "  --exact                  f32 activations throughout (slower; for reference checks)\n";
  return "  -m, --model MODEL        GGUF file, or smollm2 / gemma3 (default models)\n"
         "  -n, --n-predict N        tokens to generate (default 128; -1 = until the context ends)\n"
         "  --temp T                 temperature, 0 = greedy (default 0.8)\n"
         "  --top-k K                keep the K most likely tokens, 0 = off (default 40)\n"
         "  --top-p P                nucleus sampling, 1 = off (default 0.95)\n"
         "  --min-p P                drop tokens below P * the top probability (default 0.05)\n"
         "  --repeat-penalty R       penalize recent tokens, 1 = off (default 1.0)\n"
         "  --repeat-last-n N        recent tokens penalized (default 64; -1 = context)\n"
         "  --presence-penalty P     (default 0)\n"
         "  --frequency-penalty F    (default 0)\n"
         "  -s, --seed S             random seed, -1 = random (default -1)\n"
         "  --stop STR               stop before STR (repeatable)\n"
         "  -c, --ctx-size N         context length (default 2048, or the model's if smaller)\n"
         "  -t, --threads N          CPU threads (default: number of cores)\n"
         "  -b, --batch-size N       prompt tokens per forward pass (default 512; 1024 on CUDA)\n"
         "  --device DEV             cpu, cuda or cuda:N (default: cuda if present)\n"
         "  --exact                  f32 activations throughout (slower; for reference checks)\n";
}

int args_open(const args *a, const tool_opts *o, wick_model **model, wick_session **session) {
  char err[512];
  *model = NULL;
  *session = NULL;
  if (!o->model) return args_error(a, "-m MODEL is required (a GGUF file, smollm2 or gemma3)");
  double t0 = wk_now();
  if (wick_model_load(model, tool_model_path(o->model), NULL, err, sizeof err))
    return args_error(a, "%s", err);
  if (wick_session_create(session, *model, &o->sp, err, sizeof err)) {
    wick_model_free(*model);
    *model = NULL;
    return args_error(a, "%s", err);
  }
  // A GPU session says at start-up what it holds where and how long loading
  // took (stderr, one line; the time includes the backend's warm-up).
  if (strcmp(wick_session_device(*session), "cpu")) {
    wick_memory mem;
    wick_session_memory(*session, &mem);
    fprintf(stderr, "%s: weights %.2f GB, KV cache %.2f GB (%d tokens), workspace %.2f GB on the "
                    "device; %.2f GB of weights in host memory; ready in %.2f s\n",
            wick_session_device(*session), mem.weights / 1e9, mem.kv_cache / 1e9,
            wick_session_n_ctx(*session), mem.workspace / 1e9, mem.weights_host / 1e9,
            wk_now() - t0);
  }
  return 0;
}

int args_print_text(void *user, const char *text, size_t len) {
  (void)user;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return 0;
}

// Flag parsing shared by the `wick` sub-commands. Every error prints exactly
// one line on stderr ("wick run: --top-p must be in [0, 1], got 1.5").
#ifndef WICK_TOOLS_ARGS_H
#define WICK_TOOLS_ARGS_H

#include <stdbool.h>
#include <stdint.h>

#include "wick.h"

typedef struct args {
  const char *cmd;  // "wick run": prefix of every message
  int argc;
  char **argv;
  int i;            // next argv index
} args;

// argv[0] is the sub-command's name; parsing starts at argv[1].
void args_init(args *a, const char *cmd, int argc, char **argv);
// The next argument (a flag), or NULL at the end.
const char *args_next(args *a);
// True when flag is one of the names (either may be NULL).
bool args_is(const char *flag, const char *short_name, const char *long_name);

// Each reads the value after flag. On error it prints one line and returns -1.
int args_str(args *a, const char *flag, const char **out);
int args_int(args *a, const char *flag, long lo, long hi, int *out);
// lo_open: lo itself is excluded.
int args_float(args *a, const char *flag, double lo, double hi, bool lo_open, float *out);
// A seed: a non-negative integer, or -1 for a random one.
int args_seed(args *a, const char *flag, uint64_t *out);

// Prints "CMD: MESSAGE" (one line) and returns -1.
// Streaming callback for wick_generate: writes the text to stdout and flushes.
int args_print_text(void *user, const char *text, size_t len);

int args_error(const args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int args_unknown(const args *a, const char *flag);

// Options shared by run, chat and perplexity.
enum { ARGS_MAX_STOP = 32 };
typedef struct tool_opts {
  const char *model;        // -m (resolved through tool_model_path)
  wick_session_params sp;   // -c -t -b --device --exact
  wick_sample_params gp;    // sampling flags, -n
  const char *stop[ARGS_MAX_STOP];
  int n_stop;
  bool sampling;            // accept sampling flags (run, chat)
} tool_opts;

void args_opts_init(tool_opts *o, bool sampling);
// Parses flag when it is a shared option: 1 = consumed, 0 = not a shared
// flag, -1 = error (printed).
int args_common(args *a, const char *flag, tool_opts *o);
// Usage lines of the shared options.
const char *args_common_help(bool sampling);

// Loads the model named by o->model ("smollm2", "gemma3" or a path) and
// creates a session; prints one error line and returns -1 on failure.
int args_open(const args *a, const tool_opts *o, wick_model **model, wick_session **session);

#endif

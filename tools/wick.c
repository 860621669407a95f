// The `wick` command: dispatches to one sub-command per file (cmd_*.c).
#include <stdio.h>
#include <string.h>

#include "commands.h"

typedef struct {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *help;
} command;

static const command k_commands[] = {
    {"run", cmd_run, "generate text from a prompt"},
    {"chat", cmd_chat, "interactive chat with the model's chat template"},
    {"perplexity", cmd_perplexity, "perplexity of a text file"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"inspect", cmd_inspect, "print a model file's metadata and tensors"},
    {"bench", cmd_bench, "prompt and generation speed"},
    {"mkmodel", cmd_mkmodel, "write a GGUF of real shapes with random weights"},
    {"logits", cmd_logits, "write the logits of given token ids (for tests)"},
};

static void usage(FILE *f) {
  fprintf(f, "usage: wick COMMAND [OPTIONS]   (wick COMMAND --help for its options)\n\ncommands:\n");
  for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
    fprintf(f, "  %-12s %s\n", k_commands[i].name, k_commands[i].help);
  fprintf(f, "\nmodels: -m smollm2 and -m gemma3 name the default models in models/\n");
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  for (size_t i = 0; i < sizeof k_commands / sizeof k_commands[0]; i++)
    if (!strcmp(argv[1], k_commands[i].name)) return k_commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "wick: unknown command '%s' (try wick --help)\n", argv[1]);
  return 2;
}

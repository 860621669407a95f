// Sub-commands of the `wick` program: each takes argv after the command name
// (argv[0] is the command name) and returns the process exit status.
#ifndef WICK_TOOLS_COMMANDS_H
#define WICK_TOOLS_COMMANDS_H

int cmd_inspect(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);
int cmd_logits(int argc, char **argv);

// "smollm2" and "gemma3" name the default models; anything else is a path.
// Looks in $WICK_MODELS, then ./models, then models/ beside the executable.
const char *tool_model_path(const char *name_or_path);

#endif

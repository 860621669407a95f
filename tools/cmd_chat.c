// Placeholder until the command lands.
#include <stdio.h>

#include "commands.h"

int cmd_chat(int argc, char **argv) {
  (void)argc;
  fprintf(stderr, "wick %s: not implemented yet\n", argv[0]);
  return 1;
}

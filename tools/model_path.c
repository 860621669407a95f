#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"

static const struct {
  const char *alias;
  const char *file;
} k_defaults[] = {
    {"smollm2", "smollm2-135m-instruct-q4_1.gguf"},
    {"gemma3", "gemma3-270m-q4_k_m.gguf"},
};

const char *tool_model_path(const char *name) {
  static char buf[PATH_MAX];  // tool-level scratch; the library never sees it
  for (size_t i = 0; i < sizeof k_defaults / sizeof k_defaults[0]; i++) {
    if (strcmp(name, k_defaults[i].alias)) continue;
    const char *env = getenv("WICK_MODELS");
    if (env) {
      snprintf(buf, sizeof buf, "%s/%s", env, k_defaults[i].file);
      if (access(buf, R_OK) == 0) return buf;
    }
    snprintf(buf, sizeof buf, "models/%s", k_defaults[i].file);
    if (access(buf, R_OK) == 0) return buf;
    char exe[PATH_MAX / 2];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
      exe[n] = 0;
      char *slash = strrchr(exe, '/');
      if (slash) *slash = 0;
      snprintf(buf, sizeof buf, "%s/../models/%s", exe, k_defaults[i].file);
      if (access(buf, R_OK) == 0) return buf;
    }
    snprintf(buf, sizeof buf, "models/%s", k_defaults[i].file);
    return buf;  // not found: the loader reports the missing file
  }
  return name;
}

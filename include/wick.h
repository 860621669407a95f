// wick: LLM inference in C.
//
// Worked example (generate text from a prompt, streaming tokens):
//
//   #include <stdio.h>
//   #include <wick.h>
//
//   static int on_token(void *user, const char *text, size_t len) {
//     fwrite(text, 1, len, stdout);
//     fflush(stdout);
//     return 0;  // non-zero stops generation
//   }
//
//   int main(void) {
//     wick_model *model = NULL;
//     wick_session *session = NULL;
//     char err[512];
//     if (wick_model_load(&model, "models/smollm2-135m-instruct-q4_1.gguf", NULL, err, sizeof err)) {
//       fprintf(stderr, "%s\n", err);
//       return 1;
//     }
//     wick_session_params sp = wick_session_default_params();
//     if (wick_session_create(&session, model, &sp, err, sizeof err)) {
//       fprintf(stderr, "%s\n", err);
//       return 1;
//     }
//     wick_sample_params gp = wick_sample_default_params();
//     gp.max_tokens = 64;
//     gp.temperature = 0;  // greedy
//     if (wick_generate(session, "The capital of France is", &gp, on_token, NULL, err, sizeof err))
//       fprintf(stderr, "%s\n", err);
//     wick_session_free(session);
//     wick_model_free(model);
//     return 0;
//   }
#ifndef WICK_H
#define WICK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum wick_status {
  WICK_OK = 0,
  WICK_ERR_IO = 1,           // a file could not be opened, read or mapped
  WICK_ERR_FORMAT = 2,       // a file is malformed (truncated, corrupt, hostile)
  WICK_ERR_UNSUPPORTED = 3,  // valid, but not something wick can run
  WICK_ERR_NOMEM = 4,        // an allocation failed
  WICK_ERR_INVALID = 5,      // a bad argument (flag, parameter, prompt)
  WICK_ERR_RANGE = 6,        // too long for the context or a buffer
  WICK_ERR_DEVICE = 7,       // a GPU call failed
} wick_status;

// A short constant description of a status code.
const char *wick_status_str(int status);

#ifdef __cplusplus
}
#endif

#endif

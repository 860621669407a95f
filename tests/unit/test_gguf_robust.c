// GGUF reader robustness: every prefix of a model-shaped file fails cleanly,
// random byte flips either open or fail cleanly, and hand-built hostile
// headers fail with a clear message. Runs under the allocation hook: no
// single allocation may exceed 64 MB and nothing may leak.
#include <unistd.h>

#include "test_gguf_util.h"

#define ALLOC_LIMIT ((size_t)64 << 20)

// One line, "gguf: " first.
static bool clean_message(const wk_error *e) {
  return !strncmp(e->msg, "gguf: ", 6) && !strchr(e->msg, '\n') && strlen(e->msg) > 12;
}

static bool in_buf(const void *p, uint64_t n, const uint8_t *buf, size_t size) {
  const uint8_t *q = p;
  return q >= buf && q <= buf + size && n <= (uint64_t)(buf + size - q);
}

// Touches every value an opened file exposes; all must lie inside buf.
static void walk_kv(const gguf_kv *kv, const uint8_t *buf, size_t size, int depth) {
  CHECK(depth < 16);
  gguf_str s;
  int64_t i;
  double d;
  if (gguf_kv_str(kv, &s)) CHECK(in_buf(s.ptr, s.len, buf, size));
  gguf_kv_int(kv, &i);
  gguf_kv_float(kv, &d);
  uint64_t n = gguf_arr_len(kv);
  for (uint64_t j = 0; j < n; j++) {
    switch (gguf_arr_type(kv)) {
      case GGUF_STRING:
        s = gguf_arr_str(kv, j);
        CHECK(s.ptr && in_buf(s.ptr, s.len, buf, size));
        break;
      case GGUF_ARRAY: walk_kv(gguf_arr_arr(kv, j), buf, size, depth + 1); break;
      default: CHECK(gguf_arr_float(kv, j, &d) || gguf_arr_type(kv) == GGUF_BOOL);
    }
  }
}

static void walk_file(const gguf_file *f, const uint8_t *buf, size_t size) {
  for (uint64_t i = 0; i < gguf_n_kv(f); i++) {
    const gguf_kv *kv = gguf_kv_at(f, i);
    gguf_str k = gguf_kv_key(kv);
    CHECK(in_buf(k.ptr, k.len, buf, size));
    walk_kv(kv, buf, size, 0);
  }
  for (uint64_t i = 0; i < gguf_n_tensors(f); i++) {
    const gguf_tensor *t = gguf_tensor_at(f, i);
    CHECK(in_buf(t->data, t->nbytes, buf, size));
    CHECK(gguf_find_tensor(f, t->name) == t);
    CHECK(t->n_dims >= 1 && t->n_dims <= 4 && wk_type_get(t->type));
  }
}

static void test_prefixes(const uint8_t *buf, size_t size, size_t stride) {
  size_t failed = 0;
  for (size_t n = 0; n < size; n += (n < 4096 ? 1 : stride)) {
    gguf_file *f = NULL;
    wk_error err = {{0}};
    int st = gguf_open_memory(&f, buf, n, &err);
    if (st == 0 || f || !clean_message(&err)) {
      if (failed++ < 5) fprintf(stderr, "prefix %zu: st %d msg '%s'\n", n, st, err.msg);
      gguf_close(f);
    }
  }
  CHECK(failed == 0);
  gguf_file *f = NULL;
  wk_error err = {{0}};
  CHECK(gguf_open_memory(&f, buf, size, &err) == 0);
  if (f) walk_file(f, buf, size);
  gguf_close(f);
}

static void test_flips(uint8_t *buf, size_t size, size_t head, int rounds) {
  uint64_t seed = 99;
  int opened = 0, failed = 0;
  for (int r = 0; r < rounds; r++) {
    size_t pos[4];
    uint8_t old[4];
    int n = 1 + (int)(rng_next(&seed) % 4);
    for (int k = 0; k < n; k++) {
      uint64_t x = rng_next(&seed);
      pos[k] = (x % 10 ? (x >> 8) % head : (x >> 8) % size);
      old[k] = buf[pos[k]];
      switch ((x >> 4) % 4) {
        case 0: buf[pos[k]] ^= (uint8_t)(1u << ((x >> 40) % 8)); break;
        case 1: buf[pos[k]] = 0xff; break;
        case 2: buf[pos[k]] = 0; break;
        default: buf[pos[k]] = (uint8_t)(x >> 48);
      }
    }
    gguf_file *f = NULL;
    wk_error err = {{0}};
    if (gguf_open_memory(&f, buf, size, &err) == 0) {
      opened++;
      walk_file(f, buf, size);
      gguf_close(f);
    } else {
      failed++;
      if (!clean_message(&err) || f) {
        fprintf(stderr, "flip round %d: bad failure '%s'\n", r, err.msg);
        g_failures++;
      }
    }
    for (int k = n - 1; k >= 0; k--) buf[pos[k]] = old[k];
  }
  printf("flips: %d rounds, %d opened, %d rejected\n", rounds, opened, failed);
  CHECK(opened > 0 && failed > 0);
}

// ---- hand-built files ----

typedef struct hdr {
  uint32_t version;
  uint64_t n_tensors, n_kv;
} hdr;

static void put_header(bb *b, hdr h) {
  bb_put(b, "GGUF", 4);
  bb_u32(b, h.version ? h.version : 3);
  bb_u64(b, h.n_tensors);
  bb_u64(b, h.n_kv);
}

// One tensor info: name, dims, type, offset.
static void put_tensor(bb *b, const char *name, uint32_t n_dims, const int64_t *ne, uint32_t type,
                       uint64_t off) {
  bb_str(b, name);
  bb_u32(b, n_dims);
  for (uint32_t d = 0; d < n_dims; d++) bb_u64(b, (uint64_t)ne[d]);
  bb_u32(b, type);
  bb_u64(b, off);
}

static void expect_fail(bb *b, const char *want, const char *label) {
  gguf_file *f = NULL;
  wk_error err = {{0}};
  int st = gguf_open_memory(&f, b->p, b->n, &err);
  bool ok = st != 0 && f == NULL && clean_message(&err) && strstr(err.msg, want);
  if (!ok) {
    fprintf(stderr, "%s: expected failure with '%s', got st %d '%s'\n", label, want, st, err.msg);
    g_failures++;
  } else {
    printf("  %-22s %s\n", label, err.msg);
  }
  gguf_close(f);
  b->n = 0;
}

static void test_hostile(void) {
  bb b = {0};
  static const int64_t ne1[1] = {32}, ne_neg[2] = {32, -1}, ne5[5] = {1, 1, 1, 1, 1};
  static const int64_t ne_big[3] = {1ll << 32, 1ll << 32, 1ll << 32};
  put_header(&b, (hdr){.n_tensors = 1ull << 63});
  expect_fail(&b, "tensors", "n_tensors 2^63");
  put_header(&b, (hdr){.n_kv = 1ull << 40});
  expect_fail(&b, "metadata entries", "n_kv 2^40");
  put_header(&b, (hdr){.version = 1});
  expect_fail(&b, "version 1", "version 1");
  put_header(&b, (hdr){.version = 7});
  expect_fail(&b, "version 7", "version 7");
  bb_put(&b, "GGML", 4);
  expect_fail(&b, "magic", "bad magic");
  put_header(&b, (hdr){.n_kv = 1});
  bb_u64(&b, 1ull << 62);
  bb_put(&b, "abcdefghijklmnopqrstuvwxyz", 26);
  expect_fail(&b, "truncated", "key length 2^62");
  static const uint32_t big_arr_types[] = {GGUF_UINT8, GGUF_STRING, GGUF_ARRAY, GGUF_UINT64};
  for (int k = 0; k < 4; k++) {
    put_header(&b, (hdr){.n_kv = 1});
    bb_str(&b, "big.array");
    bb_u32(&b, GGUF_ARRAY);
    bb_u32(&b, big_arr_types[k]);
    bb_u64(&b, 1ull << 60);
    bb_put(&b, "0123456789abcdef0123456789abcdef", 32);
    expect_fail(&b, "big.array", "array length 2^60");
  }
  put_header(&b, (hdr){.n_kv = 1});
  bb_str(&b, "s");
  bb_u32(&b, GGUF_STRING);
  bb_u64(&b, 1ull << 62);
  bb_put(&b, "xxxxxxxx", 8);
  expect_fail(&b, "truncated at byte", "string length 2^62");
  put_header(&b, (hdr){.n_kv = 1});
  bb_str(&b, "nest");
  bb_u32(&b, GGUF_ARRAY);
  for (int d = 0; d < 12; d++) bb_u32(&b, GGUF_ARRAY), bb_u64(&b, 1);
  bb_u32(&b, GGUF_UINT8), bb_u64(&b, 0);
  expect_fail(&b, "nested deeper", "nesting depth 12");
  put_header(&b, (hdr){.n_kv = 1});
  bb_str(&b, "weird");
  bb_u32(&b, 13);
  bb_u64(&b, 0);
  expect_fail(&b, "unknown value type 13", "value type 13");
  put_header(&b, (hdr){.n_kv = 2});
  bb_str(&b, "dup"), bb_u32(&b, GGUF_UINT8), bb_put(&b, "x", 1);
  bb_str(&b, "dup"), bb_u32(&b, GGUF_UINT8), bb_put(&b, "y", 1);
  expect_fail(&b, "duplicate key 'dup'", "duplicate key");
  for (uint32_t a = 0; a < 4; a += 3) {
    put_header(&b, (hdr){.n_kv = 1});
    bb_str(&b, "general.alignment"), bb_u32(&b, GGUF_UINT32), bb_u32(&b, a);
    expect_fail(&b, "power of two", a ? "alignment 3" : "alignment 0");
  }
  struct {
    const char *label, *want;
    uint32_t n_dims;
    const int64_t *ne;
    uint32_t type;
    uint64_t off;
  } tcases[] = {
      {"n_dims 5", "n_dims 5", 5, ne5, 0, 0},
      {"n_dims 0", "n_dims 0", 0, ne1, 0, 0},
      {"ne negative", "negative", 2, ne_neg, 0, 0},
      {"shape overflow", "overflows", 3, ne_big, 0, 0},
      {"unknown type", "unknown tensor type 4", 1, ne1, 4, 0},
      {"ne0 vs block", "block size 256", 1, ne1, 12, 0},
      {"offset past end", "past end of file", 1, ne1, 0, 1ull << 40},
      {"offset near 2^64", "past end of file", 1, ne1, 0, UINT64_MAX - 31},
      {"data past end", "past end of file", 1, ne1, 0, 0},
      {"offset unaligned", "not a multiple of the alignment", 1, ne1, 0, 8},
  };
  for (size_t k = 0; k < sizeof tcases / sizeof tcases[0]; k++) {
    put_header(&b, (hdr){.n_tensors = 1});
    put_tensor(&b, "blk.3.ffn_up.weight", tcases[k].n_dims, tcases[k].ne, tcases[k].type,
               tcases[k].off);
    bb_pad(&b, 32);
    bb_put(&b, "0123456789abcdef", 16);  // less than the 128 bytes the tensor needs
    expect_fail(&b, tcases[k].want, tcases[k].label);
  }
  put_header(&b, (hdr){.n_tensors = 2});
  put_tensor(&b, "w", 1, ne1, 0, 0);
  put_tensor(&b, "w", 1, ne1, 0, 128);
  bb_pad(&b, 32);
  for (int k = 0; k < 8; k++) bb_put(&b, "0123456789abcdef0123456789abcdef", 32);
  expect_fail(&b, "duplicate tensor name 'w'", "duplicate tensor");
  put_header(&b, (hdr){.n_tensors = 1});
  put_tensor(&b, "w", 1, ne1, 0, 0);
  expect_fail(&b, "past end of file", "no data section");
  free(b.p);
}

// A well-formed version 2 file (same layout as 3) opens.
static void test_v2(void) {
  static const int64_t ne[2] = {32, 2};
  bb b = {0};
  put_header(&b, (hdr){.version = 2, .n_tensors = 1, .n_kv = 1});
  bb_str(&b, "general.name"), bb_u32(&b, GGUF_STRING), bb_str(&b, "v2");
  put_tensor(&b, "w", 2, ne, 8, 0);  // q8_0: 2 rows of 34 bytes
  bb_pad(&b, 32);
  for (int i = 0; i < 68; i++) bb_put(&b, "\x5a", 1);
  gguf_file *f = NULL;
  wk_error err = {{0}};
  CHECK(gguf_open_memory(&f, b.p, b.n, &err) == 0);
  if (f) {
    const gguf_tensor *t = gguf_find_tensor(f, "w");
    CHECK(gguf_version(f) == 2 && t && t->nbytes == 68 && t->data == b.p + b.n - 68);
    char name[8];
    CHECK(gguf_get_str(f, "general.name", name, sizeof name) && !strcmp(name, "v2"));
  }
  gguf_close(f);
  free(b.p);
}

int main(void) {
  char path[] = "/tmp/wick_test_gguf_robust_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  wk_error err = {{0}};
  CHECK(build_model_like(path, &err) == 0);
  size_t size = 0;
  uint8_t *buf = read_whole(path, &size);
  unlink(path);
  CHECK(buf != NULL && size > 50000);
  alloc_stats stats = {.limit = ALLOC_LIMIT};
  wk_set_alloc(stats_alloc, &stats);
  if (buf) {
    gguf_file *f = NULL;
    CHECK(gguf_open_memory(&f, buf, size, &err) == 0);
    size_t head = f ? (size_t)gguf_data_offset(f) : size;
    gguf_close(f);
    const char *quick = getenv("WICK_TEST_QUICK");  // e.g. under valgrind
    printf("model-like file: %zu bytes, metadata and infos %zu bytes\n", size, head);
    test_prefixes(buf, size, quick ? 997 : 1);
    test_flips(buf, size, head, quick ? 300 : 20000);
  }
  test_hostile();
  test_v2();
  printf("largest allocation: %zu bytes, live at end: %zu\n", stats.max_single, stats.live);
  CHECK(stats.over_limit == 0 && stats.max_single <= ALLOC_LIMIT);
  CHECK(stats.live == 0);
  wk_set_alloc(NULL, NULL);
  free(buf);
  if (g_failures) fprintf(stderr, "test_gguf_robust: %d checks failed\n", g_failures);
  else printf("test_gguf_robust: ok\n");
  return g_failures != 0;
}

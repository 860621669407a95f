// GGUF writer -> reader round trip: every value type, nested arrays, tensors of
// several types; copying entries between files; writer argument checks.
// With WICK_GGUF_OUT=path the all-types file is also written there (the
// Python test reads it with the gguf package and checks the same values).
#include <math.h>
#include <unistd.h>

#include "test_gguf_util.h"

typedef struct tensor_spec {
  const char *name;
  int type;
  uint32_t n_dims;
  int64_t ne[4];
} tensor_spec;

static const tensor_spec k_tensors[] = {
    {"f32.a", WK_F32, 2, {7, 3, 1, 1}},
    {"f16.b", WK_F16, 1, {5, 1, 1, 1}},
    {"q8_0.c", WK_Q8_0, 2, {64, 2, 1, 1}},
    {"q4_k.d", WK_Q4_K, 3, {256, 2, 2, 1}},
    {"q4_0.e", WK_Q4_0, 4, {32, 1, 2, 3}},
    {"bf16.f", WK_BF16, 2, {3, 5, 1, 1}},
};
enum { N_TENSORS = sizeof k_tensors / sizeof k_tensors[0] };

static const char *const k_strs[] = {"a", "", "\xc3\xbcn\xc3\xaf", "x y"};
static const char k_str[] = "h\xc3\xa9llo \"wick\"\n";

// [[1, 2], [3], []] as i32, encoded after the type tag.
static void enc_nest_i32(bb *b) {
  static const int32_t a[] = {1, 2}, c[] = {3};
  bb_u32(b, GGUF_ARRAY);
  bb_u64(b, 3);
  bb_arr_i32(b, a, 2);
  bb_arr_i32(b, c, 1);
  bb_arr_i32(b, NULL, 0);
}

// [["a", "bc"], ["d"]]
static void enc_nest_str(bb *b) {
  bb_u32(b, GGUF_ARRAY);
  bb_u64(b, 2);
  bb_u32(b, GGUF_STRING);
  bb_u64(b, 2);
  bb_str(b, "a");
  bb_str(b, "bc");
  bb_u32(b, GGUF_STRING);
  bb_u64(b, 1);
  bb_str(b, "d");
}

// [[[1], [2, 3]], [[4]]] as i16 at the innermost level.
static void enc_nest_deep(bb *b) {
  static const int16_t v[] = {1, 2, 3, 4};
  bb_u32(b, GGUF_ARRAY);
  bb_u64(b, 2);
  bb_u32(b, GGUF_ARRAY);
  bb_u64(b, 2);
  bb_u32(b, GGUF_INT16), bb_u64(b, 1), bb_put(b, v, 2);
  bb_u32(b, GGUF_INT16), bb_u64(b, 2), bb_put(b, v + 1, 4);
  bb_u32(b, GGUF_ARRAY);
  bb_u64(b, 1);
  bb_u32(b, GGUF_INT16), bb_u64(b, 1), bb_put(b, v + 3, 2);
}

static int add_scalars(gguf_writer *w) {
  uint8_t u8 = 200;
  int8_t i8 = -100;
  uint16_t u16 = 60000;
  int16_t i16 = -30000;
  int64_t i64 = -9000000000000000000ll;
  double f64 = 2.718281828459045;
  int st = 0;
  st |= gguf_writer_add_scalar(w, "t.u8", GGUF_UINT8, &u8);
  st |= gguf_writer_add_scalar(w, "t.i8", GGUF_INT8, &i8);
  st |= gguf_writer_add_scalar(w, "t.u16", GGUF_UINT16, &u16);
  st |= gguf_writer_add_scalar(w, "t.i16", GGUF_INT16, &i16);
  st |= gguf_writer_add_u32(w, "t.u32", 4000000000u);
  st |= gguf_writer_add_i32(w, "t.i32", -2000000000);
  st |= gguf_writer_add_f32(w, "t.f32", 3.25f);
  st |= gguf_writer_add_bool(w, "t.bool", true);
  st |= gguf_writer_add_str(w, "t.str", k_str);
  st |= gguf_writer_add_u64(w, "t.u64", UINT64_MAX);
  st |= gguf_writer_add_scalar(w, "t.i64", GGUF_INT64, &i64);
  st |= gguf_writer_add_scalar(w, "t.f64", GGUF_FLOAT64, &f64);
  return st;
}

static int add_arrays(gguf_writer *w) {
  static const uint8_t au8[] = {1, 2, 255}, abool[] = {1, 0, 1};
  static const int8_t ai8[] = {-1, 0, 127, -128};
  static const uint16_t au16[] = {0, 65535};
  static const int16_t ai16[] = {-32768, 32767};
  static const uint32_t au32[] = {0, 4294967295u};
  static const int32_t ai32[] = {-5, 7, 9};
  static const float af32[] = {0.5f, -1.5f, 1e-6f};
  static const uint64_t au64[] = {1, (1ull << 63) + 5};
  static const int64_t ai64[] = {-1, 1ll << 62};
  static const double af64[] = {1e300, -2.5};
  int st = 0;
  st |= gguf_writer_add_arr(w, "t.arr.u8", GGUF_UINT8, au8, 3);
  st |= gguf_writer_add_arr(w, "t.arr.i8", GGUF_INT8, ai8, 4);
  st |= gguf_writer_add_arr(w, "t.arr.u16", GGUF_UINT16, au16, 2);
  st |= gguf_writer_add_arr(w, "t.arr.i16", GGUF_INT16, ai16, 2);
  st |= gguf_writer_add_arr(w, "t.arr.u32", GGUF_UINT32, au32, 2);
  st |= gguf_writer_add_arr(w, "t.arr.i32", GGUF_INT32, ai32, 3);
  st |= gguf_writer_add_arr(w, "t.arr.f32", GGUF_FLOAT32, af32, 3);
  st |= gguf_writer_add_arr(w, "t.arr.bool", GGUF_BOOL, abool, 3);
  st |= gguf_writer_add_arr(w, "t.arr.u64", GGUF_UINT64, au64, 2);
  st |= gguf_writer_add_arr(w, "t.arr.i64", GGUF_INT64, ai64, 2);
  st |= gguf_writer_add_arr(w, "t.arr.f64", GGUF_FLOAT64, af64, 2);
  st |= gguf_writer_add_arr_str(w, "t.arr.str", k_strs, 4);
  st |= gguf_writer_add_arr(w, "t.arr.empty", GGUF_INT32, NULL, 0);
  bb b = {0};
  enc_nest_i32(&b);
  st |= gguf_writer_add_raw(w, "t.nest.i32", GGUF_ARRAY, b.p, b.n);
  b.n = 0;
  enc_nest_str(&b);
  st |= gguf_writer_add_raw(w, "t.nest.str", GGUF_ARRAY, b.p, b.n);
  b.n = 0;
  enc_nest_deep(&b);
  st |= gguf_writer_add_raw(w, "t.nest.deep", GGUF_ARRAY, b.p, b.n);
  free(b.p);
  return st;
}

// Writes the all-types file; tensor data (seeded) stays in data[i].
static int build_all_types(const char *path, void **data) {
  gguf_writer *w = gguf_writer_create();
  uint64_t seed = 42;
  int st = gguf_writer_add_str(w, "general.architecture", "test");
  st |= gguf_writer_set_alignment(w, 64);
  st |= add_scalars(w) | add_arrays(w);
  for (int i = 0; i < N_TENSORS; i++)
    st |= add_random_tensor(w, k_tensors[i].name, k_tensors[i].type, k_tensors[i].n_dims,
                            k_tensors[i].ne, &seed, &data[i]);
  wk_error err = {{0}};
  if (!st) st = gguf_writer_write(w, path, &err);
  if (st) fprintf(stderr, "build_all_types: %d %s\n", st, err.msg);
  gguf_writer_free(w);
  return st;
}

static bool str_is(gguf_str s, const char *want) {
  return s.ptr && s.len == strlen(want) && !memcmp(s.ptr, want, s.len);
}

static int64_t get_i(const gguf_file *f, const char *key) {
  const gguf_kv *kv = gguf_get(f, key);
  int64_t v = 0x7eadbeef;
  CHECK(kv && gguf_kv_int(kv, &v));
  return v;
}

static int64_t arr_i(const gguf_kv *kv, uint64_t i) {
  int64_t v = 0x7eadbeef;
  CHECK(kv && gguf_arr_int(kv, i, &v));
  return v;
}

static double arr_f(const gguf_kv *kv, uint64_t i) {
  double v = -12345;
  CHECK(kv && gguf_arr_float(kv, i, &v));
  return v;
}

static void check_scalars(const gguf_file *f) {
  CHECK(get_i(f, "t.u8") == 200 && gguf_kv_type(gguf_get(f, "t.u8")) == GGUF_UINT8);
  CHECK(get_i(f, "t.i8") == -100 && gguf_kv_type(gguf_get(f, "t.i8")) == GGUF_INT8);
  CHECK(get_i(f, "t.u16") == 60000 && gguf_kv_type(gguf_get(f, "t.u16")) == GGUF_UINT16);
  CHECK(get_i(f, "t.i16") == -30000 && gguf_kv_type(gguf_get(f, "t.i16")) == GGUF_INT16);
  CHECK(get_i(f, "t.u32") == 4000000000ll);
  CHECK(get_i(f, "t.i32") == -2000000000ll);
  CHECK(get_i(f, "t.i64") == -9000000000000000000ll);
  CHECK(gguf_get_float(f, "t.f32", 0) == 3.25);
  CHECK(gguf_get_float(f, "t.f64", 0) == 2.718281828459045);
  CHECK(gguf_get_float(f, "t.i16", 0) == -30000.0);
  bool b = false;
  CHECK(gguf_kv_bool(gguf_get(f, "t.bool"), &b) && b);
  CHECK(!gguf_kv_bool(gguf_get(f, "t.u8"), &b));
  uint64_t u = 0;
  int64_t i;
  CHECK(gguf_kv_u64(gguf_get(f, "t.u64"), &u) && u == UINT64_MAX);
  CHECK(!gguf_kv_int(gguf_get(f, "t.u64"), &i));  // does not fit
  gguf_str s;
  CHECK(gguf_kv_str(gguf_get(f, "t.str"), &s) && str_is(s, k_str));
  CHECK(!gguf_kv_str(gguf_get(f, "t.u32"), &s));
  double d;
  CHECK(!gguf_kv_float(gguf_get(f, "t.str"), &d));
  char buf[8];
  CHECK(gguf_get_str(f, "t.str", buf, sizeof buf) && !strcmp(buf, "h\xc3\xa9llo "));
  CHECK(gguf_get_int(f, "absent", -7) == -7 && gguf_get_int(f, "t.str", -8) == -8);
  CHECK(gguf_get(f, "absent") == NULL && gguf_get(f, "t.u") == NULL);
}

static void check_arrays(const gguf_file *f) {
  const gguf_kv *kv = gguf_get(f, "t.arr.u8");
  CHECK(gguf_arr_type(kv) == GGUF_UINT8 && gguf_arr_len(kv) == 3 && arr_i(kv, 2) == 255);
  kv = gguf_get(f, "t.arr.i8");
  CHECK(gguf_arr_len(kv) == 4 && arr_i(kv, 0) == -1 && arr_i(kv, 3) == -128);
  kv = gguf_get(f, "t.arr.u16");
  CHECK(arr_i(kv, 1) == 65535);
  kv = gguf_get(f, "t.arr.i16");
  CHECK(arr_i(kv, 0) == -32768 && arr_i(kv, 1) == 32767);
  kv = gguf_get(f, "t.arr.u32");
  CHECK(arr_i(kv, 1) == 4294967295ll);
  kv = gguf_get(f, "t.arr.i32");
  CHECK(arr_i(kv, 0) == -5 && arr_i(kv, 1) == 7 && arr_i(kv, 2) == 9);
  int64_t i;
  CHECK(!gguf_arr_int(kv, 3, &i));
  kv = gguf_get(f, "t.arr.f32");
  CHECK(arr_f(kv, 0) == 0.5 && arr_f(kv, 1) == -1.5 && arr_f(kv, 2) == (double)1e-6f);
  kv = gguf_get(f, "t.arr.bool");
  CHECK(gguf_arr_type(kv) == GGUF_BOOL && arr_i(kv, 0) == 1 && arr_i(kv, 1) == 0);
  kv = gguf_get(f, "t.arr.u64");
  uint64_t u = 0;
  CHECK(gguf_arr_u64(kv, 1, &u) && u == (1ull << 63) + 5);
  kv = gguf_get(f, "t.arr.i64");
  CHECK(arr_i(kv, 0) == -1 && arr_i(kv, 1) == (1ll << 62));
  kv = gguf_get(f, "t.arr.f64");
  CHECK(arr_f(kv, 0) == 1e300 && arr_f(kv, 1) == -2.5);
  kv = gguf_get(f, "t.arr.str");
  CHECK(gguf_arr_type(kv) == GGUF_STRING && gguf_arr_len(kv) == 4);
  for (int j = 0; j < 4; j++) CHECK(str_is(gguf_arr_str(kv, (uint64_t)j), k_strs[j]));
  CHECK(gguf_arr_str(kv, 4).ptr == NULL);
  CHECK(!gguf_arr_int(kv, 0, &i));
  kv = gguf_get(f, "t.arr.empty");
  CHECK(kv && gguf_arr_type(kv) == GGUF_INT32 && gguf_arr_len(kv) == 0);
}

static void check_nested(const gguf_file *f) {
  const gguf_kv *kv = gguf_get(f, "t.nest.i32");
  CHECK(gguf_arr_type(kv) == GGUF_ARRAY && gguf_arr_len(kv) == 3);
  const gguf_kv *a = gguf_arr_arr(kv, 0), *c = gguf_arr_arr(kv, 2);
  CHECK(a && gguf_arr_len(a) == 2 && arr_i(a, 0) == 1 && arr_i(a, 1) == 2);
  CHECK(arr_i(gguf_arr_arr(kv, 1), 0) == 3);
  CHECK(c && gguf_arr_len(c) == 0 && gguf_arr_arr(kv, 3) == NULL);
  kv = gguf_get(f, "t.nest.str");
  CHECK(gguf_arr_len(kv) == 2);
  CHECK(str_is(gguf_arr_str(gguf_arr_arr(kv, 0), 1), "bc"));
  CHECK(str_is(gguf_arr_str(gguf_arr_arr(kv, 1), 0), "d"));
  kv = gguf_get(f, "t.nest.deep");
  const gguf_kv *x = gguf_arr_arr(gguf_arr_arr(kv, 0), 1);
  CHECK(x && gguf_arr_type(x) == GGUF_INT16 && arr_i(x, 0) == 2 && arr_i(x, 1) == 3);
  x = gguf_arr_arr(gguf_arr_arr(kv, 1), 0);
  CHECK(x && arr_i(x, 0) == 4);
}

static void check_tensors(const gguf_file *f, void **data) {
  CHECK(gguf_n_tensors(f) == N_TENSORS);
  CHECK(gguf_alignment(f) == 64 && gguf_data_offset(f) % 64 == 0);
  uint64_t expect_off = 0;
  for (int i = 0; i < N_TENSORS; i++) {
    const tensor_spec *s = &k_tensors[i];
    const gguf_tensor *t = gguf_tensor_at(f, (uint64_t)i);
    CHECK(t && !strcmp(t->name, s->name) && gguf_find_tensor(f, s->name) == t);
    CHECK(t->type == s->type && t->n_dims == s->n_dims);
    for (int d = 0; d < 4; d++) CHECK(t->ne[d] == s->ne[d]);
    size_t nb = wk_row_size(s->type, s->ne[0]) * (size_t)(s->ne[1] * s->ne[2] * s->ne[3]);
    CHECK(t->nbytes == nb && t->offset == expect_off);
    CHECK(!memcmp(t->data, data[i], nb));
    expect_off = (expect_off + nb + 63) / 64 * 64;
  }
  CHECK(gguf_find_tensor(f, "f32") == NULL && gguf_tensor_at(f, N_TENSORS) == NULL);
}

static void check_all(const gguf_file *f, void **data) {
  CHECK(gguf_version(f) == 3);
  CHECK(gguf_n_kv(f) == 2 + 12 + 16);
  check_scalars(f);
  check_arrays(f);
  check_nested(f);
  check_tensors(f, data);
}

// Copies every entry and tensor into a new file and checks it byte for byte.
static void check_copy(const gguf_file *f, const char *path) {
  gguf_writer *w = gguf_writer_create();
  for (uint64_t i = 0; i < gguf_n_kv(f); i++) CHECK(gguf_writer_copy_kv(w, gguf_kv_at(f, i)) == 0);
  CHECK(gguf_writer_copy_kv(w, gguf_kv_at(f, 3)) == WICK_ERR_INVALID);  // duplicate
  for (uint64_t i = 0; i < gguf_n_tensors(f); i++) {
    const gguf_tensor *t = gguf_tensor_at(f, i);
    CHECK(gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data) == 0);
  }
  wk_error err = {{0}};
  CHECK(gguf_writer_write(w, path, &err) == 0);
  gguf_writer_free(w);
  size_t n1, n2;
  uint8_t *b2 = read_whole(path, &n2);
  const uint8_t *b1 = (const uint8_t *)gguf_tensor_at(f, 0)->data - gguf_data_offset(f);
  n1 = gguf_file_size(f);
  CHECK(b2 && n1 == n2 && !memcmp(b1, b2, n1));
  free(b2);
}

static void check_writer_rejects(void) {
  gguf_writer *w = gguf_writer_create();
  int64_t ne[2] = {33, 2}, ok[2] = {32, 2};
  uint8_t blob[64] = {1};
  CHECK(gguf_writer_add_u32(w, "k", 1) == 0);
  CHECK(gguf_writer_add_u32(w, "k", 2) == WICK_ERR_INVALID);
  CHECK(gguf_writer_set_alignment(w, 3) == WICK_ERR_INVALID);
  CHECK(gguf_writer_set_alignment(w, 0) == WICK_ERR_INVALID);
  CHECK(gguf_writer_add_tensor(w, "t", WK_Q4_0, 2, ne, blob) == WICK_ERR_INVALID);
  CHECK(gguf_writer_add_tensor(w, "t", 4, 2, ok, blob) == WICK_ERR_INVALID);  // no such type
  CHECK(gguf_writer_add_tensor(w, "t", WK_Q4_0, 5, ok, blob) == WICK_ERR_INVALID);
  CHECK(gguf_writer_add_tensor(w, "t", WK_Q4_0, 1, ok, blob) == 0);
  CHECK(gguf_writer_add_tensor(w, "t", WK_Q4_0, 1, ok, blob) == WICK_ERR_INVALID);
  uint8_t bad[12] = {GGUF_UINT32, 0, 0, 0, 9};  // claims 9 u32, holds none
  CHECK(gguf_writer_add_raw(w, "r", GGUF_ARRAY, bad, sizeof bad) == WICK_ERR_INVALID);
  CHECK(gguf_writer_add_arr(w, "s", GGUF_STRING, blob, 1) == WICK_ERR_INVALID);
  gguf_writer_free(w);
}

int main(void) {
  char path[] = "/tmp/wick_test_gguf_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  close(fd);
  alloc_stats stats = {.limit = (size_t)64 << 20};
  wk_set_alloc(stats_alloc, &stats);
  void *data[N_TENSORS] = {0};
  CHECK(build_all_types(path, data) == 0);
  gguf_file *f = NULL;
  wk_error err = {{0}};
  CHECK(gguf_open(&f, path, &err) == 0);
  if (f) {
    check_all(f, data);
    size_t n;
    uint8_t *buf = read_whole(path, &n);
    gguf_file *g = NULL;
    CHECK(gguf_open_memory(&g, buf, n, &err) == 0);
    if (g) check_all(g, data);
    gguf_close(g);
    free(buf);
    char copy[sizeof path + 8];
    snprintf(copy, sizeof copy, "%s.copy", path);
    check_copy(f, copy);
    unlink(copy);
    gguf_close(f);
  } else {
    fprintf(stderr, "open failed: %s\n", err.msg);
  }
  CHECK(gguf_open(&f, "/nonexistent/x.gguf", &err) == WICK_ERR_IO && f == NULL);
  CHECK(strstr(err.msg, "/nonexistent/x.gguf") != NULL);
  check_writer_rejects();
  const char *out = getenv("WICK_GGUF_OUT");
  unlink(path);
  for (int i = 0; i < N_TENSORS; i++) free(data[i]), data[i] = NULL;
  if (out) CHECK(build_all_types(out, data) == 0);
  for (int i = 0; i < N_TENSORS; i++) free(data[i]);
  CHECK(stats.live == 0);
  CHECK(stats.over_limit == 0);
  wk_set_alloc(NULL, NULL);
  if (g_failures) fprintf(stderr, "test_gguf: %d checks failed\n", g_failures);
  else printf("test_gguf: ok\n");
  return g_failures != 0;
}

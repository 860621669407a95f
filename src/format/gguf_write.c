// GGUF v3 writer: metadata entries are kept encoded as they will appear in
// the file; tensor data is copied from the caller at write time, each tensor
// padded to the alignment.
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "format/gguf.h"
#include "format/gguf_internal.h"
#include "quant/types.h"

typedef struct wkv {
  char *key;      // NUL-terminated copy
  uint32_t type;  // gguf_vtype
  uint8_t *val;   // (len) encoded value
  size_t len;
} wkv;

typedef struct wtensor {
  char *name;
  int type;
  uint32_t n_dims;
  int64_t ne[4];
  const void *data;  // caller's, read at write time
  uint64_t nbytes;
} wtensor;

struct gguf_writer {
  uint32_t alignment;
  wkv *kv;  // (n_kv, cap_kv)
  size_t n_kv, cap_kv;
  wtensor *t;  // (n_t, cap_t)
  size_t n_t, cap_t;
};

gguf_writer *gguf_writer_create(void) {
  gguf_writer *w = wk_calloc(1, sizeof *w);
  if (w) w->alignment = GGUF_DEFAULT_ALIGNMENT;
  return w;
}

void gguf_writer_free(gguf_writer *w) {
  if (!w) return;
  for (size_t i = 0; i < w->n_kv; i++) {
    wk_free(w->kv[i].key);
    wk_free(w->kv[i].val);
  }
  for (size_t i = 0; i < w->n_t; i++) wk_free(w->t[i].name);
  wk_free(w->kv);
  wk_free(w->t);
  wk_free(w);
}

static int grow(void **p, size_t *cap, size_t n, size_t elem) {
  if (n < *cap) return WICK_OK;
  size_t nc = *cap ? *cap * 2 : 16, bytes;
  if (!wk_mul_ok(nc, elem, &bytes)) return WICK_ERR_NOMEM;
  void *q = wk_realloc(*p, bytes);
  if (!q) return WICK_ERR_NOMEM;
  *p = q;
  *cap = nc;
  return WICK_OK;
}

static wkv *find_kv(gguf_writer *w, const char *key) {
  for (size_t i = 0; i < w->n_kv; i++)
    if (!strcmp(w->kv[i].key, key)) return &w->kv[i];
  return NULL;
}

// Adds (or, for general.alignment, replaces) one entry; val is copied.
static int put(gguf_writer *w, const char *key, gguf_vtype type, const void *val, size_t len) {
  if (!key || gguf_value_check(val, len, type, NULL)) return WICK_ERR_INVALID;
  bool is_align = !strcmp(key, "general.alignment");
  if (is_align) {
    uint64_t a = 0;
    if (type != GGUF_UINT32) return WICK_ERR_INVALID;
    memcpy(&a, val, 4);
    if (!a || (a & (a - 1)) || a > GGUF_MAX_ALIGNMENT) return WICK_ERR_INVALID;
    w->alignment = (uint32_t)a;
  }
  wkv *old = find_kv(w, key);
  if (old && !is_align) return WICK_ERR_INVALID;  // duplicate key
  uint8_t *copy = wk_malloc(len ? len : 1);
  if (!copy) return WICK_ERR_NOMEM;
  memcpy(copy, val, len);
  if (old) {
    wk_free(old->val);
    old->val = copy;
    old->len = len;
    return WICK_OK;
  }
  char *k = wk_strndup(key, strlen(key));
  if (!k || grow((void **)&w->kv, &w->cap_kv, w->n_kv, sizeof *w->kv)) {
    wk_free(k);
    wk_free(copy);
    return WICK_ERR_NOMEM;
  }
  w->kv[w->n_kv++] = (wkv){k, (uint32_t)type, copy, len};
  return WICK_OK;
}

int gguf_writer_set_alignment(gguf_writer *w, uint32_t alignment) {
  return put(w, "general.alignment", GGUF_UINT32, &alignment, 4);
}

int gguf_writer_add_u32(gguf_writer *w, const char *key, uint32_t v) {
  return put(w, key, GGUF_UINT32, &v, 4);
}
int gguf_writer_add_i32(gguf_writer *w, const char *key, int32_t v) {
  return put(w, key, GGUF_INT32, &v, 4);
}
int gguf_writer_add_u64(gguf_writer *w, const char *key, uint64_t v) {
  return put(w, key, GGUF_UINT64, &v, 8);
}
int gguf_writer_add_f32(gguf_writer *w, const char *key, float v) {
  return put(w, key, GGUF_FLOAT32, &v, 4);
}
int gguf_writer_add_bool(gguf_writer *w, const char *key, bool v) {
  uint8_t b = v;
  return put(w, key, GGUF_BOOL, &b, 1);
}

int gguf_writer_add_scalar(gguf_writer *w, const char *key, gguf_vtype type, const void *v) {
  size_t sz = gguf_vtype_size(type);
  return sz ? put(w, key, type, v, sz) : WICK_ERR_INVALID;
}

int gguf_writer_add_raw(gguf_writer *w, const char *key, gguf_vtype type, const void *val,
                        size_t len) {
  return put(w, key, type, val, len);
}

int gguf_writer_add_str(gguf_writer *w, const char *key, const char *v) {
  size_t n = strlen(v);
  uint8_t *buf = wk_malloc(8 + n);
  if (!buf) return WICK_ERR_NOMEM;
  uint64_t len = n;
  memcpy(buf, &len, 8);
  memcpy(buf + 8, v, n);
  int st = put(w, key, GGUF_STRING, buf, 8 + n);
  wk_free(buf);
  return st;
}

int gguf_writer_add_arr(gguf_writer *w, const char *key, gguf_vtype elem_type, const void *data,
                        uint64_t n) {
  size_t esz = gguf_vtype_size(elem_type), bytes, total;
  if (!esz || !wk_mul_ok((size_t)n, esz, &bytes) || !wk_add_ok(bytes, 12, &total))
    return WICK_ERR_INVALID;
  uint8_t *buf = wk_malloc(total);
  if (!buf) return WICK_ERR_NOMEM;
  uint32_t et = elem_type;
  memcpy(buf, &et, 4);
  memcpy(buf + 4, &n, 8);
  if (bytes) memcpy(buf + 12, data, bytes);
  int st = put(w, key, GGUF_ARRAY, buf, total);
  wk_free(buf);
  return st;
}

int gguf_writer_add_arr_str(gguf_writer *w, const char *key, const char *const *v, uint64_t n) {
  size_t total = 12;
  for (uint64_t i = 0; i < n; i++)
    if (!wk_add_ok(total, 8 + strlen(v[i]), &total)) return WICK_ERR_INVALID;
  uint8_t *buf = wk_malloc(total), *p = buf;
  if (!buf) return WICK_ERR_NOMEM;
  uint32_t et = GGUF_STRING;
  memcpy(p, &et, 4);
  memcpy(p + 4, &n, 8);
  p += 12;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t len = strlen(v[i]);
    memcpy(p, &len, 8);
    memcpy(p + 8, v[i], (size_t)len);
    p += 8 + len;
  }
  int st = put(w, key, GGUF_ARRAY, buf, total);
  wk_free(buf);
  return st;
}

int gguf_writer_copy_kv(gguf_writer *w, const gguf_kv *kv) {
  gguf_str key = gguf_kv_key(kv);
  if (!key.len || memchr(key.ptr, 0, (size_t)key.len)) return WICK_ERR_INVALID;
  char *k = wk_strndup(key.ptr, (size_t)key.len);
  if (!k) return WICK_ERR_NOMEM;
  uint64_t len;
  const void *raw = gguf_kv_raw(kv, &len);
  int st = put(w, k, gguf_kv_type(kv), raw, (size_t)len);
  wk_free(k);
  return st;
}

int gguf_writer_add_tensor(gguf_writer *w, const char *name, int type, uint32_t n_dims,
                           const int64_t *ne, const void *data) {
  const wk_type_info *ti = wk_type_get(type);
  if (!ti || n_dims < 1 || n_dims > 4 || !name || type < 0) return WICK_ERR_INVALID;
  wtensor t = {.type = type, .n_dims = n_dims, .data = data, .ne = {1, 1, 1, 1}};
  for (uint32_t d = 0; d < n_dims; d++) {
    if (ne[d] < 0) return WICK_ERR_INVALID;
    t.ne[d] = ne[d];
  }
  if (t.ne[0] % ti->block) return WICK_ERR_INVALID;
  size_t nb = (size_t)(t.ne[0] / ti->block) * (size_t)ti->bytes;
  for (int d = 1; d < 4; d++)
    if (!wk_mul_ok(nb, (size_t)t.ne[d], &nb)) return WICK_ERR_INVALID;
  if (nb && !data) return WICK_ERR_INVALID;
  t.nbytes = nb;
  for (size_t i = 0; i < w->n_t; i++)
    if (!strcmp(w->t[i].name, name)) return WICK_ERR_INVALID;
  if (grow((void **)&w->t, &w->cap_t, w->n_t, sizeof *w->t)) return WICK_ERR_NOMEM;
  if (!(t.name = wk_strndup(name, strlen(name)))) return WICK_ERR_NOMEM;
  w->t[w->n_t++] = t;
  return WICK_OK;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

static bool put_bytes(FILE *fp, const void *p, size_t n) { return fwrite(p, 1, n, fp) == n; }
static bool put_u32(FILE *fp, uint32_t v) { return put_bytes(fp, &v, 4); }
static bool put_u64(FILE *fp, uint64_t v) { return put_bytes(fp, &v, 8); }
static bool put_str(FILE *fp, const char *s) {
  size_t n = strlen(s);
  return put_u64(fp, n) && put_bytes(fp, s, n);
}
static bool put_pad(FILE *fp, uint64_t pos, uint64_t a) {
  static const uint8_t zeros[256];
  for (uint64_t n = align_up(pos, a) - pos; n;) {
    size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
    if (!put_bytes(fp, zeros, k)) return false;
    n -= k;
  }
  return true;
}

static bool write_all(gguf_writer *w, FILE *fp) {
  uint64_t pos = 4 + 4 + 8 + 8;
  bool ok = put_bytes(fp, "GGUF", 4) && put_u32(fp, 3) && put_u64(fp, w->n_t) &&
            put_u64(fp, w->n_kv);
  for (size_t i = 0; i < w->n_kv && ok; i++) {
    ok = put_str(fp, w->kv[i].key) && put_u32(fp, w->kv[i].type) &&
         put_bytes(fp, w->kv[i].val, w->kv[i].len);
    pos += 8 + strlen(w->kv[i].key) + 4 + w->kv[i].len;
  }
  uint64_t off = 0;
  for (size_t i = 0; i < w->n_t && ok; i++) {
    wtensor *t = &w->t[i];
    ok = put_str(fp, t->name) && put_u32(fp, t->n_dims);
    for (uint32_t d = 0; d < t->n_dims && ok; d++) ok = put_u64(fp, (uint64_t)t->ne[d]);
    ok = ok && put_u32(fp, (uint32_t)t->type) && put_u64(fp, off);
    pos += 8 + strlen(t->name) + 4 + 8 * t->n_dims + 4 + 8;
    off = align_up(off + t->nbytes, w->alignment);
  }
  if (!w->n_t) return ok;
  ok = ok && put_pad(fp, pos, w->alignment);
  for (size_t i = 0; i < w->n_t && ok; i++)
    ok = put_bytes(fp, w->t[i].data, (size_t)w->t[i].nbytes) &&
         put_pad(fp, w->t[i].nbytes, w->alignment);
  return ok;
}

int gguf_writer_write(gguf_writer *w, const char *path, wk_error *err) {
  FILE *fp = fopen(path, "wb");
  if (!fp) return wk_fail(err, WICK_ERR_IO, "gguf: cannot create '%s': %s", path, strerror(errno));
  bool ok = write_all(w, fp);
  int e = errno;
  if (fclose(fp) != 0 && ok) ok = false, e = errno;
  if (!ok) return wk_fail(err, WICK_ERR_IO, "gguf: writing '%s' failed: %s", path, strerror(e));
  return WICK_OK;
}

// GGUF v2/v3 reader: parses and validates the header, metadata and tensor
// infos of a mapped file without copying values. Every length, count and
// offset is checked against the bytes that remain before it is used, and
// every count is bounded by what those bytes could hold before anything is
// allocated for it.
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc.h"
#include "format/gguf.h"
#include "format/gguf_internal.h"
#include "quant/types.h"

// Smallest encodings, used to bound counts before allocating.
#define MIN_KV_BYTES 13      // key length (8) + type (4) + 1-byte value
#define MIN_TENSOR_BYTES 32  // name length (8) + n_dims (4) + ne (8) + type (4) + offset (8)
#define MIN_ARR_BYTES 12     // element type (4) + length (8)

size_t gguf_vtype_size(gguf_vtype t) {
  switch (t) {
    case GGUF_UINT8: case GGUF_INT8: case GGUF_BOOL: return 1;
    case GGUF_UINT16: case GGUF_INT16: return 2;
    case GGUF_UINT32: case GGUF_INT32: case GGUF_FLOAT32: return 4;
    case GGUF_UINT64: case GGUF_INT64: case GGUF_FLOAT64: return 8;
    default: return 0;
  }
}

const char *gguf_vtype_name(gguf_vtype t) {
  static const char *const names[] = {"u8",  "i8",   "u16", "i16", "u32", "i32", "f32",
                                      "bool", "str", "arr", "u64", "i64", "f64"};
  return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

// ---- cursor with context for error messages ----

typedef struct rd {
  const uint8_t *base;
  size_t size;
  size_t pos;
  wk_error *err;
  const char *what;  // "header", "key", "tensor info"
  int64_t idx;       // key / tensor index, -1 when none
  gguf_str name;     // its name once known
  int64_t elem;      // top-level array element, -1 when none
} rd;

static size_t rd_left(const rd *r) { return r->size - r->pos; }

// Writes s into buf (cap >= 80) with non-printable bytes as '?', cut at 64.
static const char *show(gguf_str s, char *buf) {
  size_t n = s.len < 64 ? (size_t)s.len : 64, j = 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s.ptr[i];
    buf[j++] = (c >= 32 && c != 127) ? (char)c : '?';
  }
  if (s.len > 64) buf[j++] = '.', buf[j++] = '.', buf[j++] = '.';
  buf[j] = 0;
  return buf;
}

static const char *rd_where(const rd *r, char *buf, size_t cap) {
  char nm[80];
  int n = 0;
  if (r->idx < 0) return snprintf(buf, cap, "%s", r->what), buf;
  if (r->name.ptr)
    n = snprintf(buf, cap, "%s %" PRId64 " ('%s')", r->what, r->idx, show(r->name, nm));
  else
    n = snprintf(buf, cap, "%s %" PRId64, r->what, r->idx);
  if (r->elem >= 0 && n >= 0 && (size_t)n < cap)
    snprintf(buf + n, cap - (size_t)n, " array element %" PRId64, r->elem);
  return buf;
}

static int rd_need(rd *r, uint64_t n, const char *item) {
  if (n <= rd_left(r)) return WICK_OK;
  char w[256];
  return wk_fail(r->err, WICK_ERR_FORMAT,
                 "gguf: truncated at byte %zu reading %s %s (need %" PRIu64 " bytes, %zu left)",
                 r->pos, rd_where(r, w, sizeof w), item, n, rd_left(r));
}

static int rd_u32(rd *r, uint32_t *v, const char *item) {
  int st = rd_need(r, 4, item);
  if (st) return st;
  memcpy(v, r->base + r->pos, 4);
  r->pos += 4;
  return WICK_OK;
}

static int rd_u64(rd *r, uint64_t *v, const char *item) {
  int st = rd_need(r, 8, item);
  if (st) return st;
  memcpy(v, r->base + r->pos, 8);
  r->pos += 8;
  return WICK_OK;
}

static int rd_str(rd *r, gguf_str *s, const char *item) {
  uint64_t len;
  int st = rd_u64(r, &len, item);
  if (!st) st = rd_need(r, len, item);
  if (st) return st;
  s->ptr = (const char *)r->base + r->pos;
  s->len = len;
  r->pos += (size_t)len;
  return WICK_OK;
}

// ---- values ----

static void kv_free_parts(gguf_kv *kv) {
  if (kv->sub)
    for (uint64_t i = 0; i < kv->arr_len; i++) kv_free_parts(&kv->sub[i]);
  wk_free(kv->sub);
  wk_free(kv->str_off);
  kv->sub = NULL;
  kv->str_off = NULL;
}

static int parse_value(rd *r, gguf_kv *kv, gguf_vtype type, int depth);

static int parse_array(rd *r, gguf_kv *kv, int depth) {
  uint32_t et;
  uint64_t n;
  size_t start = r->pos;  // kv->raw: string offsets count from here
  int st = rd_u32(r, &et, "array element type");
  if (!st) st = rd_u64(r, &n, "array length");
  if (st) return st;
  char w[256];
  kv->arr_type = (gguf_vtype)et;
  size_t esz = gguf_vtype_size((gguf_vtype)et);
  if (esz) {
    uint64_t total;
    if (__builtin_mul_overflow(n, (uint64_t)esz, &total) || total > rd_left(r))
      return wk_fail(r->err, WICK_ERR_FORMAT,
                     "gguf: truncated or corrupt at byte %zu: %s is an array of %" PRIu64
                     " %s, more than the %zu bytes left",
                     r->pos, rd_where(r, w, sizeof w), n, gguf_vtype_name((gguf_vtype)et),
                     rd_left(r));
    kv->arr_len = n;
    r->pos += (size_t)total;
    return WICK_OK;
  }
  if (et != GGUF_STRING && et != GGUF_ARRAY)
    return wk_fail(r->err, WICK_ERR_FORMAT, "gguf: %s: unknown array element type %" PRIu32,
                   rd_where(r, w, sizeof w), et);
  if (et == GGUF_ARRAY && depth + 1 >= GGUF_MAX_DEPTH)
    return wk_fail(r->err, WICK_ERR_FORMAT, "gguf: %s: arrays nested deeper than %d",
                   rd_where(r, w, sizeof w), GGUF_MAX_DEPTH);
  uint64_t min = et == GGUF_STRING ? 8 : MIN_ARR_BYTES;
  if (n > rd_left(r) / min)
    return wk_fail(r->err, WICK_ERR_FORMAT,
                   "gguf: truncated or corrupt at byte %zu: %s is an array of %" PRIu64
                   " %s, more than the %zu bytes left can hold",
                   r->pos, rd_where(r, w, sizeof w), n, gguf_vtype_name((gguf_vtype)et),
                   rd_left(r));
  if (n == 0) return WICK_OK;
  if (et == GGUF_STRING) {
    kv->str_off = wk_malloc((size_t)n * sizeof *kv->str_off);
    if (!kv->str_off) return wk_fail(r->err, WICK_ERR_NOMEM, "gguf: out of memory");
  } else {
    kv->sub = wk_calloc((size_t)n, sizeof *kv->sub);
    if (!kv->sub) return wk_fail(r->err, WICK_ERR_NOMEM, "gguf: out of memory");
  }
  kv->arr_len = n;
  for (uint64_t i = 0; i < n; i++) {
    if (depth == 0) r->elem = (int64_t)i;
    if (et == GGUF_STRING) {
      gguf_str s;
      kv->str_off[i] = r->pos - start;
      st = rd_str(r, &s, "string");
    } else {
      st = parse_value(r, &kv->sub[i], GGUF_ARRAY, depth + 1);
    }
    if (st) return st;
  }
  if (depth == 0) r->elem = -1;
  return WICK_OK;
}

// Parses one value of the given type at the cursor into kv (key untouched).
static int parse_value(rd *r, gguf_kv *kv, gguf_vtype type, int depth) {
  kv->type = type;
  size_t start = r->pos;
  int st;
  size_t sz = gguf_vtype_size(type);
  if (sz) {
    st = rd_need(r, sz, gguf_vtype_name(type));
    if (!st) r->pos += sz;
  } else if (type == GGUF_STRING) {
    gguf_str s;
    st = rd_str(r, &s, "string");
  } else if (type == GGUF_ARRAY) {
    st = parse_array(r, kv, depth);
  } else {
    char w[256];
    st = wk_fail(r->err, WICK_ERR_FORMAT, "gguf: %s has unknown value type %u",
                 rd_where(r, w, sizeof w), (unsigned)type);
  }
  kv->raw = r->base + start;
  kv->raw_len = r->pos - start;
  return st;
}

int gguf_value_check(const void *p, size_t len, gguf_vtype t, wk_error *err) {
  rd r = {.base = p, .size = len, .err = err, .what = "value", .idx = -1, .elem = -1};
  gguf_kv kv = {0};
  int st = parse_value(&r, &kv, t, 0);
  kv_free_parts(&kv);
  if (!st && r.pos != len)
    st = wk_fail(err, WICK_ERR_INVALID, "gguf: value has %zu trailing bytes", len - r.pos);
  return st;
}

// ---- hash index over names ----

static uint64_t hash_bytes(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
  return h;
}

static int index_init(gguf_index *ix, uint64_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;  // n is bounded by the file size
  ix->slots = wk_calloc(cap, sizeof *ix->slots);
  ix->mask = cap - 1;
  return ix->slots ? WICK_OK : WICK_ERR_NOMEM;
}

// Finds name; returns its stored index + 1, or 0 with *slot the empty slot.
static uint64_t index_find(const gguf_index *ix, const char *p, size_t n,
                           gguf_str (*name_of)(const gguf_file *, uint64_t), const gguf_file *f,
                           size_t *slot) {
  if (!ix->slots) return 0;
  size_t i = (size_t)hash_bytes(p, n) & ix->mask;
  for (;; i = (i + 1) & ix->mask) {
    uint64_t v = ix->slots[i];
    if (!v) break;
    gguf_str s = name_of(f, v - 1);
    if (s.len == n && !memcmp(s.ptr, p, n)) return v;
  }
  if (slot) *slot = i;
  return 0;
}

static gguf_str kv_name(const gguf_file *f, uint64_t i) { return f->kv[i].key; }
static gguf_str tensor_name(const gguf_file *f, uint64_t i) {
  return (gguf_str){f->tensors[i].name, strlen(f->tensors[i].name)};
}

// ---- file sections ----

static int parse_header(rd *r, gguf_file *f, uint64_t *n_tensors, uint64_t *n_kv) {
  if (r->size < 4 || memcmp(r->base, "GGUF", 4)) {
    unsigned char m[4] = {0};
    memcpy(m, r->base, r->size < 4 ? r->size : 4);
    return wk_fail(r->err, WICK_ERR_FORMAT,
                   "gguf: bad magic (expected 'GGUF', found %02x %02x %02x %02x)", m[0], m[1],
                   m[2], m[3]);
  }
  r->pos = 4;
  int st = rd_u32(r, &f->version, "version");
  if (st) return st;
  if (f->version == 1)
    return wk_fail(r->err, WICK_ERR_UNSUPPORTED,
                   "gguf: version 1 files are not supported (expected version 2 or 3)");
  if (f->version == 0x02000000u || f->version == 0x03000000u)
    return wk_fail(r->err, WICK_ERR_UNSUPPORTED, "gguf: big-endian files are not supported");
  if (f->version != 2 && f->version != 3)
    return wk_fail(r->err, WICK_ERR_UNSUPPORTED,
                   "gguf: unsupported version %" PRIu32 " (expected 2 or 3)", f->version);
  st = rd_u64(r, n_tensors, "tensor count");
  if (!st) st = rd_u64(r, n_kv, "metadata count");
  if (st) return st;
  if (*n_kv > rd_left(r) / MIN_KV_BYTES)
    return wk_fail(r->err, WICK_ERR_FORMAT,
                   "gguf: header claims %" PRIu64 " metadata entries but only %zu bytes follow",
                   *n_kv, rd_left(r));
  if (*n_tensors > rd_left(r) / MIN_TENSOR_BYTES)
    return wk_fail(r->err, WICK_ERR_FORMAT,
                   "gguf: header claims %" PRIu64 " tensors but only %zu bytes follow",
                   *n_tensors, rd_left(r));
  return WICK_OK;
}

static int parse_kvs(rd *r, gguf_file *f, uint64_t n) {
  if (n) {
    f->kv = wk_calloc((size_t)n, sizeof *f->kv);
    if (!f->kv) return wk_fail(r->err, WICK_ERR_NOMEM, "gguf: out of memory");
  }
  if (index_init(&f->kv_index, n)) return wk_fail(r->err, WICK_ERR_NOMEM, "gguf: out of memory");
  r->what = "key";
  for (uint64_t i = 0; i < n; i++) {
    gguf_kv *kv = &f->kv[i];
    uint32_t type;
    r->idx = (int64_t)i;
    r->name = (gguf_str){0};
    int st = rd_str(r, &kv->key, "name");
    if (st) return st;
    r->name = kv->key;
    f->n_kv = i + 1;  // from here kv[i] owns what parse_value allocates
    st = rd_u32(r, &type, "type");
    if (!st) st = parse_value(r, kv, (gguf_vtype)type, 0);
    if (st) return st;
    size_t slot = 0;
    uint64_t prev = index_find(&f->kv_index, kv->key.ptr, (size_t)kv->key.len, kv_name, f, &slot);
    char nm[80];
    if (prev)
      return wk_fail(r->err, WICK_ERR_FORMAT, "gguf: duplicate key '%s' (entries %" PRIu64
                     " and %" PRIu64 ")", show(kv->key, nm), prev - 1, i);
    f->kv_index.slots[slot] = i + 1;
  }
  r->idx = -1;
  return WICK_OK;
}

static int read_alignment(rd *r, gguf_file *f) {
  f->alignment = GGUF_DEFAULT_ALIGNMENT;
  const gguf_kv *kv = gguf_get(f, "general.alignment");
  if (!kv) return WICK_OK;
  int64_t a;
  if (!gguf_kv_int(kv, &a) || kv->type == GGUF_BOOL)
    return wk_fail(r->err, WICK_ERR_FORMAT,
                   "gguf: general.alignment must be an integer (found type %s)",
                   gguf_vtype_name(kv->type));
  if (a <= 0 || (a & (a - 1)) || a > (int64_t)GGUF_MAX_ALIGNMENT)
    return wk_fail(r->err, WICK_ERR_FORMAT,
                   "gguf: general.alignment must be a nonzero power of two up to 2^30 (found %"
                   PRId64 ")", a);
  f->alignment = (uint64_t)a;
  return WICK_OK;
}

// Reads one tensor info; its name is left in *name (pointing into the file).
static int parse_tensor_info(rd *r, gguf_tensor *t, gguf_str *name) {
  char w[256];
  int st = rd_str(r, name, "name");
  if (st) return st;
  r->name = *name;
  if (memchr(name->ptr, 0, (size_t)name->len))
    return wk_fail(r->err, WICK_ERR_FORMAT, "gguf: %s: name contains a NUL byte",
                   rd_where(r, w, sizeof w));
  uint32_t type;
  st = rd_u32(r, &t->n_dims, "n_dims");
  if (st) return st;
  if (t->n_dims < 1 || t->n_dims > 4)
    return wk_fail(r->err, WICK_ERR_FORMAT, "gguf: %s: n_dims %" PRIu32 " (expected 1 to 4)",
                   rd_where(r, w, sizeof w), t->n_dims);
  for (int d = 0; d < 4; d++) t->ne[d] = 1;
  for (uint32_t d = 0; d < t->n_dims; d++) {
    uint64_t ne;
    if ((st = rd_u64(r, &ne, "dimension"))) return st;
    if (ne > (uint64_t)INT64_MAX)
      return wk_fail(r->err, WICK_ERR_FORMAT, "gguf: %s: ne[%" PRIu32 "] is negative (%" PRId64
                     ")", rd_where(r, w, sizeof w), d, (int64_t)ne);
    t->ne[d] = (int64_t)ne;
  }
  if ((st = rd_u32(r, &type, "type")) || (st = rd_u64(r, &t->offset, "offset"))) return st;
  t->type = (int)type;
  const wk_type_info *ti = type <= INT32_MAX ? wk_type_get((int)type) : NULL;
  if (!ti)
    return wk_fail(r->err, WICK_ERR_UNSUPPORTED, "gguf: %s: unknown tensor type %" PRIu32,
                   rd_where(r, w, sizeof w), type);
  if (t->ne[0] % ti->block)
    return wk_fail(r->err, WICK_ERR_FORMAT,
                   "gguf: %s: ne[0] = %" PRId64 " is not a multiple of the %s block size %d",
                   rd_where(r, w, sizeof w), t->ne[0], ti->name, ti->block);
  uint64_t nb = (uint64_t)(t->ne[0] / ti->block), n_el = (uint64_t)t->ne[0];
  bool ok = !__builtin_mul_overflow(nb, (uint64_t)ti->bytes, &nb);
  for (int d = 1; d < 4 && ok; d++)
    ok = !__builtin_mul_overflow(nb, (uint64_t)t->ne[d], &nb) &&
         !__builtin_mul_overflow(n_el, (uint64_t)t->ne[d], &n_el) && n_el <= (uint64_t)INT64_MAX;
  if (!ok)
    return wk_fail(r->err, WICK_ERR_FORMAT, "gguf: %s: shape [%" PRId64 ", %" PRId64 ", %" PRId64
                   ", %" PRId64 "] overflows", rd_where(r, w, sizeof w), t->ne[0], t->ne[1],
                   t->ne[2], t->ne[3]);
  t->nbytes = nb;
  return WICK_OK;
}

static int place_tensor(rd *r, gguf_file *f, gguf_tensor *t) {
  char nm[80];
  gguf_str s = {t->name, strlen(t->name)};
  if (t->offset % f->alignment)
    return wk_fail(r->err, WICK_ERR_FORMAT,
                   "gguf: tensor '%s' data offset %" PRIu64 " is not a multiple of the alignment %"
                   PRIu64, show(s, nm), t->offset, f->alignment);
  uint64_t start, end;
  if (__builtin_add_overflow(f->data_offset, t->offset, &start) || start > f->size)
    return wk_fail(r->err, WICK_ERR_FORMAT,
                   "gguf: tensor '%s' data offset %" PRIu64 " past end of file (size %zu)",
                   show(s, nm), t->offset, f->size);
  if (__builtin_add_overflow(start, t->nbytes, &end)) end = UINT64_MAX;
  if (end > f->size)
    return wk_fail(r->err, WICK_ERR_FORMAT,
                   "gguf: tensor '%s' data [%" PRIu64 ", %" PRIu64 ") past end of file (size %zu)",
                   show(s, nm), start, end, f->size);
  t->data = f->base + start;
  return WICK_OK;
}

static int parse_tensors(rd *r, gguf_file *f, uint64_t n) {
  if (n > rd_left(r) / MIN_TENSOR_BYTES)
    return wk_fail(r->err, WICK_ERR_FORMAT,
                   "gguf: header claims %" PRIu64 " tensors but only %zu bytes follow the metadata",
                   n, rd_left(r));
  if (index_init(&f->t_index, n)) return wk_fail(r->err, WICK_ERR_NOMEM, "gguf: out of memory");
  if (!n) return WICK_OK;
  gguf_str *names = wk_calloc((size_t)n, sizeof *names);
  f->tensors = wk_calloc((size_t)n, sizeof *f->tensors);
  if (!names || !f->tensors) {
    wk_free(names);
    return wk_fail(r->err, WICK_ERR_NOMEM, "gguf: out of memory");
  }
  r->what = "tensor info";
  size_t name_bytes = 0;  // <= file size, so the sum cannot overflow
  int st = WICK_OK;
  for (uint64_t i = 0; i < n && !st; i++) {
    r->idx = (int64_t)i;
    r->name = (gguf_str){0};
    st = parse_tensor_info(r, &f->tensors[i], &names[i]);
    name_bytes += (size_t)names[i].len + 1;
  }
  r->idx = -1;
  if (!st && !(f->names = wk_malloc(name_bytes)))
    st = wk_fail(r->err, WICK_ERR_NOMEM, "gguf: out of memory");
  for (uint64_t i = 0, at = 0; i < n && !st; i++) {
    memcpy(f->names + at, names[i].ptr, (size_t)names[i].len);
    f->names[at + names[i].len] = 0;
    f->tensors[i].name = f->names + at;
    at += names[i].len + 1;
  }
  wk_free(names);
  if (st) return st;
  f->n_tensors = n;
  if (__builtin_add_overflow((uint64_t)r->pos, f->alignment - 1, &f->data_offset))
    return wk_fail(r->err, WICK_ERR_FORMAT, "gguf: data offset overflows");
  f->data_offset &= ~(f->alignment - 1);
  if (f->data_offset > f->size)
    return wk_fail(r->err, WICK_ERR_FORMAT,
                   "gguf: data section starts at byte %" PRIu64 ", past end of file (size %zu)",
                   f->data_offset, f->size);
  for (uint64_t i = 0; i < n; i++) {
    gguf_tensor *t = &f->tensors[i];
    size_t slot = 0;
    char nm[80];
    uint64_t prev = index_find(&f->t_index, t->name, strlen(t->name), tensor_name, f, &slot);
    if (prev)
      return wk_fail(r->err, WICK_ERR_FORMAT,
                     "gguf: duplicate tensor name '%s' (tensors %" PRIu64 " and %" PRIu64 ")",
                     show((gguf_str){t->name, strlen(t->name)}, nm), prev - 1, i);
    f->t_index.slots[slot] = i + 1;
    if ((st = place_tensor(r, f, t))) return st;
  }
  return WICK_OK;
}

static int parse_file(gguf_file *f, wk_error *err) {
  rd r = {.base = f->base, .size = f->size, .err = err, .what = "header", .idx = -1, .elem = -1};
  uint64_t n_tensors, n_kv;
  int st = parse_header(&r, f, &n_tensors, &n_kv);
  if (!st) st = parse_kvs(&r, f, n_kv);
  if (!st) st = read_alignment(&r, f);
  if (!st) st = parse_tensors(&r, f, n_tensors);
  if (!st && !n_tensors) {
    // No data section is needed; a writer may have left out the padding.
    f->data_offset = (r.pos + f->alignment - 1) & ~(f->alignment - 1);
  }
  return st;
}

// ---- open / close ----

int gguf_open_memory(gguf_file **out, const void *data, size_t size, wk_error *err) {
  *out = NULL;
  gguf_file *f = wk_calloc(1, sizeof *f);
  if (!f) return wk_fail(err, WICK_ERR_NOMEM, "gguf: out of memory");
  f->base = data;
  f->size = size;
  int st = parse_file(f, err);
  if (st) {
    gguf_close(f);
    return st;
  }
  *out = f;
  return WICK_OK;
}

int gguf_open(gguf_file **out, const char *path, wk_error *err) {
  *out = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return wk_fail(err, WICK_ERR_IO, "gguf: cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
    close(fd);
    return wk_fail(err, WICK_ERR_IO, "gguf: '%s' is not a regular file", path);
  }
  size_t size = (size_t)sb.st_size;
  void *map = NULL;
  if (size > 0) {
    map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      int e = errno;
      close(fd);
      return wk_fail(err, WICK_ERR_IO, "gguf: cannot map '%s': %s", path, strerror(e));
    }
  }
  close(fd);
  static const uint8_t k_empty[1];
  int st = gguf_open_memory(out, map ? map : k_empty, size, err);
  if (st) {
    if (map) munmap(map, size);
    return st;
  }
  (*out)->map = map;
  (*out)->map_size = size;
  return WICK_OK;
}

int gguf_is_mapped(const gguf_file *f) { return f && f->map != NULL; }

void gguf_close(gguf_file *f) {
  if (!f) return;
  for (uint64_t i = 0; i < f->n_kv; i++) kv_free_parts(&f->kv[i]);
  wk_free(f->kv);
  wk_free(f->tensors);
  wk_free(f->names);
  wk_free(f->kv_index.slots);
  wk_free(f->t_index.slots);
  if (f->map) munmap(f->map, f->map_size);
  wk_free(f);
}

const gguf_kv *gguf_get(const gguf_file *f, const char *key) {
  uint64_t v = index_find(&f->kv_index, key, strlen(key), kv_name, f, NULL);
  return v ? &f->kv[v - 1] : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
  uint64_t v = index_find(&f->t_index, name, strlen(name), tensor_name, f, NULL);
  return v ? &f->tensors[v - 1] : NULL;
}

// UTF-8 decoding after the Unicode standard's table of well-formed byte
// sequences (Table 3-7): the second byte's range depends on the lead byte.
#include "tokenizer/utf8.h"

#include <string.h>

#include "base/alloc.h"

int utf8_next(const uint8_t *s, size_t n, uint32_t *cp) {
  uint8_t b0 = s[0];
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  int len;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  uint32_t v;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    v = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    v = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    v = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return -1;
  }
  for (int i = 1; i < len; i++) {
    if ((size_t)i >= n) return 0;  // valid so far, cut short
    uint8_t b = s[i];
    if (b < lo || b > hi) return -i;
    lo = 0x80;
    hi = 0xBF;
    v = (v << 6) | (b & 0x3F);
  }
  *cp = v;
  return len;
}

size_t utf8_count(const char *s, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += ((uint8_t)s[i] & 0xC0) != 0x80;
  return c;
}

int utf8_put(uint32_t cp, char *out) {
  uint8_t *o = (uint8_t *)out;
  if (cp < 0x80) {
    o[0] = (uint8_t)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (uint8_t)(0xC0 | (cp >> 6));
    o[1] = (uint8_t)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (uint8_t)(0xE0 | (cp >> 12));
    o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[2] = (uint8_t)(0x80 | (cp & 0x3F));
    return 3;
  }
  o[0] = (uint8_t)(0xF0 | (cp >> 18));
  o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
  o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
  o[3] = (uint8_t)(0x80 | (cp & 0x3F));
  return 4;
}

bool utf8_valid(const char *s, size_t n) {
  const uint8_t *p = (const uint8_t *)s;
  size_t i = 0;
  while (i < n) {
    if (p[i] < 0x80) {
      i++;
      continue;
    }
    uint32_t cp;
    int k = utf8_next(p + i, n - i, &cp);
    if (k <= 0) return false;
    i += (size_t)k;
  }
  return true;
}

size_t utf8_lossy(const uint8_t *s, size_t n, char *out) {
  size_t i = 0, o = 0;
  while (i < n) {
    if (s[i] < 0x80) {
      out[o++] = (char)s[i++];
      continue;
    }
    uint32_t cp;
    int k = utf8_next(s + i, n - i, &cp);
    if (k > 0) {
      memcpy(out + o, s + i, (size_t)k);
      o += (size_t)k;
      i += (size_t)k;
    } else {
      memcpy(out + o, UTF8_REPLACEMENT, 3);
      o += 3;
      i += k < 0 ? (size_t)-k : n - i;  // an unfinished tail is one subpart
    }
  }
  return o;
}

char *utf8_sanitize(const char *s, size_t n, size_t *out_len) {
  size_t cap;
  if (!wk_mul_ok(n, 3, &cap) || !wk_add_ok(cap, 1, &cap)) return NULL;
  char *out = wk_malloc(cap);
  if (!out) return NULL;
  *out_len = utf8_lossy((const uint8_t *)s, n, out);
  out[*out_len] = 0;
  return out;
}

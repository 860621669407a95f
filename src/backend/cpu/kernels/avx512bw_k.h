// Pieces of the AVX-512 BW level's super-block tiles (act16_avx512bw_k.c:
// 16-bit activations; kernels_avx512bw_k.c: 8-bit), 512-bit vectors without
// VNNI, VBMI or GFNI. Included after act16_x86.h, by files that define AT
// with AVX-512 F, BW and VL.
#ifndef WICK_BACKEND_CPU_KERNELS_AVX512BW_K_H
#define WICK_BACKEND_CPU_KERNELS_AVX512BW_K_H

// A16_KEEP for any of the 32 vector registers.
#define B_KEEP(v) __asm__("" : "+v"(v))

// 32 bytes at a in the low half, 32 at b in the high half: a load and a
// merge-masked broadcast load (a load and a blend: no shuffle; written in
// asm, as GCC turns the intrinsics into an insert).
AT AI __m512i bjoin(const int8_t *a, const int8_t *b) {
  __m512i v = _mm512_castsi256_si512(a16_load(a));
  __asm__("vbroadcasti64x4 %1, %0%{%2%}" : "+v"(v) : "m"(*(const __m256i *)b), "Yk"((__mmask8)0xf0));
  return v;
}

// The dword at lo in the low 256-bit half and the one at hi in the high half:
// a broadcast load and a merge-masked one (GCC would move them through
// general registers and broadcast from there, a shuffle each).
AT AI __m512i bscales(const int32_t *lo, const int32_t *hi) {
  __m512i v;
  __asm__("vpbroadcastd %1, %0" : "=v"(v) : "m"(*lo));
  __asm__("vpbroadcastd %1, %0%{%2%}" : "+v"(v) : "m"(*hi), "Yk"((__mmask16)0xff00));
  return v;
}

// Where bgroup_scales's table keeps group g's dword.
#define BG_AT(g) (((g)&3) | ((g)&4) << 1 | ((g)&8) >> 1)

// 16 group scales (int8, sc), each in both words of a dword, at BG_AT(g).
AT AI void bgroup_table(__m128i sc, int32_t *t) {
  const __m256i s = _mm256_cvtepi8_epi16(sc);
  _mm256_storeu_si256((__m256i *)t, _mm256_unpacklo_epi16(s, s));
  _mm256_storeu_si256((__m256i *)(t + 8), _mm256_unpackhi_epi16(s, s));
}

// Pair m's scale vector: group 4 m + L in 128-bit lane L.
AT AI __m512i bgroup_scales(const int32_t *t, const int m) {
  __m512i v;
  __asm__("vpbroadcastd %1, %0" : "=v"(v) : "m"(t[BG_AT(4 * m)]));
  __asm__("vpbroadcastd %1, %0%{%2%}" : "+v"(v) : "m"(t[BG_AT(4 * m + 1)]), "Yk"((__mmask16)0x00f0));
  __asm__("vpbroadcastd %1, %0%{%2%}" : "+v"(v) : "m"(t[BG_AT(4 * m + 2)]), "Yk"((__mmask16)0x0f00));
  __asm__("vpbroadcastd %1, %0%{%2%}" : "+v"(v) : "m"(t[BG_AT(4 * m + 3)]), "Yk"((__mmask16)0xf000));
  return v;
}

// The halves of v added (a pair's lanes -> the AVX2 level's 8 lanes).
AT AI __m256i bhalves(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// lo + 128 hi, the halves added.
AT AI __m256i bfold(__m512i lo, __m512i hi) {
  return bhalves(_mm512_add_epi32(lo, _mm512_slli_epi32(hi, 7)));
}

#endif

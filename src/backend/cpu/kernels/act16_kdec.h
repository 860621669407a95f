// Pieces of the one-token tiles of the super-blocks with a scale per 32
// values (Q4_K, Q5_K, IQ4_XS), shared by the AVX2 level (act16_avx2_k.c:
// kdec) and the AVX-512 BW level (act16_avx512bw_k.c): the super-block's
// scales, mins, d and dmin made for a tile's rows, and the mins' f32 term,
// which both levels run in the same order. Included after act16_x86.h (which
// defines AT).
#ifndef WICK_BACKEND_CPU_KERNELS_ACT16_KDEC_H
#define WICK_BACKEND_CPU_KERNELS_ACT16_KDEC_H

// The mins' term of a Q4_K / Q5_K super-block, per 32 values: acc - dmin *
// min_j * S_j (mf: the mins as f32, sums: S_j, chunk j's activation sum, both
// in k4_chunk_sums' lane order). The decode tile and ktile both take it so.
AT AI __m256 k4_min_term(__m256 acc, __m256 mf, __m256 sums, __m256 dmin) {
  return _mm256_fnmadd_ps(_mm256_mul_ps(mf, sums), dmin, acc);
}

// The 8 chunks' activation sums of a super-block (its 16-value groups' in
// pairs), in the lane order of pairwise adds: chunks 0 1 4 5 2 3 6 7.
AT AI __m256 k4_chunk_sums(const wk_act16k *a) {
  return _mm256_hadd_ps(_mm256_loadu_ps(a->s), _mm256_loadu_ps(a->s + 8));
}

// Bytes 8-15 of each 128-bit half (kscales_k4's mins 0-7) in that order,
// at bytes 0-7.
#define K4_MINS_ORDER 8, 9, 12, 13, 10, 11, 14, 15

// Q4_K, Q5_K, per super-block: what the decode tile needs of its rows
// besides the codes (rows r and r + 1 are written together).
typedef struct k4dprep {
  int16_t sc[A16_MAXR][8];   // row r, chunk j: its scale
  uint8_t sm[A16_MAXR][16];  // row r: scales (bytes 0-7), mins (8-15, in
                             // k4_chunk_sums' order)
  float dm[2 * A16_MAXR];    // row r: d_w * d_a at 2 r, dmin at 2 r + 1
} k4dprep;

// kscales_k4 on two blocks at once: each 128-bit half of x holds a block's
// 12 packed bytes (and 4 more), each half of the result its 8 scales and 8
// mins.
AT AI __m256i k4_scales2(__m256i x) {
  const __m256i low = _mm256_and_si256(x, _mm256_set1_epi8(63));  // sc0-3 m0-3
  const __m256i top = _mm256_and_si256(_mm256_srli_epi32(x, 2), _mm256_set1_epi8(0x30));
  __m256i a2 = _mm256_shuffle_epi32(x, 0xaa);
  a2 = _mm256_and_si256(_mm256_srlv_epi32(a2, _mm256_setr_epi32(0, 4, 0, 0, 0, 4, 0, 0)),
                        _mm256_set1_epi8(15));
  return _mm256_unpacklo_epi32(low, _mm256_or_si256(a2, top));  // sc0-7 m0-7
}

AT AI void k4_dprep(const int R, const uint8_t *blk, size_t ws, float da, k4dprep *p) {
  A16_UNROLL for (int r = 0; r < R; r += 2) {  // rows r and r + 1 (r twice for an odd R)
    const uint8_t *b0 = blk + (size_t)r * ws, *b1 = r + 1 < R ? b0 + ws : b0;
    const __m256i v = k4_scales2(a16_load2(b0 + 4, b1 + 4));
    const __m256i mo = _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, K4_MINS_ORDER,  //
                                        0, 1, 2, 3, 4, 5, 6, 7, K4_MINS_ORDER);
    _mm256_storeu_si256((__m256i *)p->sm[r], _mm256_shuffle_epi8(v, mo));
    _mm256_storeu_si256((__m256i *)p->sc[r], _mm256_unpacklo_epi8(v, _mm256_setzero_si256()));
  }
  const __m256 f = _mm256_setr_ps(da, 1, da, 1, da, 1, da, 1);
  A16_UNROLL for (int r = 0; r < R; r += 4) {  // d dmin of rows r .. r + 3
    __m128i h = a16_bcast32(blk + (size_t)r * ws);
    A16_UNROLL for (int i = 1; i < 4; i++)
        if (r + i < R) h = _mm_blend_epi32(h, a16_bcast32(blk + (size_t)(r + i) * ws), 1 << i);
    _mm256_storeu_ps(p->dm + 2 * r, _mm256_mul_ps(_mm256_cvtph_ps(h), f));
  }
}

// Row r's 8 mins as f32.
AT AI __m256 k4_mins(const k4dprep *p, int r) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p->sm[r] + 8))));
}

// IQ4_XS, per row and super-block: what the decode tile needs besides the
// codes.
typedef struct kdprep {
  int32_t s32[8];   // sub-block scales, one a dword: chunk j broadcasts s32[j]'s
                    // low int16
  __m256 dd;        // d_w * d_a
} kdprep;

AT AI void kd_prep(const uint8_t *b, __m256 da, kdprep *p) {
  // d @0, scales_h @2, scales_l @4: a16_scales_iq4xs as dwords
  uint32_t l;
  memcpy(&l, b + 4, 4);
  const __m256i sh = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  const __m256i lo = _mm256_srlv_epi32(_mm256_set1_epi32((int)l), _mm256_add_epi32(sh, sh));
  const __m256i hi = _mm256_srlv_epi32(_mm256_set1_epi32((int)a16_u16(b + 2)), sh);
  const __m256i sc = _mm256_or_si256(
      _mm256_and_si256(lo, _mm256_set1_epi32(15)),
      _mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(3)), 4));
  _mm256_storeu_si256((__m256i *)p->s32, _mm256_sub_epi32(sc, _mm256_set1_epi32(32)));
  p->dd = _mm256_mul_ps(a16_bf16(b), da);
}


#endif

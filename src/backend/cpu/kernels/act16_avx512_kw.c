// AVX-512 one-token tiles of Q4_K and Q5_K (VNNI, VBMI2, GFNI): vpdpbusd
// sums of 4 code x activation bytes, packed two to a dword and scaled by one
// vpdpwssd. act16_avx512_kd.c's find asks for these first.
//
// The AVX2 decode tile (act16_avx2_k.c, kdec) multiplies a chunk's 32 codes
// with its 32 lo and 32 hi activation bytes by pmaddubsw (pairs) and scales
// by pmaddwd: 4 multiplies per 32 codes. Here a 512-bit code vector holds
// chunks 2 m (low 256 bits) and 2 m + 1 (high), against the activations'
// 64 lo and 64 hi bytes of the pair as they lie in the row, and per vector
//   B = vpdpbusd(-128, V, hi)          per lane: sum of 4 code x hi, - 128
//   C = vpshldd(B, 0x40000000, 16)     B - 128 in the high word, 16384 in the low
//   C = vpdpbusd(C, V, lo)             + sum of 4 code x lo (A), in the low word
//   acc = vpdpwssd(acc, C, S)          S: (s, 128 s) a dword, s the chunk's scale
// 3 multiplies per 64 codes. The words are exact: |A|, |B| <= 4 x 31 x 127
// = 15748, so 16384 + A lies in [636, 32132] (nothing carries into the high
// word) and B - 128 fits int16; the lane gets s (16384 + A) + 128 s (B - 128)
// = s (A + 128 B), the chunk's 4 values times their scale. An int32 lane
// sums 4 consecutive values of one chunk (lanes 0-7: chunk 2 m, 8-15: 2 m +
// 1), so the two 256-bit halves added are kdec's 8 lanes (lane l: values 4 l
// .. 4 l + 3 of every chunk, scaled), and the f32 steps after them are
// kdec's, in its order (k4_dprep, k4_min_term): every output is the AVX2
// level's bit for bit. A lane sums fewer products than kdec's, within the
// AVX2 file's bounds; vpdpwssd wraps like pmaddwd + paddd.
//
// Codes: a row's 32 qs bytes of the pair broadcast to both halves (a load),
// one gf2p8affineqb keeping bits 0-3 of each byte in the low half and moving
// bits 4-7 down in the high half (one qword bit matrix per half); Q5_K's
// fifth bits: qh (32 bytes, both halves) rotated per dword so that chunk
// j's bit (bit j of qh[l]) lands on bit 4 of byte l, masked and or-ed in.
// Scales: a row's 8 (s, 128 s) dwords made once per super-block, each
// vector's S picked from them by one vpermd.
//
// Measured on the device host's Intel Xeon (the one AVX-512 machine the
// session that wrote this could reach: its own CPU, a Zen 3, has none),
// bench_levels TYPE K N 400 avx512 (ratio to the AVX2 tile, call by call), 4
// rounds at 4096x512, 2048x640, 1536x576, 1024x2048, medians: Q4_K 1.29-1.30
// and Q5_K 1.34-1.37, where the VNNI build of kdec ran 1.19-1.21 and
// 1.16-1.22. Tried there, slower: the nibbles by vpsrlvw + vpand (Q4_K
// 1.18-1.21, Q5_K 1.26-1.30: one op more a vector); B's move by vpslld + vpord
// instead of vpshldd (1.10 / 1.13-1.20); each row's 128 qs bytes as two
// 64-byte loads, the activations joined to match (1.15-1.28: the joins cost
// more than the broadcasts); the same products in 256-bit vectors, one chunk
// each with its S a broadcast dword from memory (1.16-1.26). 3 or 2 rows a
// tile (the vpsrlvw form, one round) ran 0.90-1.06x the ratio of 4. On Zen 4
// (512-bit operations in two 256-bit halves) it lost to the VNNI decode
// tile; on Zen 5 it wins (wk_kern_cpu_kind; bench/RESULTS.md,
// sessions 24 and 25).
#define AT                                                                  \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni," \
                         "avx512vbmi2,gfni")))
#include "backend/cpu/kernels/act16_x86.h"
#include "backend/cpu/kernels/act16_kdec.h"
#include "backend/cpu/kernels/act16_avx512_kw.h"
#include "quant/types.h"

// Keeps v in a register at this point (any of the 32).
#define KW_KEEP(v) __asm__("" : "+v"(v))

// Offset of a block's qs (its 128 nibble bytes); Q5_K's qh is at 16.
AT AI int kw_qs(const int type) { return type == WK_Q4_K ? 16 : 48; }

// One code vector against its activation bytes (lo, hi), scaled by S, into
// *acc (see the top).
AT AI void kw_product(__m512i v, __m512i xl, __m512i xh, __m512i s, __m512i *acc) {
  __m512i c = _mm512_dpbusd_epi32(_mm512_set1_epi32(-128), v, xh);
  c = _mm512_shldi_epi32(c, _mm512_set1_epi32(0x40000000), 16);
  c = _mm512_dpbusd_epi32(c, v, xl);
  *acc = _mm512_dpwssd_epi32(*acc, c, s);
  KW_KEEP(*acc);
}

// The codes of chunks 2 m (low half) and 2 m + 1 (high half) of the block
// at b; qh: Q5_K's 32 qh bytes in both halves.
AT AI __m512i kw_codes(const int type, const uint8_t *b, int m, __m512i qh) {
  // bit matrices (output bit o takes input bit q: byte 7 - o, bit q): bits
  // 0-3 kept (low half), bits 4-7 to 0-3 (high half)
  const long long keep = 0x0102040800000000ll, down = 0x1020408000000000ll;
  const __m512i mat = _mm512_setr_epi64(keep, keep, keep, keep, down, down, down, down);
  const __m512i x = _mm512_broadcast_i64x4(a16_load(b + kw_qs(type) + 32 * m));
  const __m512i v = _mm512_gf2p8affine_epi64_epi8(x, mat, 0);
  if (type != WK_Q5_K) return v;
  // chunk j's bit to bit 4: a dword rotate left by 4 - j (mod 32)
  const int ra = (4 - 2 * m) & 31, rc = (3 - 2 * m) & 31;
  const __m512i rot = _mm512_setr_epi32(ra, ra, ra, ra, ra, ra, ra, ra, rc, rc, rc, rc, rc, rc,
                                        rc, rc);
  const __m512i h = _mm512_and_si512(_mm512_rolv_epi32(qh, rot), _mm512_set1_epi8(16));
  return _mm512_or_si512(v, h);
}

// R rows (w, w + ws, ..) x one token over nb super-blocks -> y[r * yr].
AT AI void kwdec(const int type, const int R, const uint8_t *w, size_t ws, int64_t nb,
                 const uint8_t *xq, float *y, size_t yr) {
  const int bytes = a16_k_bytes(type);
  const wk_act16k *act = (const wk_act16k *)xq;
  __m256 acc[A16_MAXR];
  A16_UNROLL for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
  k4dprep p4s[2];  // super-block b's scales, mins, d in p4s[b % 2], made one ahead
  if (nb > 0) k4_dprep(R, w, ws, act[0].d, &p4s[0]);
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t *blk = w + (size_t)b * (size_t)bytes;
    const int8_t *q = (const int8_t *)xq + wk_act16_bytes(WK_ACT_A16K, nb, b);
    k4dprep *pp = &p4s[b & 1];
    a16_ahead(R, blk, ws, b, (size_t)bytes, A16_K_AHEAD);
    if (b + 1 < nb) k4_dprep(R, blk + bytes, ws, act[b + 1].d, &p4s[(b + 1) & 1]);
    __m512i sr[A16_MAXR], qh[A16_MAXR], isum[A16_MAXR];
    A16_UNROLL for (int r = 0; r < R; r++) {
      // dword j: chunk j's s + (128 s << 16)
      __m256i s = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)pp->sm[r]));
      sr[r] = _mm512_zextsi256_si512(_mm256_add_epi32(s, _mm256_slli_epi32(s, 23)));
      isum[r] = _mm512_setzero_si512();
      qh[r] = type == WK_Q5_K ? _mm512_broadcast_i64x4(a16_load(blk + (size_t)r * ws + 16))
                              : _mm512_setzero_si512();
    }
    A16_UNROLL for (int m = 0; m < 4; m++) {  // chunks 2 m, 2 m + 1
      const __m512i xl = _mm512_loadu_si512(q + 64 * m), xh = _mm512_loadu_si512(q + 256 + 64 * m);
      const int a = 2 * m, c = 2 * m + 1;
      const __m512i idx = _mm512_setr_epi32(a, a, a, a, a, a, a, a, c, c, c, c, c, c, c, c);
      A16_UNROLL for (int r = 0; r < R; r++)
          kw_product(kw_codes(type, blk + (size_t)r * ws, m, qh[r]), xl, xh,
                     _mm512_permutexvar_epi32(idx, sr[r]), &isum[r]);
    }
    const __m256 sums = k4_chunk_sums(&act[b]);
    A16_UNROLL for (int r = 0; r < R; r++) {  // kdec's f32 steps
      const __m256i t = _mm256_add_epi32(_mm512_castsi512_si256(isum[r]),
                                         _mm512_extracti64x4_epi64(isum[r], 1));
      const __m256 dd = _mm256_broadcast_ss(&pp->dm[2 * r]);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), dd, acc[r]);
      acc[r] = k4_min_term(acc[r], k4_mins(pp, r), sums, _mm256_broadcast_ss(&pp->dm[2 * r + 1]));
    }
  }
  A16_UNROLL for (int r = 0; r < R; r++) y[(size_t)r * yr] = a16_hsum(acc[r]);
}

// Decode tiles of 4 rows (and 1), as kdec's.
A16_DEC_TYPE(q4_k, WK_Q4_K, kwdec, 4)
A16_DEC_TYPE(q5_k, WK_Q5_K, kwdec, 4)

int wk_act16_avx512_kw_find(int type, wk_vec_dot_fn *dot, wk_gemm_fn *gemm) {
  const wk_gemm_fn g = type == WK_Q4_K ? q4_k_gemm : type == WK_Q5_K ? q5_k_gemm : NULL;
  __builtin_cpu_init();
  if (!g || !__builtin_cpu_supports("avx512vbmi2") || !__builtin_cpu_supports("gfni") ||
      !wk_act16_avx2_find(type, dot, gemm))
    return 0;
  *gemm = g;  // *dot: the AVX2 level's
  return 1;
}

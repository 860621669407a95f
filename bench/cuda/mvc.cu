// A column-stationary matrix-vector kernel for the wide Q4_K / Q5_K format
// (session 23; written after the session's last device call: compiled, not
// yet run). mvpat.cu part 2 measured the register kernel's dot losing 17-30
// points of the copy rate to its own loads, and x held in registers by a warp
// on fixed columns walking rows gaining 6-9 of them (71% at 33 MB, 92% at 235
// MB with each row's warp sum). This is that shape as a kernel:
//
//   a block takes a tile of RB rows (one tile a block where the grid allows);
//   its warps split the row's steps (a step: 8 super-blocks, 2048 columns, as
//   mvr_w4.cuh) and the tile's rows: warp w takes step s = w % S and rows
//   q, q + Q, ... of the tile (q = w / S, Q = NW / S; warps past S Q idle);
//   each warp loads its step's x once (mvr_load_x4: 16 words of each plane
//   and two scale/sum pairs) and streams its rows through a ring of D + 1
//   register sets, a row's sum over the warp (5 shuffles) into part[s][row];
//   after a barrier the block adds each row's S parts in step order (fixed:
//   the same bits whatever the grid) and writes y.
//
// The probe checks y against the engine's register kernel (mvr_launch at
// mvr_w4_cfg's shape: the same int32 sums per super-block, other f32 order,
// so within ~1e-5 of max |y|) and times both at the 8B decode's shapes, each
// launch on the next copy of W in a 1 GiB buffer (nothing from L2).
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Iinclude bench/cuda/mvc.cu -o mvc && ./mvc
#include "backend/cuda/internal.cuh"
#include "backend/cuda/mvr.cuh"

#include "probe_util.cuh"

template <int T, int NW, int D>
__global__ void __launch_bounds__(NW * 32, 1)
    k_mvc(const uint8_t *__restrict__ W, size_t row_bytes, int rows, int cols, int RB,
          const float *__restrict__ x, float *__restrict__ y) {
  using F = mvr_wide4<T>;
  using Wt = typename F::w_t;
  extern __shared__ uint4 mvc_smem[];
  __shared__ float red[32];
  uint8_t *const xq = (uint8_t *)mvc_smem;
  float *const part = (float *)(xq + mvr_xbytes<T>(cols));  // [S][RB]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sub = lane >> 2, p = lane & 3;
  const int bpr = cols / 256, S = (bpr + 7) / 8, Q = NW / S;
  const int s = warp % S, q = warp / S, b = s * 8 + sub;
  const bool ok = b < bpr, active = q < Q;
  const size_t off = (size_t)(ok ? b : bpr - 1) * qtype<T>::BYTES;  // the lane's block in a row
  const int tiles = (rows + RB - 1) / RB;

  // The first tile's first D rows before the wait (weights depend on nothing).
  Wt w[D + 1];
  auto row_of = [&](int tile, int i) { return min(tile * RB + q + Q * i, rows - 1); };
  auto rows_of = [&](int tile) {  // this warp's rows of the tile
    const int n = min(RB, rows - tile * RB) - q;
    return active && n > 0 ? (n + Q - 1) / Q : 0;
  };
  int tile = blockIdx.x;
  if (tile < tiles)
#pragma unroll
    for (int k = 0; k < D; k++)
      if (k < rows_of(tile)) F::load(w[k], W + (size_t)row_of(tile, k) * row_bytes + off, p);
  pdl_launch_next();
  pdl_wait();
  const float rs = mvr_round_x16(x, cols, nullptr, 0.0f, xq, red);
  mvr_x4 xr;
  F::load_x(xr, xq, cols, ok ? b : bpr - 1, p, ok);

  for (; tile < tiles; tile += gridDim.x) {
    const int n = rows_of(tile);
    auto load = [&](Wt &v, int i) { F::load(v, W + (size_t)row_of(tile, i) * row_bytes + off, p); };
    auto compute = [&](const Wt &v, int i) {
      const float d = warp_sum(F::dot(v, xr, p));
      if (lane == 0) part[s * RB + q + Q * i] = d;
    };
    if (tile != (int)blockIdx.x)  // a later tile: its first D rows (the first's are in flight)
#pragma unroll
      for (int k = 0; k < D; k++)
        if (k < n) load(w[k], k);
    for (int i0 = 0; i0 < n; i0 += D + 1) {
#pragma unroll
      for (int k = 0; k <= D; k++) {
        const int i = i0 + k;
        if (i >= n) break;
        if (i + D < n) load(w[(k + D) % (D + 1)], i + D);
        compute(w[k], i);
      }
    }
    __syncthreads();
    const int r0 = tile * RB, nr = min(RB, rows - r0);
    for (int r = threadIdx.x; r < nr; r += blockDim.x) {
      float a = 0.0f;
      for (int t = 0; t < S; t++) a += part[t * RB + r];
      y[r0 + r] = a * rs;
    }
    __syncthreads();
  }
}

// Launch: one wave of NW-warp blocks (one an SM), RB rows a tile so that the
// tiles fill the wave.
template <int T, int NW, int D>
static cudaError_t mvc_launch(const uint8_t *W, size_t row_bytes, int rows, int cols,
                              const float *x, float *y, bool pdl, cudaStream_t st) {
  int sms = 0;
  PCK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int S = (cols / 256 + 7) / 8;
  if (S > NW) return cudaErrorInvalidValue;
  const int RB = (rows + sms - 1) / sms;
  const size_t smem = mvr_xbytes<T>(cols) + (size_t)S * RB * sizeof(float);
  auto kern = k_mvc<T, NW, D>;
  if (smem > 48 * 1024)
    PCK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  const int tiles = (rows + RB - 1) / RB;
  return cu_launch(pdl, st, dim3(tiles), dim3(NW * 32), smem, kern, W, row_bytes, rows, cols, RB, x, y);
}


template <int T>
static void table(const char *tname, uint8_t *buf, const float *x, float *y, double bw) {
  const int rb = qtype<T>::BYTES;
  struct dims { int rows, cols; };
  for (dims d : {dims{4096, 14336}, dims{14336, 4096}, dims{6144, 4096}, dims{4096, 4096}}) {
    const size_t row_bytes = (size_t)d.cols / 256 * rb, mat = row_bytes * d.rows;
    const int copies = (int)((1ull << 30) / mat);
    printf("%s %dx%d (%.1f MB):", tname, d.rows, d.cols, mat / 1e6);
    std::vector<float> ref(d.rows), h(d.rows);
    for (int v = 0; v < 4; v++) {
      auto run = [&](const uint8_t *w, cudaStream_t st, int pdl) -> cudaError_t {
        if (v == 0) {
          mv_jobs js = {};
          js.j[0] = {w, row_bytes, d.rows, 0, y};
          js.n = 1, js.pf = -1;
          using C = mvr_w4_cfg<T, false>;
          return mvr_launch<T, C::NT, C::RW, C::D, false, mvr_wide4<T>>(js, d.cols, x, 1, 0.0f, 0, pdl != 0, st);
        }
        if (v == 1) return mvc_launch<T, 16, 3>(w, row_bytes, d.rows, d.cols, x, y, pdl != 0, st);
        if (v == 2) return mvc_launch<T, 16, 2>(w, row_bytes, d.rows, d.cols, x, y, pdl != 0, st);
        return mvc_launch<T, 8, 3>(w, row_bytes, d.rows, d.cols, x, y, pdl != 0, st);
      };
      int i = 0;
      double us = graph_us([&](cudaStream_t st, int pdl) { PCK(run(buf + mat * (size_t)(i++ % copies), st, pdl)); }, 1);
      PCK(cudaMemset(y, 0xff, d.rows * sizeof(float)));
      PCK(run(buf, 0, 0));
      PCK(cudaDeviceSynchronize());
      PCK(cudaMemcpy(h.data(), y, d.rows * sizeof(float), cudaMemcpyDeviceToHost));
      if (v == 0) ref = h;
      double md = 0, mr = 0;
      for (int r = 0; r < d.rows; r++) md = fmax(md, fabs(h[r] - ref[r])), mr = fmax(mr, fabs(ref[r]));
      static const char *names[] = {"engine 512/2/1", "mvc 16w D3", "mvc 16w D2", "mvc 8w D3"};
      printf(" | %s %.2f us %.0f%% (max diff %.1e of max |y|)", names[v], us,
             100.0 * mat / (us * 1e-6) / 1e9 / bw, mr > 0 ? md / mr : md);
    }
    printf("\n");
  }
}

int main() {
  const double bw = copy_gbps();
  printf("copy rate %.0f GB/s (read + write)\n", bw);
  uint8_t *buf;
  float *x, *y;
  mv_probe_buffers(&buf, &x, &y, 14336);
  for (int rep = 0; rep < 2; rep++) {
    k_fill_blocks<<<1024, 256>>>(buf, 1ull << 30, 144);
    table<WK_Q4_K>("q4_k", buf, x, y, bw);
    k_fill_blocks<<<1024, 256>>>(buf, 1ull << 30, 176);
    table<WK_Q5_K>("q5_k", buf, x, y, bw);
  }
  return 0;
}

// The register kernel's wide Q4_K / Q5_K format (k_mvr, mvr_w4.cuh) at
// other (threads, rows a unit, items ahead) shapes than mvr_w4_cfg's
// (512, 2, 1), standalone (session 23). mvpat.cu part 2 found x read from
// shared memory for every unit is what the dot loses most to: more rows a
// unit share each x read (RW), at the cost of registers (fewer threads).
// Each shape: us a launch (median of 7 replays of a graph of 20 launches,
// each on the next copy of W in a 1 GiB buffer, so nothing is read from
// L2), dependent launch, % of the copy rate, at 4096x14336 and 14336x4096
// and the 8B decode's Q/K/V (6144x4096), o (4096x4096) and gate/up
// (2 x 14336x4096, GLU); every shape's y checked equal to the default's.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -Isrc -Iinclude bench/cuda/mvrw.cu -o mvrw && ./mvrw
#include "backend/cuda/internal.cuh"
#include "backend/cuda/mvr.cuh"

#include "probe_util.cuh"


struct shape {
  const char *name;
  cudaError_t (*run)(mv_jobs, int, const float *, bool, cudaStream_t);
};

template <int T, int NT, int RW, int D, bool GLU>
static cudaError_t run_w(mv_jobs js, int cols, const float *x, bool pdl, cudaStream_t st) {
  return mvr_launch<T, NT, RW, D, GLU, mvr_wide4<T>>(js, cols, x, 1, 0.0f, 0, pdl, st);
}

template <int T, bool GLU>
static std::vector<shape> shapes() {
  return {{"512/2/1 (default)", run_w<T, 512, 2, 1, GLU>},
          {"512/1/3", run_w<T, 512, 1, 3, GLU>},
          {"512/3/1", run_w<T, 512, 3, 1, GLU>},
          {"256/2/3", run_w<T, 256, 2, 3, GLU>},
          {"256/4/1", run_w<T, 256, 4, 1, GLU>},
          {"256/6/1", run_w<T, 256, 6, 1, GLU>},
          {"384/4/1", run_w<T, 384, 4, 1, GLU>}};
}

template <int T, bool GLU>
static void table(const char *tname, uint8_t *buf, const float *x, float *y, double bw) {
  const int rb = T == WK_Q4_K ? 144 : 176;
  struct dims { int rows, cols; const char *what; };
  std::vector<dims> all = GLU ? std::vector<dims>{{14336, 4096, "gate/up 2x14336x4096"}}
                              : std::vector<dims>{{4096, 14336, "4096x14336"}, {14336, 4096, "14336x4096"},
                                                  {6144, 4096, "6144x4096"}, {4096, 4096, "4096x4096"}};
  std::vector<float> ref;
  for (const dims &d : all) {
    const size_t row_bytes = (size_t)d.cols / 256 * rb, mat = row_bytes * d.rows * (GLU ? 2 : 1);
    const int copies = (int)((1ull << 30) / mat);
    printf("%s %s (%.1f MB):", tname, d.what, mat / 1e6);
    const std::vector<shape> sh = shapes<T, GLU>();
    for (size_t si = 0; si < sh.size(); si++) {
      const shape &s = sh[si];
      int i = 0;
      auto launch = [&](cudaStream_t st, int pdl) {
        const uint8_t *w = buf + mat * (size_t)(i++ % copies);
        mv_jobs js = {};
        js.j[0] = {w, row_bytes, d.rows, 0, y};
        if (GLU) js.j[1] = {w + row_bytes * d.rows, row_bytes, d.rows, 0, y}, js.n = 2;
        else js.n = 1;
        js.pf = -1;
        PCK(s.run(js, d.cols, x, pdl != 0, st));
      };
      double us = graph_us(launch, 1);
      // check against the default shape's y on copy 0
      std::vector<float> h(d.rows);
      PCK(cudaMemset(y, 0xff, d.rows * sizeof(float)));
      i = 0;
      launch(0, 0);
      PCK(cudaDeviceSynchronize());
      PCK(cudaMemcpy(h.data(), y, d.rows * sizeof(float), cudaMemcpyDeviceToHost));
      if (si == 0) ref = h;
      double md = 0, mr = 0;
      for (int r = 0; r < d.rows; r++) md = fmax(md, fabs(h[r] - ref[r])), mr = fmax(mr, fabs(ref[r]));
      printf(" | %s %.2f us %.0f%%%s", s.name, us, 100.0 * mat / (us * 1e-6) / 1e9 / bw,
             md <= 1e-5 * mr ? "" : " DIFFERS");
    }
    printf("\n");
    ref.clear();
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
    table<WK_Q4_K, false>("q4_k", buf, x, y, bw);
    table<WK_Q4_K, true>("q4_k", buf, x, y, bw);
    k_fill_blocks<<<1024, 256>>>(buf, 1ull << 30, 176);
    table<WK_Q5_K, false>("q5_k", buf, x, y, bw);
  }
  return 0;
}

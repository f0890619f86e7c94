/* STREAM-style triad, a[i] = b[i] + s * c[i], for the decode-bandwidth part of
 * scripts/bench-vs-llama-cpp.sh. Compiled on the fly into .cache/ (gcc -O3 -march=native -fopenmp).
 * Usage: stream-triad [MiB per array, default 256] [repetitions, default 10]
 * Threads: OMP_NUM_THREADS. Counts 3 x 8 bytes per element per pass (two reads, one write), as STREAM
 * does (no write-allocate traffic), and prints the best and the mean pass in GB/s (1e9 bytes). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
  const long mib = argc > 1 ? atol(argv[1]) : 256;
  const int reps = argc > 2 ? atoi(argv[2]) : 10;
  const long n = mib * 1024 * 1024 / 8;
  double *a = aligned_alloc(64, (size_t)n * 8), *b = aligned_alloc(64, (size_t)n * 8), *c = aligned_alloc(64, (size_t)n * 8);
  if (!a || !b || !c) { fprintf(stderr, "stream-triad: out of memory\n"); return 1; }
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) { a[i] = 0.0; b[i] = 1.0; c[i] = 2.0; }  /* first touch by the thread that uses it */
  const double s = 3.0;
  double best = 0, sum = 0;
  for (int r = 0; r < reps + 1; ++r) {
    const double t0 = now();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
    const double gbs = 3.0 * 8.0 * (double)n / (now() - t0) / 1e9;
    if (r == 0) continue;  /* warm-up pass */
    sum += gbs;
    if (gbs > best) best = gbs;
  }
  double check = 0;
  for (long i = 0; i < n; i += 4096) check += a[i];
  printf("threads %d, arrays 3 x %ld MiB, %d passes: triad best %.2f GB/s, mean %.2f GB/s (check %.0f)\n",
         omp_get_max_threads(), mib, reps, best, sum / reps, check);
  return 0;
}

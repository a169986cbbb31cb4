/* FMA throughput: every thread updates ACCUMULATORS independent vectors of VECTOR_BYTES bytes,
 * acc = acc * m + c, in a loop; with FMA the compiler fuses each update into one instruction, so
 * the loop runs at the core's fused multiply-add peak when ACCUMULATORS covers latency x ports.
 * Built with -DVECTOR_BYTES and -DACCUMULATORS for the widest vector ISA the CPU reports.
 *
 *     fma CPU_LIST MIN_SECONDS REPEATS  ->  {"gflops": ..., "lanes": ..., "fused": ...}
 *
 * The loop count doubles until one timed round takes MIN_SECONDS; then REPEATS rounds are timed
 * and the fastest counts. FLOPs: 2 per lane per update, fused or not. */
#include "peak_team.h"

#ifndef VECTOR_BYTES
#error "build with -DVECTOR_BYTES=<bytes of one vector register>"
#endif
#ifndef ACCUMULATORS
#error "build with -DACCUMULATORS=<independent accumulators per thread>"
#endif

typedef float vec __attribute__((vector_size(VECTOR_BYTES)));
#define LANES ((int)(VECTOR_BYTES / sizeof(float)))

#if defined(__FMA__) || defined(__ARM_FEATURE_FMA) || defined(__AVX512F__)
#define FUSED 1
#else
#define FUSED 0
#endif

static volatile float multiplier_seed = 0.999999f; /* volatile: the compiler cannot fold the loop */
static volatile float addend_seed = 1e-6f;

typedef struct {
    long iterations;
    float sink[256];
} fma_context;

static void fma_job(int thread, int threads, void *argument) {
    (void)threads;
    fma_context *context = argument;
    const vec m = (vec){} + multiplier_seed;
    const vec c = (vec){} + addend_seed;
    vec acc[ACCUMULATORS];
    for (int k = 0; k < ACCUMULATORS; ++k) acc[k] = (vec){} + (float)(k + thread) * 1e-3f;
    for (long i = 0; i < context->iterations; ++i) {
#pragma GCC unroll 64
        for (int k = 0; k < ACCUMULATORS; ++k) acc[k] = acc[k] * m + c;
    }
    float total = 0.0f;
    for (int k = 0; k < ACCUMULATORS; ++k)
        for (int lane = 0; lane < LANES; ++lane) total += acc[k][lane];
    context->sink[thread % 256] = total; /* the result is used: the loop stays */
}

int main(int argc, char **argv) {
    if (argc != 4) die("usage: fma CPU_LIST MIN_SECONDS REPEATS");
    team *t = team_start(argv[1]);
    double min_seconds = atof(argv[2]);
    int repeats = atoi(argv[3]);
    if (min_seconds <= 0 || repeats < 1) die("MIN_SECONDS and REPEATS must be positive");
    fma_context context = {.iterations = 1024};
    double elapsed = team_run(t, fma_job, &context); /* warm-up: threads started, clocks up */
    while (elapsed < min_seconds && context.iterations < (1L << 40)) {
        context.iterations *= 2;
        elapsed = team_run(t, fma_job, &context);
    }
    double best = elapsed;
    for (int r = 0; r < repeats; ++r) {
        double seconds = team_run(t, fma_job, &context);
        if (seconds < best) best = seconds;
    }
    team_stop(t);
    double flops = 2.0 * LANES * ACCUMULATORS * (double)context.iterations * t->threads;
    printf("{\"gflops\": %.6g, \"lanes\": %d, \"accumulators\": %d, \"fused\": %s, \"threads\": %d, "
           "\"seconds\": %.6g, \"check\": %g}\n",
           flops / best / 1e9, LANES, ACCUMULATORS, FUSED ? "true" : "false", t->threads, best,
           (double)context.sink[0]);
    return 0;
}

/* STREAM-style memory bandwidth: copy (c = a) and triad (a = b + s * c) over arrays of ARRAY_BYTES
 * each, every thread on its own contiguous slice (first touched by that thread), with ordinary
 * stores and with non-temporal stores (which skip reading the destination into the cache).
 * Built with -DVECTOR_BYTES for the widest vector ISA the CPU reports.
 *
 *     stream CPU_LIST ARRAY_BYTES REPEATS MIN_SECONDS KERNELS
 *         -> {"copy": GB/s, "copy_nt": GB/s or null, "triad": ..., "triad_nt": ..., ...}
 *
 * KERNELS is a comma list of copy, copy_nt, triad, triad_nt. One timed sample runs the kernel
 * enough passes to take MIN_SECONDS (one pass for arrays beyond the caches); after one warm-up
 * sample, the fastest of REPEATS counts. Bytes are counted as read plus written (copy 2 arrays,
 * triad 3), no write-allocate: the way a task's minimal bytes are counted. A kernel without
 * non-temporal stores on this ISA reports null. */
#include "peak_team.h"

#include <stdint.h>
#include <sys/mman.h>

#ifndef VECTOR_BYTES
#error "build with -DVECTOR_BYTES=<bytes of one vector register>"
#endif

typedef float vec __attribute__((vector_size(VECTOR_BYTES), aligned(VECTOR_BYTES)));

#if VECTOR_BYTES == 64 && defined(__AVX512F__)
#include <immintrin.h>
#define NT_STORE(pointer, value) _mm512_stream_ps((float *)(pointer), (__m512)(value))
#define NT_FENCE() _mm_sfence()
#elif VECTOR_BYTES == 32 && defined(__AVX__)
#include <immintrin.h>
#define NT_STORE(pointer, value) _mm256_stream_ps((float *)(pointer), (__m256)(value))
#define NT_FENCE() _mm_sfence()
#elif VECTOR_BYTES == 16 && defined(__SSE__)
#include <immintrin.h>
#define NT_STORE(pointer, value) _mm_stream_ps((float *)(pointer), (__m128)(value))
#define NT_FENCE() _mm_sfence()
#elif defined(__clang__)
#define NT_STORE(pointer, value) __builtin_nontemporal_store((value), (pointer))
#define NT_FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif

enum kernel { COPY, COPY_NT, TRIAD, TRIAD_NT, KERNELS };
static const char *kernel_names[KERNELS] = {"copy", "copy_nt", "triad", "triad_nt"};
static const int kernel_arrays[KERNELS] = {2, 2, 3, 3};

typedef struct {
    vec *a, *b, *c;
    size_t vectors; /* per array */
    long passes;
    enum kernel kernel;
    float scalar;
} stream_context;

static void slice(size_t vectors, int thread, int threads, size_t *begin, size_t *end) {
    *begin = vectors * (size_t)thread / (size_t)threads;
    *end = vectors * (size_t)(thread + 1) / (size_t)threads;
}

static void first_touch(int thread, int threads, void *argument) {
    stream_context *context = argument;
    size_t begin, end;
    slice(context->vectors, thread, threads, &begin, &end);
    for (size_t i = begin; i < end; ++i) {
        context->a[i] = (vec){} + 1.0f;
        if (context->b) context->b[i] = (vec){} + 2.0f;
        context->c[i] = (vec){} + 0.5f;
    }
}

static void stream_job(int thread, int threads, void *argument) {
    stream_context *context = argument;
    size_t begin, end;
    slice(context->vectors, thread, threads, &begin, &end);
    vec *restrict a = context->a, *restrict b = context->b, *restrict c = context->c;
    const float s = context->scalar;
    for (long pass = 0; pass < context->passes; ++pass) {
        switch (context->kernel) {
        case COPY:
            for (size_t i = begin; i < end; ++i) c[i] = a[i];
            break;
        case TRIAD:
            for (size_t i = begin; i < end; ++i) a[i] = b[i] + s * c[i];
            break;
#ifdef NT_STORE
        case COPY_NT:
            for (size_t i = begin; i < end; ++i) NT_STORE(&c[i], a[i]);
            NT_FENCE();
            break;
        case TRIAD_NT:
            for (size_t i = begin; i < end; ++i) NT_STORE(&a[i], b[i] + s * c[i]);
            NT_FENCE();
            break;
#endif
        default:
            break;
        }
        __asm__ __volatile__("" ::: "memory"); /* each pass really reads and writes memory */
    }
}

/* Aligned to huge pages and advised to use them where the kernel allows: fewer page faults when
 * the arrays are first touched, and fewer TLB misses in the sweeps. */
static vec *allocate(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    size_t alignment = bytes >= huge ? huge : 4096;
    size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    void *memory = aligned_alloc(alignment, rounded);
    if (!memory) die("cannot allocate the arrays");
#ifdef MADV_HUGEPAGE
    if (alignment == huge) madvise(memory, rounded, MADV_HUGEPAGE); /* advice: failure is harmless */
#endif
    return memory;
}

static double best_seconds(team *t, stream_context *context, int repeats, double min_seconds) {
    context->passes = 1;
    double elapsed = team_run(t, stream_job, context); /* warm-up, and the time of one pass */
    while (elapsed < min_seconds && context->passes < (1L << 30)) {
        context->passes *= 2;
        elapsed = team_run(t, stream_job, context);
    }
    double best = elapsed;
    for (int r = 0; r < repeats; ++r) {
        double seconds = team_run(t, stream_job, context);
        if (seconds < best) best = seconds;
    }
    return best;
}

int main(int argc, char **argv) {
    if (argc != 6) die("usage: stream CPU_LIST ARRAY_BYTES REPEATS MIN_SECONDS KERNELS");
    team *t = team_start(argv[1]);
    size_t array_bytes = strtoull(argv[2], NULL, 10);
    int repeats = atoi(argv[3]);
    double min_seconds = atof(argv[4]);
    if (array_bytes < (size_t)VECTOR_BYTES * t->threads || repeats < 1 || min_seconds < 0)
        die("ARRAY_BYTES must hold a vector per thread, REPEATS be positive, MIN_SECONDS >= 0");
    int wanted[KERNELS] = {0};
    for (int k = 0; k < KERNELS; ++k) {
        const char *found = strstr(argv[5], kernel_names[k]);
        /* "copy" is inside "copy_nt": a match counts only when a comma or the end follows it */
        while (found && !(found[strlen(kernel_names[k])] == ',' || found[strlen(kernel_names[k])] == '\0'))
            found = strstr(found + 1, kernel_names[k]);
        wanted[k] = found != NULL;
    }

    stream_context context = {.vectors = array_bytes / VECTOR_BYTES, .scalar = 3.0f};
    int triads = wanted[TRIAD] || wanted[TRIAD_NT]; /* only a triad reads the third array */
    context.a = allocate(context.vectors * VECTOR_BYTES);
    context.b = triads ? allocate(context.vectors * VECTOR_BYTES) : NULL;
    context.c = allocate(context.vectors * VECTOR_BYTES);
    team_run(t, first_touch, &context);

    double gbs[KERNELS];
    for (int k = 0; k < KERNELS; ++k) {
        gbs[k] = -1.0;
#ifndef NT_STORE
        if (k == COPY_NT || k == TRIAD_NT) continue;
#endif
        if (!wanted[k]) continue;
        context.kernel = (enum kernel)k;
        double seconds = best_seconds(t, &context, repeats, min_seconds);
        double bytes = (double)kernel_arrays[k] * (double)context.vectors * VECTOR_BYTES * (double)context.passes;
        gbs[k] = bytes / seconds / 1e9;
    }
    team_stop(t);
    printf("{");
    for (int k = 0; k < KERNELS; ++k) {
        if (gbs[k] < 0)
            printf("\"%s\": null, ", kernel_names[k]);
        else
            printf("\"%s\": %.6g, ", kernel_names[k], gbs[k]);
    }
    printf("\"array_bytes\": %zu, \"threads\": %d, \"check\": %g}\n", context.vectors * VECTOR_BYTES, t->threads,
           (double)context.a[0][0] + (double)context.c[context.vectors - 1][0]);
    return 0;
}

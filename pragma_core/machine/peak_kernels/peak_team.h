/* A team of threads for the peak kernels: one thread per CPU given, each pinned to its CPU, started
 * together at a barrier; team_run() times one round of the job on every thread (wall time from the
 * start barrier to the end barrier, as thread 0 sees it). Shared by fma.c and stream.c. */
#ifndef PEAK_TEAM_H
#define PEAK_TEAM_H

#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*team_job)(int thread, int threads, void *context);

typedef struct {
    int threads;
    int *cpus;
    pthread_t *handles;
    pthread_barrier_t start, end;
    team_job job;
    void *context;
    int quit;
} team;

typedef struct {
    team *owner;
    int thread;
} team_member;

static void die(const char *message) {
    fprintf(stderr, "%s\n", message);
    exit(2);
}

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void pin_to(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* best effort: unpinned still runs */
}

static void *team_loop(void *argument) {
    team_member *member = argument;
    team *owner = member->owner;
    pin_to(owner->cpus[member->thread]);
    for (;;) {
        pthread_barrier_wait(&owner->start);
        if (owner->quit) break;
        owner->job(member->thread, owner->threads, owner->context);
        pthread_barrier_wait(&owner->end);
    }
    return NULL;
}

/* "0,1,5": one thread per CPU listed; the calling thread is thread 0. */
static team *team_start(const char *cpu_list) {
    team *t = calloc(1, sizeof *t);
    char *copy = strdup(cpu_list), *saveptr = NULL;
    if (!t || !copy) die("out of memory");
    int capacity = 1;
    for (const char *c = cpu_list; *c; ++c) capacity += *c == ',';
    t->cpus = calloc((size_t)capacity, sizeof *t->cpus);
    t->handles = calloc((size_t)capacity, sizeof *t->handles);
    for (char *item = strtok_r(copy, ",", &saveptr); item; item = strtok_r(NULL, ",", &saveptr))
        t->cpus[t->threads++] = atoi(item);
    free(copy);
    if (t->threads < 1) die("no CPU given");
    pthread_barrier_init(&t->start, NULL, (unsigned)t->threads);
    pthread_barrier_init(&t->end, NULL, (unsigned)t->threads);
    pin_to(t->cpus[0]);
    for (int i = 1; i < t->threads; ++i) {
        team_member *member = malloc(sizeof *member);
        if (!member) die("out of memory");
        member->owner = t;
        member->thread = i;
        if (pthread_create(&t->handles[i], NULL, team_loop, member) != 0) die("cannot start a thread");
    }
    return t;
}

/* Run job on every thread once; the seconds from all starting to all finishing. */
static double team_run(team *t, team_job job, void *context) {
    t->job = job;
    t->context = context;
    pthread_barrier_wait(&t->start);
    double started = now_seconds();
    job(0, t->threads, context);
    pthread_barrier_wait(&t->end);
    return now_seconds() - started;
}

static void team_stop(team *t) {
    t->quit = 1;
    pthread_barrier_wait(&t->start);
    for (int i = 1; i < t->threads; ++i) pthread_join(t->handles[i], NULL);
}

#endif

// Linux headers that Glibc's Swift module does not export.
#ifndef TOKENPROXY_CSYSTEM_H
#define TOKENPROXY_CSYSTEM_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/inotify.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/file.h>
#include <sched.h>
#include <signal.h>

// CPU_COUNT is a macro.
static inline int tp_cpu_count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
    return CPU_COUNT(&set);
}
#endif

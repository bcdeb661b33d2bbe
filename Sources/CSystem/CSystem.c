#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <sys/socket.h>
#include "CSystem.h"

int tp_cpu_count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
    return CPU_COUNT(&set);
}

int tp_accept4(int fd, struct sockaddr *addr, unsigned int *len, int flags) {
    return accept4(fd, addr, (socklen_t *)len, flags);
}

int tp_set_thread_name(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}

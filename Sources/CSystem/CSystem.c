#define _GNU_SOURCE
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

// Linux headers that Glibc's Swift module does not export.
#ifndef TOKENPROXY_CSYSTEM_H
#define TOKENPROXY_CSYSTEM_H
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/inotify.h>

/// CPUs in this process's affinity mask (0 on failure). CPU_COUNT is a macro, so it lives in C.
int tp_cpu_count(void);

struct sockaddr;
/// accept4(2), declared by glibc only under _GNU_SOURCE.
int tp_accept4(int fd, struct sockaddr *addr, unsigned int *len, int flags);

/// Names the calling thread (pthread_setname_np, declared only under _GNU_SOURCE); at most 15 bytes.
int tp_set_thread_name(const char *name);
#endif
